"""A small hand-written torch Llama decode step (static KV cache, greedy), for the model row of the bench:
the same weights as wgraph's model, run eagerly and as a CUDA graph. torch is optional: imported only here,
only when present and with CUDA; transformers is never imported."""

from __future__ import annotations

import statistics

import numpy as np

from wgraph.bench import torch_ref


class TorchLlama:
    """Decode-only Llama in torch on CUDA: f16 weights, f32 norms and softmax, a static [max_seq] KV cache
    masked by position, so one step has fixed shapes and can be captured in a CUDA graph."""

    def __init__(self, cfg, weights: dict, max_seq: int, device: str = "cuda"):
        import torch

        self.torch, self.cfg, self.max_seq = torch, cfg, max_seq
        dev = device

        def t(name, dtype=torch.float16):
            src = weights[name]  # a numpy array, or a function (dtype) -> a CUDA tensor (made on the GPU)
            if callable(src):
                return src(dtype)
            return torch.from_numpy(np.ascontiguousarray(src)).to(dev, dtype)

        self.embed = t("model.embed_tokens.weight")
        self.norm = t("model.norm.weight", torch.float32)
        self.lm_head = self.embed if cfg.tie_word_embeddings else t("lm_head.weight")
        self.layers = []
        for i in range(cfg.num_hidden_layers):
            p = f"model.layers.{i}."
            self.layers.append({
                "attn_norm": t(p + "input_layernorm.weight", torch.float32),
                "mlp_norm": t(p + "post_attention_layernorm.weight", torch.float32),
                "wqkv": torch.cat([t(p + f"self_attn.{n}_proj.weight") for n in "qkv"]),
                "wo": t(p + "self_attn.o_proj.weight"),
                "w_gate_up": torch.cat([t(p + "mlp.gate_proj.weight"), t(p + "mlp.up_proj.weight")]),
                "w_down": t(p + "mlp.down_proj.weight"),
            })
        hkv, d = cfg.num_key_value_heads, cfg.head_dim
        self.k = [torch.zeros(max_seq, hkv, d, device=dev, dtype=torch.float16) for _ in self.layers]
        self.v = [torch.zeros(max_seq, hkv, d, device=dev, dtype=torch.float16) for _ in self.layers]
        ang = torch.arange(max_seq, dtype=torch.float64)[:, None] * torch.from_numpy(cfg.inv_freq())[None, :]
        self.cos, self.sin = ang.cos().float().to(dev), ang.sin().float().to(dev)
        self.token = torch.zeros(1, dtype=torch.long, device=dev)
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)
        self.history = torch.zeros(max_seq, dtype=torch.long, device=dev)
        self.positions = torch.arange(max_seq, device=dev)

    def _rms(self, x, w):
        xf = x.float()
        return (xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.cfg.rms_norm_eps) * w).half()

    def _rope(self, x):
        cos, sin = self.cos[self.pos][:, None, :], self.sin[self.pos][:, None, :]
        half = x.shape[-1] // 2
        a, b = x[..., :half].float(), x[..., half:].float()
        return self.torch.cat([a * cos - b * sin, b * cos + a * sin], -1).half()

    def _mask(self):
        """Keys after the current position are not there yet: [max_seq], True where masked."""
        return self.positions > self.pos

    def _attend(self, i: int, q, k, v, mask):
        """Layer i's attention of the step: k, v [1, Hkv, D] written to the cache at self.pos, then q [1, Hq, D]
        over the whole cache masked by `mask`; the output [1, Hq * D]."""
        torch, c = self.torch, self.cfg
        hq, hkv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.k[i].index_copy_(0, self.pos, k)
        self.v[i].index_copy_(0, self.pos, v)
        kk = self.k[i].repeat_interleave(hq // hkv, 1)  # [max_seq, Hq, D]
        vv = self.v[i].repeat_interleave(hq // hkv, 1)
        s = torch.einsum("hd,lhd->hl", q[0].float(), kk.float()) / d ** 0.5
        p = torch.softmax(s.masked_fill(mask[None, :], float("-inf")), -1)
        return torch.einsum("hl,lhd->hd", p, vv.float()).half().reshape(1, hq * d)

    def _keep(self, nxt):
        """The step's greedy id into the history at the new position."""
        self.history.index_copy_(0, self.pos, nxt)

    def step(self):
        """One token per row of self.token (one here; TorchLlamaBatch's B): embed self.token at self.pos, all
        layers (the attention is _attend's, the cache layout's), greedy next ids into self.token; pos += 1."""
        torch, c = self.torch, self.cfg
        hq, hkv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        rows = self.token.shape[0]
        x = self.embed[self.token]  # [rows, H]
        mask = self._mask()
        for i, w in enumerate(self.layers):
            qkv = self._rms(x, w["attn_norm"]) @ w["wqkv"].T
            q, k, v = qkv.split([hq * d, hkv * d, hkv * d], -1)
            q, k = self._rope(q.view(rows, hq, d)), self._rope(k.view(rows, hkv, d))  # cos/sin rows of self.pos
            x = x + self._attend(i, q, k, v.view(rows, hkv, d), mask) @ w["wo"].T
            gu = self._rms(x, w["mlp_norm"]) @ w["w_gate_up"].T
            g, u = gu.chunk(2, -1)
            x = x + (torch.nn.functional.silu(g) * u) @ w["w_down"].T
        logits = self._rms(x, self.norm) @ self.lm_head.T
        nxt = logits.float().argmax(-1)
        self.token.copy_(nxt)
        self.pos.add_(1)
        self._keep(nxt)

    def reset(self, token: int, pos: int):
        self.token.fill_(token)
        self.pos.fill_(pos)


def decode_timings(m, restart, steps: int):
    """For "eager", then "cuda_graph" (m.step captured once): ms per m.step(), the median of 3 loops of `steps`
    steps timed by CUDA events, each loop from restart(). Yields (mode, ms) after the mode's last loop, while
    m.history holds the ids that loop made."""
    import torch

    for mode in ("eager", "cuda_graph"):
        run = m.step
        if mode == "cuda_graph":
            restart()
            run = torch_ref.graph_replay(m.step, before_capture=restart)
        restart()
        for _ in range(min(steps, 4)):
            run()
        torch.cuda.synchronize()
        times = []
        for _ in range(3):
            restart()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(steps):
                run()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / steps)
        yield mode, statistics.median(times)


def bench_torch_decode(cfg, weights, *, max_seq: int, start_token: int, start_pos: int, steps: int) -> dict:
    """ms per decode step, eager and as a CUDA graph (median of 3 timed loops, CUDA events), and the greedy
    ids each produced from (start_token, start_pos) over an empty cache (a smoke check, not a reference)."""
    import torch

    m = TorchLlama(cfg, weights, max_seq)
    out = {}
    with torch.no_grad():
        for mode, ms in decode_timings(m, lambda: m.reset(start_token, start_pos), steps):
            out[mode] = {"ms_per_token": ms, "ids": m.history[start_pos + 1:start_pos + 1 + steps].tolist()}
    del m
    torch.cuda.empty_cache()
    return out
