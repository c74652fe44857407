"""A small random checkpoint in Hugging Face layout (config.json + *.safetensors), written with numpy and the
`safetensors` package: what examples and tests load where no model can be downloaded. `tiny_config` is a Llama
config; `random_weights` makes the tensors of any config the decoder reads (biases, per-head norms, Gemma's
extra norms included)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import safetensors

from wgraph import args
from wgraph.dtypes import as_f32, from_bf16, to_bf16

STORAGE = ("f32", "f16", "bf16")


def tiny_config(**overrides) -> dict:
    """A config.json dict: 2 layers, hidden 64, 4/2 heads, vocab 100 unless overridden."""
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 100, "hidden_size": 64,
           "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 16, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 256,
           "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False}
    cfg.update(overrides)
    return cfg


def random_weights(cfg: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """float32 weights named as in transformers' ...ForCausalLM of the config's architecture; scaled so
    activations stay O(1): matrices N(0, 1/fan_in), embeddings N(0, 1), norms near 1 (as the model applies them:
    Gemma's hold w of 1 + w), biases N(0, 0.1^2)."""
    from wgraph.models.config import DecoderConfig
    from wgraph.models.llama import weight_shapes

    config = DecoderConfig.from_dict(cfg)
    rng = np.random.default_rng(seed)
    h, i, v, n = config.hidden_size, config.intermediate_size, config.vocab_size, config.num_hidden_layers
    q, kv = config.num_attention_heads * config.head_dim, config.num_key_value_heads * config.head_dim

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), np.float32) / np.sqrt(cols)).astype(np.float32)

    def norm(size=h):
        return (1.0 - config.norm_offset + 0.1 * rng.standard_normal(size, np.float32)).astype(np.float32)

    w = {"model.embed_tokens.weight": rng.standard_normal((v, h), np.float32), "model.norm.weight": norm()}
    for layer in range(n):
        p = f"model.layers.{layer}."
        w.update({p + "input_layernorm.weight": norm(), p + "post_attention_layernorm.weight": norm(),
                  p + "self_attn.q_proj.weight": mat(q, h), p + "self_attn.k_proj.weight": mat(kv, h),
                  p + "self_attn.v_proj.weight": mat(kv, h), p + "self_attn.o_proj.weight": mat(h, q),
                  p + "mlp.gate_proj.weight": mat(i, h), p + "mlp.up_proj.weight": mat(i, h),
                  p + "mlp.down_proj.weight": mat(h, i)})
    if not config.tie_word_embeddings:
        w["lm_head.weight"] = mat(v, h)
    for name, shape in weight_shapes(config).items():  # what this architecture adds to Llama's tensors
        if name not in w:
            w[name] = norm(shape[0]) if name.endswith("norm.weight") else \
                (0.1 * rng.standard_normal(shape, np.float32)).astype(np.float32)
    return w


def stored_values(w: np.ndarray, storage: str) -> np.ndarray:
    """What a float32 array reads back as after being stored as `storage` (float32 values)."""
    if storage == "f16":
        return w.astype(np.float16).astype(np.float32)
    if storage == "bf16":
        return from_bf16(to_bf16(w))
    return w


def write_checkpoint(path, cfg: dict, weights: dict[str, np.ndarray], *, storage: str = "f32",
                     shards: int = 1) -> Path:
    """Write config.json and the weights as `storage` (f32, f16 or bf16) into `shards` .safetensors files
    (with model.safetensors.index.json when more than one)."""
    # a bare ValueError, not a WgraphError (storage="bfloat16"); args.choice is ArgumentError, still a ValueError
    storage = args.choice("write_checkpoint", "storage", storage, STORAGE)
    # shards=0 wrote config.json and no tensor file, without an error; a float one raised range()'s TypeError
    args.integer("write_checkpoint", "shards", shards, 1, max(1, len(weights)))
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(cfg, indent=2))
    names = list(weights)
    groups = [names[k::shards] for k in range(shards)]
    files = ["model.safetensors"] if shards == 1 else [f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
                                                       for k in range(shards)]
    for fname, group in zip(files, groups):
        arrays = {}
        for name in group:
            a = as_f32(weights[name])   # bf16 bit patterns by value, not as numbers
            if storage == "bf16":
                arrays[name] = ("bfloat16", to_bf16(a).view(np.uint16))
            else:
                arrays[name] = (np.dtype(np.float16 if storage == "f16" else np.float32).name,
                                np.ascontiguousarray(a, np.float16 if storage == "f16" else np.float32))
        specs = {name: safetensors.TensorSpec(dtype=dt, shape=list(arr.shape), data_ptr=arr.ctypes.data,
                                              data_len=arr.nbytes) for name, (dt, arr) in arrays.items()}
        safetensors.serialize_file(specs, str(root / fname), metadata={"format": "pt"})
    if shards > 1:
        index = {"metadata": {}, "weight_map": {n: f for f, g in zip(files, groups) for n in g}}
        (root / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return root


def write_random_checkpoint(path, *, storage: str = "f32", shards: int = 1, seed: int = 0, **config) -> Path:
    """A random tiny Llama checkpoint (tiny_config(**config)) in `path`."""
    cfg = tiny_config(**config)
    return write_checkpoint(path, cfg, random_weights(cfg, seed), storage=storage, shards=shards)
