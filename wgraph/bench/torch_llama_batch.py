"""TorchLlama (wgraph/bench/torch_llama.py) decoding B sequences at once, for the batched model row of the bench:
the same weights and math, a static [B, Hkv, max_seq, D] KV cache, one position per sequence, so one step has
fixed shapes and is captured in a CUDA graph. torch is imported only where it runs."""

from __future__ import annotations

from wgraph.bench.torch_llama import TorchLlama, decode_timings


class TorchLlamaBatch(TorchLlama):
    """Greedy decode of `batch` sequences: matmuls over B rows (cuBLAS, f16), RoPE at each sequence's position,
    GQA attention as two batched matmuls over each sequence's whole cache masked past its position (f32
    softmax), argmax per row."""

    def __init__(self, cfg, weights: dict, max_seq: int, batch: int, device: str = "cuda"):
        super().__init__(cfg, weights, max_seq, device)
        torch = self.torch
        hkv, d, b = cfg.num_key_value_heads, cfg.head_dim, batch
        self.batch = b
        self.k = [torch.zeros(b, hkv, max_seq, d, device=device, dtype=torch.float16) for _ in self.layers]
        self.v = [torch.zeros(b, hkv, max_seq, d, device=device, dtype=torch.float16) for _ in self.layers]
        self.token = torch.zeros(b, dtype=torch.long, device=device)
        self.pos = torch.zeros(b, dtype=torch.long, device=device)
        self.history = torch.zeros(b, max_seq, dtype=torch.long, device=device)
        self.rows = torch.arange(b, device=device)

    def _mask(self):
        """[B, max_seq]: keys after each sequence's position."""
        return self.positions[None, :] > self.pos[:, None]

    def _attend(self, i: int, q, k, v, mask):
        """Layer i's attention of the step: k, v [B, Hkv, D] written to each sequence's cache at its position,
        then q [B, Hq, D] over its whole cache masked by `mask`; the output [B, Hq * D]."""
        torch, c, b = self.torch, self.cfg, self.batch
        hq, hkv, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.k[i][self.rows, :, self.pos] = k
        self.v[i][self.rows, :, self.pos] = v
        qg = q.view(b, hkv, hq // hkv, d)  # q head h reads kv head h // (Hq / Hkv)
        s = torch.matmul(qg, self.k[i].transpose(-1, -2)).float() / d ** 0.5  # [B, Hkv, G, max_seq]
        p = torch.softmax(s.masked_fill(mask[:, None, None, :], float("-inf")), -1).half()
        return torch.matmul(p, self.v[i]).reshape(b, hq * d)

    def _keep(self, nxt):
        """Each sequence's greedy id into its history at its new position."""
        self.history[self.rows, self.pos] = nxt

    def reset(self, tokens, pos: int):
        self.token.copy_(self.torch.as_tensor(tokens, dtype=self.torch.long))
        self.pos.fill_(pos)


def bench_torch_batch_decode(cfg, weights, *, max_seq: int, tokens: list[int], steps: int) -> dict:
    """ms per batched step (B = len(tokens) sequences from 1-token prompts at position 0), eager and as a CUDA
    graph (median of 3 timed loops, CUDA events), and each sequence's greedy ids (a smoke check)."""
    import torch

    m = TorchLlamaBatch(cfg, weights, max_seq, len(tokens))
    out = {}
    with torch.no_grad():
        for mode, ms in decode_timings(m, lambda: m.reset(tokens, 0), steps):
            out[mode] = {"ms_per_step": ms, "ids": m.history[:, 1:1 + steps].tolist()}
    del m
    torch.cuda.empty_cache()
    return out
