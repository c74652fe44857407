"""`python -m wgraph <command>`: the benchmark, the soak test and plots of saved results (`--help` lists them)."""

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
    lines = ["usage: python -m wgraph <command> [options]", "",
             "wgraph: GPU compute ops (attention first) on WebGPU. Commands:", ""]
    lines += [f"  {name:{width}}  {line}" for name, (_, line) in COMMANDS.items()]
    lines += ["", "python -m wgraph <command> --help shows a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"unknown command {argv[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    result = importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:])
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
