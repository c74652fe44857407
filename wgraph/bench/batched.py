"""Batched attention throughput: a batched decode step (attention_kvcache, one query per sequence, cache_seqlens
on the GPU) in GB/s and a varlen prefill (attention_varlen, causal) in TFLOP/s, beside torch SDPA on CUDA on the
same data, as a padded batch or a per-sequence loop, whichever torch is faster at."""

from __future__ import annotations

import gc
import statistics
import time

import attrs
import numpy as np

import wgraph as wg
from wgraph.bench import timing, torch_ref
from wgraph.bench.attention import _gpu_times_us
from wgraph.bench.grids import itemsizes


@attrs.frozen
class BatchedShape:
    """kind "decode": B sequences of lengths[b] cached keys, one query each; "varlen": B causal sequences of
    lengths[b] queries and keys, packed."""

    kind: str
    lengths: tuple[int, ...]
    Hq: int
    Hkv: int
    D: int
    dtype: str

    @property
    def B(self) -> int:
        return len(self.lengths)

    def label(self) -> str:
        n = f"kv={max(self.lengths)}" if len(set(self.lengths)) == 1 else f"lens={sum(self.lengths)}/{self.B}"
        return f"{self.kind} B={self.B} {n} Hq/Hkv={self.Hq}/{self.Hkv} D={self.D} {self.dtype}"


_RAGGED = (512, 1024, 256, 768, 512, 1024, 128, 896)
GRIDS = {
    "tiny": (BatchedShape("decode", (32,) * 3, 4, 2, 32, "f32"), BatchedShape("varlen", (8, 16, 5), 4, 2, 32, "f32")),
    "quick": tuple(BatchedShape("decode", (128,) * b, 4, 2, 32, "f16") for b in (1, 8))
    + (BatchedShape("varlen", (16, 32, 8, 24), 4, 2, 32, "f16"),),
    # the rows: B = 1, 8, 32, 64 at kv 4096, 32/8 heads, D 128, f16; one varlen prefill
    "small": tuple(BatchedShape("decode", (4096,) * b, 32, 8, 128, "f16") for b in (1, 8, 32, 64))
    + (BatchedShape("varlen", _RAGGED, 32, 8, 128, "f16"),),
}
GRIDS["full"] = GRIDS["small"]


def bytes_moved(s: BatchedShape) -> int:
    """K + V of every sequence read, q read and out written (decode)."""
    qo, kv = itemsizes(s.dtype)
    return 2 * sum(s.lengths) * s.Hkv * s.D * kv + 2 * s.B * s.Hq * s.D * qo


def flops(s: BatchedShape) -> float:
    """4*S*S*Hq*D/2 per causal sequence (the FlashAttention convention), summed."""
    return sum(4.0 * n * n * s.Hq * s.D / 2 for n in s.lengths)


def _arrays(s: BatchedShape, rng):
    np_q = np.float16 if s.dtype == "f16" else np.float32
    np_kv = np.float32 if s.dtype == "f32" else np.float16
    if s.kind == "decode":
        L = max(s.lengths)
        q = rng.uniform(-1, 1, (s.B, 1, s.Hq, s.D)).astype(np_q)
        k = rng.uniform(-1, 1, (s.B, L, s.Hkv, s.D)).astype(np_kv)
        v = rng.uniform(-1, 1, (s.B, L, s.Hkv, s.D)).astype(np_kv)
    else:
        n = sum(s.lengths)
        q = rng.uniform(-1, 1, (n, s.Hq, s.D)).astype(np_q)
        k = rng.uniform(-1, 1, (n, s.Hkv, s.D)).astype(np_kv)
        v = rng.uniform(-1, 1, (n, s.Hkv, s.D)).astype(np_kv)
    return q, k, v


