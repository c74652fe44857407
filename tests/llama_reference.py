"""A float64 numpy Llama forward, written from the Hugging Face model's definition and independent of
wgraph's ops: no KV cache (every call recomputes the whole sequence), explicit GQA by repetition."""

import numpy as np


def rotary_dim(cfg: dict) -> int:
    d = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return int(d * cfg.get("partial_rotary_factor", 1.0))


def inv_freq(cfg: dict) -> np.ndarray:
    d = rotary_dim(cfg)  # the exponents run over the rotary dims
    base = 1.0 / (cfg.get("rope_theta", 10000.0) ** (np.arange(0, d, 2, dtype=np.float64) / d))
    rs = cfg.get("rope_scaling")
    if not rs:
        return base
    # transformers' _compute_llama3_parameters
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    out = []
    for f in base:
        wavelen = 2 * np.pi / f
        if wavelen < old / hi:
            out.append(f)
        elif wavelen > old / lo:
            out.append(f / factor)
        else:
            smooth = (old / wavelen - lo) / (hi - lo)
            out.append((1 - smooth) * f / factor + smooth * f)
    return np.array(out)


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rope(x, positions, freqs, interleaved=False):
    """RoPE of x [S, H, D] over its first 2 * len(freqs) dims (the rest pass through): rotate_half (the layout HF
    Llama checkpoints use, as GPT-NeoX's partial rotary), or GPT-J's interleaved pairs."""
    rd = 2 * len(freqs)
    ang = positions[:, None] * freqs[None, :]
    r, rest = x[..., :rd], x[..., rd:]
    if interleaved:
        cos = np.repeat(np.cos(ang), 2, -1)[:, None, :]
        sin = np.repeat(np.sin(ang), 2, -1)[:, None, :]
        rot = np.stack([-r[..., 1::2], r[..., 0::2]], -1).reshape(r.shape)
    else:
        cos = np.concatenate([np.cos(ang)] * 2, -1)[:, None, :]
        sin = np.concatenate([np.sin(ang)] * 2, -1)[:, None, :]
        rot = np.concatenate([-r[..., rd // 2:], r[..., :rd // 2]], -1)
    return np.concatenate([r * cos + rot * sin, rest], -1)


def _implemented(cfg: dict) -> None:
    """Refuse a config holding what this reference does not compute (biases, another architecture, the transformers
    5 RoPE format, RoPE types but llama3): it would be read past, and a wrong model compared to a wrong reference."""
    bad = {k: cfg[k] for k in ("attention_bias", "mlp_bias") if cfg.get(k)}
    bad.update({k: cfg[k] for k in ("rope_parameters", "sliding_window") if cfg.get(k) is not None})
    if cfg.get("model_type", "llama") != "llama":
        bad["model_type"] = cfg["model_type"]
    rs = cfg.get("rope_scaling")
    if rs and rs.get("rope_type", rs.get("type")) != "llama3":
        bad["rope_scaling"] = rs
    if bad:
        raise NotImplementedError(f"llama_reference does not compute {bad}")


def forward(cfg: dict, w: dict, ids) -> np.ndarray:
    """Logits [S, vocab] (float64) of the token sequence `ids`."""
    _implemented(cfg)
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    hq = cfg["num_attention_heads"]
    hkv = cfg.get("num_key_value_heads", hq)
    d = cfg.get("head_dim") or cfg["hidden_size"] // hq
    eps = cfg["rms_norm_eps"]
    ids = np.asarray(ids)
    s = len(ids)
    pos = np.arange(s, dtype=np.float64)
    freqs = inv_freq(cfg)
    x = w["model.embed_tokens.weight"][ids]
    mask = np.triu(np.full((s, s), -np.inf), 1)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = _rms(x, w[p + "input_layernorm.weight"], eps)
        inter = cfg.get("rope_interleaved", False)
        q = _rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(s, hq, d), pos, freqs, inter)
        k = _rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(s, hkv, d), pos, freqs, inter)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(s, hkv, d)
        k, v = np.repeat(k, hq // hkv, axis=1), np.repeat(v, hq // hkv, axis=1)
        scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d) + mask
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", probs, v).reshape(s, hq * d)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = _rms(x, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    return _rms(x, w["model.norm.weight"], eps) @ head.T


def greedy(cfg: dict, w: dict, prompt, n: int):
    """n greedy ids after `prompt`, with the logits each was chosen from ([n, vocab])."""
    ids, all_logits = list(prompt), []
    for _ in range(n):
        logits = forward(cfg, w, ids)[-1]
        all_logits.append(logits)
        ids.append(int(np.argmax(logits)))
    return ids[len(prompt):], np.stack(all_logits)


def rel_err(got, want) -> float:
    """max |got - want| / max |want|, in float64."""
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / np.max(np.abs(want)))
