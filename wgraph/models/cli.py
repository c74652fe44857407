"""`python -m wgraph generate PATH --prompt-ids 1,2,3 --max-new-tokens 32`: load a Hugging Face Llama directory
and print the generated ids, with a progress line on stderr."""

from __future__ import annotations

import argparse
import os
import sys


def _ids(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m wgraph generate", description=__doc__)
    p.add_argument("path", help="a directory with config.json and *.safetensors")
    p.add_argument("--prompt-ids", type=_ids, required=True, help="token ids, e.g. 1,2,3")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--dtype", choices=("f16", "f32"), help="weight dtype (default: f16 where the device has it)")
    p.add_argument("--max-seq", type=int, help="KV cache positions (default: min(max_position_embeddings, 2048))")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stop-ids", type=_ids, default=[], help="stop at the first of these ids")
    p.add_argument("--in-flight", type=int, default=8, help="decode steps submitted ahead of the GPU")
    p.add_argument("--read-every", type=int, default=8, help="read the ids back (and update progress) every N tokens")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    import wgraph as wg
    from wgraph.models import Llama

    dev = wg.default_device()
    dtype = args.dtype or ("f16" if dev.caps.has_f16 else "f32")
    try:
        model = Llama.from_pretrained(args.path, dev, dtype=dtype, max_seq=args.max_seq)
    except wg.WgraphError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    n = args.max_new_tokens

    def progress(done: int, seconds: float):
        print(f"\r{done}/{n} tokens, {done / seconds:.1f} tokens/s", end="", file=sys.stderr, flush=True)

    try:
        ids = model.generate(args.prompt_ids, n, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                             seed=args.seed, stop_ids=args.stop_ids, in_flight=args.in_flight,
                             read_every=args.read_every, progress=progress)
    except wg.WgraphError as e:
        print(f"\nerror: {e}", file=sys.stderr)
        return 1
    st = model.last_stats
    print(f"\n{len(ids)} tokens in {st['seconds']:.3f} s on {dev.caps.adapter_name} ({dtype} weights), "
          f"{st['submits']} submits, {st['readbacks']} readbacks", file=sys.stderr)
    print(",".join(map(str, ids)))
    return 0
