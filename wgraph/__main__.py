"""`python -m wgraph bench ...` (see `python -m wgraph bench --help`)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m wgraph bench [--quick] [--json PATH] [--only host|attention] [--grid ...]\n"
              "       python -m wgraph bench --help\n"
              "       python -m wgraph soak [--steps N] [--calls N] [--write-doc docs/benchmarks.md]\n"
              "       python -m wgraph generate PATH --prompt-ids 1,2,3 [--max-new-tokens 32] (see --help)")
        return 0 if argv else 2
    if argv[0] == "bench":
        from wgraph.bench import main as bench_main

        bench_main(argv[1:])
        return 0
    if argv[0] == "soak":
        from wgraph.soak import main as soak_main

        return soak_main(argv[1:])
    if argv[0] == "generate":
        return _generate(argv[1:])
    print(f"unknown command {argv[0]!r}; try: python -m wgraph bench --help", file=sys.stderr)
    return 2


def _generate(argv: list[str]) -> int:
    from wgraph.models.cli import main as generate_main

    return generate_main(argv)


if __name__ == "__main__":
    sys.exit(main())