def _call(dev, s: BatchedShape, arrays):
    """(call, out): one batched attention call writing `out`, its lengths on the GPU."""
    q, k, v = (dev.tensor(a) for a in arrays)
    if s.kind == "decode":
        lens = dev.tensor(np.array(s.lengths, np.uint32))
        out = wg.ops.attention_kvcache(q, k, v, cache_seqlens=lens, causal=True)

        def call():
            wg.ops.attention_kvcache(q, k, v, cache_seqlens=lens, causal=True, out=out)
    else:
        cu = dev.tensor(np.concatenate([[0], np.cumsum(s.lengths)]).astype(np.uint32))
        m = max(s.lengths)
        out = wg.ops.attention_varlen(q, k, v, cu, cu, max_seqlen_q=m, max_seqlen_k=m, causal=True)

        def call():
            wg.ops.attention_varlen(q, k, v, cu, cu, max_seqlen_q=m, max_seqlen_k=m, causal=True, out=out)
    return call, out


def measure(dev, s: BatchedShape, arrays, target_s: float, max_reps: int) -> dict:
    call, out = _call(dev, s, arrays)
    dev.flush()  # the set-up's own ops are not counted
    before = dev.stats.snapshot()
    call()
    dev.flush()
    dispatches = dev.stats.since(before).dispatches
    _, reps = timing.reps_for(dev, call, target_s, max_reps)
    gpu = _gpu_times_us(dev, call, reps)
    wall = timing.wall_us(dev, call, reps)
    row = {"reps": reps, "dispatches": dispatches, "gpu_us": statistics.median(gpu) if gpu else None,
           "wall_us": wall, "time_source": "timestamp-span" if gpu else "wall+sync", "_out": out}
    replay = timing.replay(dev, _builder(s, arrays))   # wall clock: no timestamp queries needed
    row["replay_us"], row["replay_host_us"] = replay.us_per_call, replay.host_us_per_call
    if gpu and s.kind == "decode" and s.B == 1:
        row.update(_single_sequence(dev, s, arrays, reps, call))
        row.update(_replays_in_turns(dev, s, arrays))
    return row


def _replays_in_turns(dev, s: BatchedShape, arrays, rounds: int = 3, calls: int = timing.REPLAY_CALLS) -> dict:
    """B = 1's replay beside the single-sequence kernel's with kv_len on the GPU, the two Programs compiled once
    and replayed in turns (`rounds` each, medians), so neither takes the clocks' ramp or drift alone: the rows'
    own replays are timed at different points of the section."""
    progs = {"batched": timing.compile_calls(dev, _builder(s, arrays), calls),
             "single": timing.compile_calls(dev, _single_len_builder(s, arrays), calls)}
    got: dict[str, list] = {name: [] for name in progs}
    for _ in range(rounds):
        for name, prog in progs.items():
            got[name].append(timing.replay_time(dev, prog, calls).us_per_call)
    return {"turns_batched_replay_us": statistics.median(got["batched"]),
            "turns_single_gpu_len_replay_us": statistics.median(got["single"])}


def _single_len_builder(s: BatchedShape, arrays):
    """timing.replay's builder: the single-sequence call on sequence 0, kv_len a GPU state (as cache_seqlens is)."""
    q, k, v = (a[0] for a in arrays)
    dt, kvdt = _state_dtypes(s)

    def build(g, i):
        if i == 0:
            build.st = timing.states(g, (q, k, v, np.array([s.lengths[0]], np.uint32)), (dt, kvdt, kvdt, "u32"))
        q_, k_, v_, n_ = build.st
        return wg.ops.attention(q_, k_, v_, causal=True, kv_len=n_)
    return build


def _state_dtypes(s: BatchedShape) -> tuple[str, str]:
    """(q's, the caches') dtypes of a replay's states, as _arrays makes the arrays: f16 and f16 for an f16 shape,
    f32 and f32 for f32, else (f16kv) f32 q over f16 caches."""
    return ("f16" if s.dtype == "f16" else "f32"), ("f32" if s.dtype == "f32" else "f16")


def _builder(s: BatchedShape, arrays):
    """timing.replay's builder: the same batched call on Program states."""
    dt, kvdt = _state_dtypes(s)
    if s.kind == "decode":
        extra = (np.array(s.lengths, np.uint32),)
    else:
        extra = (np.concatenate([[0], np.cumsum(s.lengths)]).astype(np.uint32),)

    def build(g, i):
        if i == 0:
            build.st = timing.states(g, (*arrays, *extra), (dt, kvdt, kvdt, "u32"))
        q, k, v, x = build.st
        if s.kind == "decode":
            return wg.ops.attention_kvcache(q, k, v, cache_seqlens=x, causal=True)
        m = max(s.lengths)
        return wg.ops.attention_varlen(q, k, v, x, x, max_seqlen_q=m, max_seqlen_k=m, causal=True)
    return build


