"""Make tests/data/rope_goldens.npz with Hugging Face transformers' own RoPE (run once; the tests read the file and
never import transformers or torch):

    python tests/data/make_rope_goldens.py      # needs torch and transformers (5.25 made the committed file)

For each case of CASES (RoPE base, head dim, rope type, rotary fraction): `{case}_inv_freq`, transformers' inverse
frequencies (float32, as its rotary embedding holds them), and `{case}_q`, the vector X rotated by transformers'
rotary embedding and apply_rotary_pos_emb at each position of POSITIONS (float32 [len(POSITIONS), head_dim]).
Llama's rotary embedding for full rotation, GPT-NeoX's for a part of each head (transformers 5.25's Llama class
rotates every dim whatever partial_rotary_factor says; GPT-NeoX rotates the first dims, as DecoderConfig.rotary_dim
does). transformers computes the angles position x inv_freq in float32: at position 131071 they are off the exact
ones by up to ~5e-3 rad, which tests/test_rope_goldens.py measures against float64 and compares wgraph's with.

This script never imports wgraph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from transformers import GPTNeoXConfig, LlamaConfig
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

OUT = Path(__file__).resolve().parent / "rope_goldens.npz"
POSITIONS = (1, 8191, 32767, 131071)
LLAMA3 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
TYPES = {"default": {}, "linear": {"factor": 4.0}, "llama3": LLAMA3}


def cases() -> dict[str, tuple[float, int, str, float]]:
    """name -> (rope_theta, head_dim, rope_type, rotary fraction)."""
    out = {}
    for theta in (10000.0, 500000.0, 1000000.0):
        for kind in TYPES:
            out[f"{kind}_{int(theta)}_128"] = (theta, 128, kind, 1.0)
    for kind, theta in (("default", 10000.0), ("llama3", 500000.0)):
        out[f"{kind}_{int(theta)}_64"] = (theta, 64, kind, 1.0)
    for kind in TYPES:
        out[f"{kind}_500000_128_quarter"] = (500000.0, 128, kind, 0.25)
    return out


CASES = cases()


def x_vector(head_dim: int) -> np.ndarray:
    """The vector each case rotates: fixed, from the head dim alone (the test makes the same one)."""
    return np.random.default_rng(head_dim).standard_normal(head_dim).astype(np.float32)


def golden(theta: float, head_dim: int, kind: str, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    rope = {"rope_type": kind, "rope_theta": theta, **TYPES[kind]}
    if fraction == 1.0:
        cfg = LlamaConfig(hidden_size=2 * head_dim, num_attention_heads=2, head_dim=head_dim, rope_parameters=rope,
                          max_position_embeddings=131072)
        emb = LlamaRotaryEmbedding(cfg)
    else:
        cfg = GPTNeoXConfig(hidden_size=2 * head_dim, num_attention_heads=2, max_position_embeddings=131072,
                            rope_parameters=dict(rope, partial_rotary_factor=fraction))
        emb = GPTNeoXRotaryEmbedding(cfg)
    rd = int(head_dim * fraction)
    assert emb.inv_freq.shape == (rd // 2,), (emb.inv_freq.shape, rd)
    positions = torch.tensor([POSITIONS])
    cos, sin = emb(torch.zeros(1, dtype=torch.float32), positions)  # [1, P, rd], float32
    x = torch.from_numpy(np.tile(x_vector(head_dim), (len(POSITIONS), 1)))[None, None]  # [1, 1, P, D]
    rot, _ = apply_rotary_pos_emb(x[..., :rd], x[..., :rd], cos, sin)
    q = torch.cat([rot, x[..., rd:]], -1)[0, 0]
    return emb.inv_freq.numpy().astype(np.float32), q.numpy().astype(np.float32)


def main() -> None:
    out = {}
    for name, case in CASES.items():
        out[f"{name}_inv_freq"], out[f"{name}_q"] = golden(*case)
    np.savez_compressed(OUT, positions=np.array(POSITIONS, np.int64), **out)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(CASES)} cases)")


if __name__ == "__main__":
    main()
