"""`python -m wgraph <command>` (or `wgraph <command>`, the console script): the benchmark, the soak test, text
generation and plots of saved results (`--help` lists them; `--version`)."""

from __future__ import annotations

import importlib
import sys

# command -> (module with main(argv) -> int | dict, one line); each command parses its own options (--help)
COMMANDS = {
    "bench": ("wgraph.bench", "host cost per dispatch and attention throughput, beside torch SDPA (CUDA) if present"),
    "soak": ("wgraph.soak", "replays and immediate calls: PASS (exit 0) if GPU buffers and RSS stay flat, else FAIL"),
    "plot": ("wgraph.bench.plot", "plot a saved bench JSON, throughput vs size (no GPU; pip install wgraph[plot])"),
    "generate": ("wgraph.models.cli", "load a Hugging Face directory or a GGUF file, stream generated text (docs/models.md)"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: python -m wgraph <command> [options]   (or: wgraph <command> [options])", "",
             "wgraph: GPU compute ops (attention first) on WebGPU. Commands:", ""]
    lines += [f"  {name:{width}}  {line}" for name, (_, line) in COMMANDS.items()]
    lines += ["", "python -m wgraph <command> --help shows a command's options; --version prints wgraph's version.",
              "Progress goes to stderr (a bar on a terminal, plain lines otherwise; WGRAPH_QUIET=1: none)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:   # a usage error: on stderr, as argparse and the unknown command's (stdout may be a pipe's input)
        print(f"no command given\n\n{usage()}", file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if argv[0] in ("-V", "--version"):
        from wgraph.version import __version__

        print(f"wgraph {__version__}")
        return 0
    if argv[0] not in COMMANDS:
        print(f"unknown command {argv[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    from wgraph.errors import WgraphError

    try:
        result = importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:])
    except WgraphError as e:   # e.g. no adapter matches WGRAPH_ADAPTER: a runtime failure (1), said, not a traceback
        print(f"python -m wgraph {argv[0]}: error: {e}", file=sys.stderr)
        return 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