def _single_sequence(dev, s: BatchedShape, arrays, reps: int, batched_call) -> dict:
    """B = 1: the single-sequence kernel (wg.ops.attention, planned) on the same sequence, timed the same ways:
    with an int kv_len (planned for the exact length) and with kv_len read from a GPU tensor, as the batched
    call reads its cache_seqlens (planned for the capacity; like for like); then that one and the batched call
    in turns (3 rounds each), so neither takes the clocks' ramp or drift alone."""
    q, k, v = (a[0] for a in arrays)
    tq, tk, tv = (dev.tensor(a) for a in (q, k, v))
    kv_len = dev.tensor(np.array([s.lengths[0]], np.uint32))
    out = wg.ops.attention(tq, tk, tv, causal=True)
    gpu = _gpu_times_us(dev, lambda: wg.ops.attention(tq, tk, tv, causal=True, out=out), reps)
    out_g = wg.ops.attention(tq, tk, tv, causal=True, kv_len=kv_len)
    single_len = lambda: wg.ops.attention(tq, tk, tv, causal=True, kv_len=kv_len, out=out_g)  # noqa: E731
    gpu_len = _gpu_times_us(dev, single_len, reps)
    turns: dict[str, list] = {"single": [], "batched": []}
    for _ in range(3):
        turns["single"] += _gpu_times_us(dev, single_len, reps)
        turns["batched"] += _gpu_times_us(dev, batched_call, reps)
    dt, kvdt = _state_dtypes(s)

    def build(g, i):
        if i == 0:
            build.st = timing.states(g, (q, k, v), (dt, kvdt, kvdt))
        return wg.ops.attention(*build.st, causal=True)

    return {"single_variant": wg.ops.attention_plan(tq, tk, tv, causal=True).variant,
            "single_gpu_us": statistics.median(gpu), "single_replay_us": timing.replay(dev, build).us_per_call,
            "single_gpu_len_variant": wg.ops.attention_plan(tq, tk, tv, causal=True, kv_len=kv_len).variant,
            "single_gpu_len_gpu_us": statistics.median(gpu_len),
            "single_gpu_len_replay_us": timing.replay(dev, _single_len_builder(s, arrays)).us_per_call,
            "turns_single_gpu_len_gpu_us": statistics.median(turns["single"]),
            "turns_batched_gpu_us": statistics.median(turns["batched"])}


def torch_sdpa(s: BatchedShape, arrays, reps: int) -> dict:
    """torch SDPA on CUDA on the same data: a padded batch and a per-sequence loop; the faster one's time, and
    its output in wgraph's layout (float32)."""
    import torch
    import torch.nn.functional as F

    dt = torch.float16 if s.dtype == "f16" else torch.float32   # f16kv: torch wants one dtype, f32
    q, k, v = (torch.from_numpy(a).to("cuda").to(dt) for a in arrays)
    kw = {}
    if s.Hq != s.Hkv:
        try:
            x = torch.zeros((1, s.Hq, 1, s.D), dtype=dt, device="cuda")
            F.scaled_dot_product_attention(x, x[:, :s.Hkv], x[:, :s.Hkv], enable_gqa=True)
            kw["enable_gqa"] = True
        except TypeError:   # torch without enable_gqa: kv heads repeated before timing (heads are dim -2 here)
            k, v = (t.repeat_interleave(s.Hq // s.Hkv, dim=-2) for t in (k, v))
    if s.kind == "decode":
        qb, kb, vb = q.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3).contiguous(), v.permute(0, 2, 1, 3).contiguous()
        L = kb.shape[2]
        mask = None
        if any(n != L for n in s.lengths):   # padded keys masked out
            mask = (torch.arange(L, device="cuda")[None, :] < torch.tensor(s.lengths, device="cuda")[:, None])
            mask = mask[:, None, None, :]

        def padded():
            return F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, **kw)

        def loop():
            return [F.scaled_dot_product_attention(qb[b:b + 1], kb[b:b + 1, :, :n], vb[b:b + 1, :, :n], **kw)
                    for b, n in enumerate(s.lengths)]

        def as_out(r):
            return torch.cat(r) if isinstance(r, list) else r
        to_np = lambda r: as_out(r).permute(0, 2, 1, 3).float().cpu().numpy()   # noqa: E731
    else:
        cu = np.concatenate([[0], np.cumsum(s.lengths)])
        M = max(s.lengths)
        qp = torch.zeros((s.B, s.Hq, M, s.D), dtype=dt, device="cuda")
        kp = torch.zeros((s.B, k.shape[-2], M, s.D), dtype=dt, device="cuda")
        vp = torch.zeros((s.B, k.shape[-2], M, s.D), dtype=dt, device="cuda")
        for b, n in enumerate(s.lengths):
            qp[b, :, :n] = q[cu[b]:cu[b + 1]].permute(1, 0, 2)
            kp[b, :, :n] = k[cu[b]:cu[b + 1]].permute(1, 0, 2)
            vp[b, :, :n] = v[cu[b]:cu[b + 1]].permute(1, 0, 2)
        lens = torch.tensor(s.lengths, device="cuda")
        i = torch.arange(M, device="cuda")
        # query i of sequence b sees keys j <= i (S == L per sequence: top-left equals bottom-right), j < len
        mask = (i[None, :, None] >= i[None, None, :]) & (i[None, None, :] < lens[:, None, None])
        mask = mask[:, None]

        def padded():
            return F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask, **kw)

        def loop():
            return [F.scaled_dot_product_attention(q[cu[b]:cu[b + 1]].permute(1, 0, 2)[None],
                                                   k[cu[b]:cu[b + 1]].permute(1, 0, 2)[None],
                                                   v[cu[b]:cu[b + 1]].permute(1, 0, 2)[None], is_causal=True, **kw)
                    for b in range(s.B)]

        def to_np(r):
            if isinstance(r, list):
                return torch.cat([x[0].permute(1, 0, 2) for x in r]).float().cpu().numpy()
            return torch.cat([r[b, :, :n].permute(1, 0, 2) for b, n in enumerate(s.lengths)]).float().cpu().numpy()
    times = {"padded batch": torch_ref.cuda_time_ms(padded, reps), "per-sequence loop": torch_ref.cuda_time_ms(loop, reps)}
    best = min(times, key=times.get)
    out = to_np((padded if best == "padded batch" else loop)())
    return {"torch_ms": times[best], "torch_how": best, "torch_ms_both": times, "output": out}


def bench_batched(dev, grid: str, *, target_s: float = 0.3, max_reps: int = 20, use_torch: bool = True,
                  progress=None) -> tuple[list[dict], dict]:
    """Rows for every batched shape of `grid`; torch facts."""
    torch_info = torch_ref.probe() if use_torch else {"available": False, "note": "disabled (--no-torch)"}
    from wgraph.bench import warmup

    torch_info["warmup"] = warmup.prepare(dev, bool(torch_info.get("available")))
    rng = np.random.default_rng(0)
    rows = []
    shapes = GRIDS[grid]
    start = time.perf_counter()
    for i, s in enumerate(shapes):
        row = {**attrs.asdict(s), "B": s.B, "label": s.label(), "status": "ok", "note": ""}
        row["bytes" if s.kind == "decode" else "flops"] = bytes_moved(s) if s.kind == "decode" else flops(s)
        try:
            arrays = _arrays(s, rng)
            row.update(measure(dev, s, arrays, target_s, max_reps))
        except Exception as e:  # noqa: BLE001 - one failing shape must not end the run
            rows.append({**row, "status": "error", "note": f"{type(e).__name__}: {e}"})
            continue
        out = row.pop("_out")
        us = row["gpu_us"] or row["wall_us"]
        unit = "gbps" if s.kind == "decode" else "tflops"
        scale = 1e9 if unit == "gbps" else 1e12
        work = row.get("bytes") or row.get("flops")
        row[unit] = work / (us * 1e-6) / scale
        if torch_info.get("available"):
            try:
                t = torch_sdpa(s, arrays, max(3, row["reps"]))
                got = out.numpy().astype(np.float32).reshape(t["output"].shape)
                row.update(torch_us=t["torch_ms"] * 1e3, torch_how=t["torch_how"],
                           torch_us_both={k: v * 1e3 for k, v in t["torch_ms_both"].items()},
                           max_abs_diff_vs_torch=float(np.max(np.abs(got - t["output"]))))
                row["torch_" + unit] = work / (row["torch_us"] * 1e-6) / scale
                row["ratio_to_torch"] = row["torch_us"] / us
                if row.get("replay_us"):
                    row["ratio_to_torch_replay"] = row["torch_us"] / row["replay_us"]
            except Exception as e:  # noqa: BLE001
                row["torch_note"] = f"torch failed: {type(e).__name__}: {e}"
        del out, arrays
        gc.collect()
        rows.append(row)
        if progress:
            thru = f"{row[unit]:.4g} {'GB/s' if unit == 'gbps' else 'TFLOP/s'}"
            torch = f"  torch {row['torch_' + unit]:.4g} ({row['torch_how']})" if "torch_us" in row else ""
            progress(f"[{i + 1:3d}/{len(shapes)} {time.perf_counter() - start:6.1f}s] {s.label():48} {thru}{torch}")
    return rows, torch_info


def table(rows: list[dict]) -> str:
    head = (f"{'shape':50} {'disp':>4} {'gpu us':>10} {'thru':>10} {'unit':7} {'torch':>9} {'torch as':17} "
            f"{'ratio':>7} {'replay us':>9} {'host us':>7} {'ratio':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"{r['label']:50} {r['status']}: {r['note'][:90]}")
            continue
        decode = r["kind"] == "decode"
        thru = r["gbps"] if decode else r["tflops"]
        torch = r.get("torch_gbps") if decode else r.get("torch_tflops")
        ratio = r.get("ratio_to_torch")
        rr = r.get("ratio_to_torch_replay")
        lines.append(f"{r['label']:50} {r['dispatches']:4d} {r['gpu_us'] or r['wall_us']:10.1f} {thru:10.4g} "
                     f"{'GB/s' if decode else 'TFLOP/s':7} {'-' if torch is None else format(torch, '9.4g'):>9} "
                     f"{r.get('torch_how', '-'):17} {'-' if ratio is None else format(ratio, '7.3g'):>7} "
                     f"{'-' if r.get('replay_us') is None else format(r['replay_us'], '9.1f'):>9} "
                     f"{'-' if r.get('replay_host_us') is None else format(r['replay_host_us'], '7.1f'):>7} "
                     f"{'-' if rr is None else format(rr, '7.3g'):>7}")
        if r.get("single_gpu_us"):
            lines.append(f"{'  the same sequence, single-sequence ' + r['single_variant']:55} {r['single_gpu_us']:10.1f} "
                         f"{'':48} {r['single_replay_us']:9.1f}")
        if r.get("single_gpu_len_gpu_us"):
            lines.append(f"{'  the same, kv_len on the GPU: ' + r['single_gpu_len_variant']:55} "
                         f"{r['single_gpu_len_gpu_us']:10.1f}"
                         + (f" {'':48} {r['single_gpu_len_replay_us']:9.1f}" if r.get("single_gpu_len_replay_us")
                            else ""))   # rows of JSON files made before it was timed have none
        if r.get("turns_batched_gpu_us"):
            replays = (f"{r['turns_batched_replay_us']:.1f} / {r['turns_single_gpu_len_replay_us']:.1f}"
                       if r.get("turns_batched_replay_us") else "")
            lines.append(f"{'  in turns: the batch of one / kv_len on the GPU':55} {r['turns_batched_gpu_us']:10.1f} "
                         f"/ {r['turns_single_gpu_len_gpu_us']:.1f}{'':40} {replays}")
    lines.append("decode: one attention_kvcache call for the whole batch (cache_seqlens on the GPU); varlen: one "
                 "attention_varlen call. torch: SDPA as a padded batch or a per-sequence loop, the faster. "
                 "ratio = torch time / wgraph time (> 1: wgraph faster). replay us: a compiled Program of "
                 f"{timing.REPLAY_CALLS} calls replayed back to back, wall clock (no timestamps between dispatches); "
                 "host us: the host's encode and submit time per call in those replays (past 0.8 of replay us the host "
                 "sets the pace).")
    return "\n".join(lines)
