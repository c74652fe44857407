"""Memory bandwidth and the decode GEMV: a plain copy kernel's bandwidth (bytes read + written over GPU time),
then `linear` with 1 and 8 rows on every weight matrix of the Llama-3.2-1B and Llama-3.1-8B decoders (and the
decode step's fused forms: norm + [q; k; v], o + residual, norm + [gate; up] + swiglu, down + residual,
norm + lm_head) as GB/s and as a fraction of the copy bandwidth measured in the same run, beside
`torch.nn.functional.linear` on the same weights when torch with CUDA is importable.

GPU time: back-to-back calls writing one output (each waits for the one before, as in a decode step) in one
compute pass stamped at its start and end (wgraph/bench/timing.py); calls cycle over enough copies of W that
they do not fit the GPU's last-level cache. Weights are seeded values made on the GPU (wgraph/bench/weights.py),
checked against float64 on a sample of output features. `variants`: the configurations an A/B compares
(benchmarks/gemv_ab.py) take turns in rounds on each shape, so a drift in the GPU's clocks moves them alike."""

from __future__ import annotations

import gc
import statistics

import attrs
import numpy as np

import wgraph as wg
from wgraph.bench import timing, torch_ref, weights
from wgraph.bench.memory_kernels import BENCH_COPY, BENCH_READ, CopyParams, ReadParams
from wgraph.errors import WgraphError
from wgraph.ops.core import apply

CACHE_BYTES = 192 << 20  # calls cycle over copies of W totalling at least this (H200 L2: 50 MB)
MAX_COPIES = 64


@attrs.frozen
class GemvShape:
    rows: int
    out_features: int
    in_features: int
    weight_dtype: str
    matrix: str = ""  # what it is in a model ("1B down_proj")
    norm: bool = False  # RMSNorm of x fused in front
    swiglu: bool = False  # W holds [gate; up]; the output is silu(gate) * up
    residual: bool = False  # a residual added to the output

    @property
    def fused(self) -> str:
        named = (("norm", self.norm), ("swiglu", self.swiglu), ("residual", self.residual))
        return "+".join(n for n, on in named if on)

    def label(self) -> str:
        return (f"linear M={self.rows} W=[{self.out_features}, {self.in_features}] {self.weight_dtype}"
                + (f" {self.fused}" if self.fused else ""))

    @property
    def outputs(self) -> int:
        return self.out_features // 2 if self.swiglu else self.out_features

    @property
    def weight_bytes(self) -> int:
        return self.out_features * self.in_features * (2 if self.weight_dtype == "f16" else 4)

    @property
    def bytes(self) -> int:
        """W once, x, y (f32), the residual and the norm weight when fused."""
        return (self.weight_bytes + 4 * self.rows * (self.in_features + self.outputs * (2 if self.residual else 1))
                + 4 * self.in_features * self.norm)

    @property
    def torch_bytes(self) -> int:
        """What torch's F.linear reads and writes: W, x (cast to the weights' dtype) and all out_features of y in
        the weights' dtype; a fused row's norm weight and residual are not its (it runs F.linear alone)."""
        itemsize = 2 if self.weight_dtype == "f16" else 4
        return self.weight_bytes + itemsize * self.rows * (self.in_features + self.out_features)


# Llama-3.2-1B and Llama-3.1-8B: hidden, intermediate, vocab, q heads * head_dim, kv heads * head_dim
MODELS = {"1B": (2048, 8192, 128256, 32 * 64, 8 * 64), "8B": (4096, 14336, 128256, 32 * 128, 8 * 128)}


def model_matrices(model: str) -> list[tuple[str, int, int]]:
    """(name, out, in) of every distinct weight matrix of a decoder layer and its lm_head."""
    h, i, v, q, kv = MODELS[model]
    named = [("q_proj", q, h), ("k_proj/v_proj", kv, h), ("o_proj", h, q), ("gate_proj/up_proj", i, h),
             ("down_proj", h, i), ("lm_head", v, h)]
    seen, out = set(), []
    for name, n, k in named:
        if (n, k) in seen:  # 1B: q_proj and o_proj are both [2048, 2048]
            out = [(f"{o[0]}/{name}" if (o[1], o[2]) == (n, k) else o[0], o[1], o[2]) for o in out]
            continue
        seen.add((n, k))
        out.append((name, n, k))
    return [(f"{model} {name}", n, k) for name, n, k in out]


def model_dims(cfg) -> tuple[int, int, int, int, int]:
    """A LlamaConfig's dimensions as MODELS holds them: hidden, intermediate, vocab, q heads * head_dim, kv heads *
    head_dim."""
    return (cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.num_attention_heads * cfg.head_dim,
            cfg.num_key_value_heads * cfg.head_dim)


def decode_shapes(model: str, dims: tuple[int, int, int, int, int], dtype: str = "f16") -> list[GemvShape]:
    """The fused GEMVs of one decode step (one row): what wgraph's Llama decode runs, for a model of `dims` (a row
    of MODELS, or model_dims of a config) named `model` in the labels."""
    h, i, v, q, kv = dims
    return [GemvShape(1, q + 2 * kv, h, dtype, f"{model} norm+qkv", norm=True),
            GemvShape(1, h, q, dtype, f"{model} o_proj+residual", residual=True),
            GemvShape(1, 2 * i, h, dtype, f"{model} norm+gate_up+swiglu", norm=True, swiglu=True),
            GemvShape(1, h, i, dtype, f"{model} down_proj+residual", residual=True),
            GemvShape(1, v, h, dtype, f"{model} norm+lm_head", norm=True)]


def _full() -> tuple[GemvShape, ...]:
    """The decode step's fused GEMVs first, then every matrix: f16 before f32, one row before 8 (an A/B short
    of time keeps its candidates for what the decode runs)."""
    plain = [GemvShape(m, n, k, dt, name) for dt in ("f16", "f32") for m in (1, 8)
             for model in MODELS for name, n, k in model_matrices(model)]
    return tuple([s for model, dims in MODELS.items() for s in decode_shapes(model, dims)] + plain)


GEMV_GRIDS = {
    "tiny": (GemvShape(1, 64, 256, "f32"), GemvShape(2, 64, 256, "f16"),
             GemvShape(1, 64, 256, "f16", "tiny norm+gate_up+swiglu+residual", norm=True, swiglu=True, residual=True)),
    "quick": (GemvShape(1, 1024, 2048, "f32"), GemvShape(1, 2048, 1024, "f16"),
              GemvShape(1, 3072, 2048, "f16", "1B norm+qkv", norm=True)),
    "small": tuple(GemvShape(1, n, k, dt, name) for dt in ("f16", "f32") for name, n, k in model_matrices("1B")),
    "full": _full(),
}
COPY_BYTES = {"tiny": 1 << 20, "quick": 16 << 20, "small": 256 << 20, "full": 512 << 20}  # by grid, on a CPU
# the least a GPU's copy kernel copies whatever the grid: source and destination (2x) far past its last-level cache
# (50 MB on an H100 / H200), else the "of copy" fractions are of a copy served from the cache
GPU_COPY_BYTES = 256 << 20


def copy_bytes(caps, grid: str) -> int:
    """Bytes the copy kernel copies (read, and as many written) for the bandwidth every "of copy" fraction is of,
    under `grid` (COPY_BYTES' row, the full one for a grid it lacks) on an adapter of `caps`: the grid's on a CPU
    adapter (lavapipe: --quick stays fast; its "cache" is the host's), at least GPU_COPY_BYTES on a GPU, where
    the tiny and quick grids' 1 and 16 MiB fit the L2. copy_bandwidth bounds it by the device's binding size."""
    size = COPY_BYTES[grid if grid in COPY_BYTES else "full"]
    return size if caps.is_cpu else max(size, GPU_COPY_BYTES)


def _gpu_us(dev, call, reps: int, batches: int = 3) -> tuple[list[float], str]:
    got = timing.calls_us(dev, call, reps, batches)
    if got:
        return got, "pass-span"
    return [timing.wall_us(dev, call, reps) for _ in range(batches)], "wall+sync"


def _reps(dev, call, target_us: float, max_reps: int) -> int:
    """Calls per timed batch: enough for `target_us` of GPU work (a first batch of 4 estimates a call)."""
    est = statistics.median(_gpu_us(dev, call, 4, 1)[0])
    return int(max(4, min(max_reps, target_us / max(est, 1e-3))))


def _sources(dev, nbytes: int, copies: int) -> list:
    """`copies` buffers of `nbytes` (a multiple of 16) of distinct seeded values: the sources calls take in turn."""
    xs = []
    for i in range(copies):
        x = dev.empty((nbytes // 4,), "f32")
        weights.fill(x, 1 + i, 1.0)
        xs.append(x)
    return xs


def _timed_chain(dev, op, params, xs: list, out, *, warm_s: float, target_us: float, max_reps: int) -> dict:
    """A call = `op` on the next of `xs` writing `out`, calls chained in one pass cycling over them, timed as the
    GEMV rows are: the median GPU µs, every batch's, and where the times came from."""
    state = {"i": 0}

    def call():
        apply(op, params, (xs[state["i"] % len(xs)],), out=out)
        state["i"] += 1

    call()
    timing.warm(dev, call, warm_s)
    us, source = _gpu_us(dev, call, _reps(dev, call, target_us, max_reps))
    return {"gpu_us": statistics.median(us), "gpu_us_all": us, "time_source": source, "copies": len(xs)}


def copy_bandwidth(dev, nbytes: int) -> dict:
    """GB/s of the plain copy kernel over `nbytes` (bounded by the device's binding size): (read + write) / time,
    after a second of copies that raises the clocks; and whether it copied exactly."""
    nbytes = min(nbytes, dev.caps.max_storage_binding_size) // 16 * 16
    xs = _sources(dev, nbytes, 1)
    y = dev.empty(xs[0].shape, "f32")
    t = _timed_chain(dev, BENCH_COPY, CopyParams(), xs, y, warm_s=1.0, target_us=20000.0, max_reps=50)
    return {"bytes_copied": nbytes, "bytes_moved": 2 * nbytes, **t, "gbps": 2 * nbytes / (t["gpu_us"] * 1e-6) / 1e9,
            "copy_correct": bool(np.array_equal(y.numpy(), xs[0].numpy()))}


def read_ceiling(dev, read_bytes: int, *, target_us: float = 3000.0, max_reps: int = 400) -> dict:
    """The read kernel reading `read_bytes` a call (16-byte words, one a thread), calls chained in one pass and
    cycling over copies that do not fit the last-level cache, timed as the GEMV rows are: what one pass that
    only reads that many bytes reaches on this stack, its dispatch floor and ramp included. A GEMV reading those
    bytes cannot do better, so its `fraction_of_copy` (of the big copy's rate) is the ceiling of a row of that
    size. (A copy of the same bytes is no ceiling: below the cache's size its one output buffer stays in the
    cache, and an H100 copied 32 MB that way in 11.0 us where reading them took 13.2:
    benchmarks/read_ceiling.py, h100-read-ceiling-1206.log.)"""
    nbytes = max(16, read_bytes // 16 * 16)
    copies = 1 if dev.caps.is_cpu else max(1, min(MAX_COPIES, -(-CACHE_BYTES // nbytes)))
    t = _timed_chain(dev, BENCH_READ, ReadParams(), _sources(dev, nbytes, copies), dev.empty((4,), "u32"),
                     warm_s=0.05, target_us=target_us, max_reps=max_reps)
    return {"bytes_read": nbytes, **t, "gbps": nbytes / (t["gpu_us"] * 1e-6) / 1e9}


def ceiling_fields(dev, nbytes: int, fraction_of_copy: float, copy_gbps: float, *, target_us: float,
                   max_reps: int = 400) -> dict:
    """A planned row's ceiling (the GEMV and quantized GEMV tables' `ceiling` column): read_ceiling on the row's
    bytes as µs and as a fraction of the copy bandwidth, and the row's own fraction over it (of_size_ceiling)."""
    ceiling = read_ceiling(dev, nbytes, target_us=target_us, max_reps=max_reps)
    share = ceiling["gbps"] / copy_gbps
    return {"read_same_bytes_us": ceiling["gpu_us"], "read_same_bytes_fraction": share,
            "of_size_ceiling": fraction_of_copy / share}


def dispatch_floor(dev) -> dict:
    """GPU time per call of a linear too small to matter (one row, [8, 256] f16) in a chain of calls, timed as
    the GEMV rows are (two stamps per pass) and with a stamp pair around every dispatch, which is what the
    earlier runs' 10.2 µs floor measured."""
    w = dev.empty((8, 256), "f16")
    weights.fill(w, 2, 0.125)
    x = dev.tensor(np.ones((1, 256), np.float32))
    y = dev.empty((1, 8), "f32")
    call = lambda: wg.ops.linear(x, w, out=y)  # noqa: E731
    call()
    timing.warm(dev, call, 0.3)
    out = {"shape": "linear M=1 W=[8, 256] f16",
           "variant": wg.ops.dense.plan_linear(1, 8, 256, "f16", dev.caps).variant}
    us, source = _gpu_us(dev, call, 200)
    out.update(gpu_us=statistics.median(us), time_source=source)
    stamped = timing.calls_us(dev, call, 200, stamped=True)
    if stamped:
        out["gpu_us_stamped_per_dispatch"] = statistics.median(stamped)
    return out


# ---- GEMV rows ----

@attrs.define
class _Setup:
    ws: list
    seeds: list
    scale: float
    x: np.ndarray
    tx: object
    norm: np.ndarray | None
    tnorm: object
    residual: np.ndarray | None
    tresidual: object
    y: object


def _setup(dev, s: GemvShape, rng) -> _Setup:
    copies = max(1, min(MAX_COPIES, -(-CACHE_BYTES // s.weight_bytes)))
    scale = weights.scale_for(s.in_features)
    seeds = [weights.seed_of(f"gemv {s.out_features}x{s.in_features} copy {i}") for i in range(copies)]
    ws = []
    for seed in seeds:
        w = dev.empty((s.out_features, s.in_features), s.weight_dtype)
        weights.fill(w, seed, scale)
        ws.append(w)
    x = rng.standard_normal((s.rows, s.in_features), dtype=np.float32)
    norm = (1.0 + 0.1 * rng.standard_normal(s.in_features, dtype=np.float32)) if s.norm else None
    residual = rng.standard_normal((s.rows, s.outputs), dtype=np.float32) if s.residual else None
    return _Setup(ws, seeds, scale, x, dev.tensor(x), norm, dev.tensor(norm) if s.norm else None, residual,
                  dev.tensor(residual) if s.residual else None, dev.empty((s.rows, s.outputs), "f32"))


def _reference(s: GemvShape, st: _Setup, cols: np.ndarray) -> np.ndarray:
    """float64 outputs `cols` of the first weight copy."""
    x = st.x.astype(np.float64)
    if s.norm:
        x = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-5) * st.norm
    shape = (s.out_features, s.in_features)
    y = x @ weights.rows(st.seeds[0], shape, cols, st.scale).astype(np.float64).T
    if s.swiglu:
        up = x @ weights.rows(st.seeds[0], shape, cols + s.outputs, st.scale).astype(np.float64).T
        y = y / (1 + np.exp(-y)) * up
    if s.residual:
        y = y + st.residual[:, cols]
    return y


def _caller(s: GemvShape, st: _Setup, variant: str | None):
    state = {"i": 0}

    def call():
        wg.ops.linear(st.tx, st.ws[state["i"] % len(st.ws)], norm=st.tnorm, eps=1e-5, residual=st.tresidual,
                      activation="swiglu" if s.swiglu else None, variant=variant, out=st.y)
        state["i"] += 1

    return call


def _torch_linear(s: GemvShape, st: _Setup, reps: int) -> dict:
    import torch
    import torch.nn.functional as F

    dt = torch.float16 if s.weight_dtype == "f16" else torch.float32
    tw = []
    for seed in st.seeds:
        w = torch.empty((s.out_features, s.in_features), dtype=dt, device="cuda")
        weights.torch_fill(w, seed, st.scale)
        tw.append(w)
    tx = torch.from_numpy(st.x).to("cuda").to(dt)
    us = torch_ref.cycled_linear_us(tx, tw, reps)
    out = F.linear(tx, tw[0]).float().cpu().numpy()
    del tw, tx
    return {"torch_us": us, "output": out}


def bench_gemv(dev, shapes, *, copy_gbps: float | None, use_torch: bool, torch_available: bool,
               variants=(None,), rounds: int = 3, target_us: float = 3000.0, max_reps: int = 400,
               progress=None) -> list[dict]:
    """One row per (shape, variant): plan, GPU µs per call (median of `rounds` batches, the variants taking
    turns), GB/s, fraction of the copy bandwidth, error against float64; torch beside the planned row (None)."""
    from wgraph.ops.dense import plan_linear

    rng = np.random.default_rng(0)
    rows = []
    for i, s in enumerate(shapes):
        base = {**attrs.asdict(s), "bytes": s.bytes, "weight_bytes": s.weight_bytes}
        made = []
        try:
            st = _setup(dev, s, rng)
        except (WgraphError, MemoryError) as e:
            rows += [{**base, "config": v or "planned", "status": "unsupported", "note": f"{type(e).__name__}: {e}"}
                     for v in variants]
            continue
        cols = np.unique(np.linspace(0, s.outputs - 1, min(s.outputs, 64)).astype(np.int64))
        exact = _reference(s, st, cols)
        for v in variants:
            row = {**base, "config": v or "planned", "status": "ok", "note": ""}
            try:
                plan = plan_linear(s.rows, s.out_features, s.in_features, s.weight_dtype, dev.caps, swiglu=s.swiglu,
                                   norm=s.norm, residual=s.residual, variant=v)
                row.update(variant=plan.variant, reason=plan.reason, weight_copies=len(st.ws))
                call = _caller(s, st, v)
                call()
                got = st.y.numpy()[:, cols]  # the first call: weight copy 0
                row["_first"] = got
                row["max_rel_err_vs_float64"] = float(np.max(np.abs(got - exact)) / max(np.max(np.abs(exact)), 1e-30))
                made.append((row, call))
            except WgraphError as e:
                row.update(status="skipped", note=f"{type(e).__name__}: {e}")
            except Exception as e:  # noqa: BLE001 - one failing variant must not end the run
                row.update(status="error", note=f"{type(e).__name__}: {e}")
            rows.append(row)
        if made:
            timing.warm(dev, made[0][1], 0.3)
            reps = {id(r): _reps(dev, c, target_us, max_reps) for r, c in made}
            for _ in range(rounds):
                for r, c in made:
                    us, source = _gpu_us(dev, c, reps[id(r)], 1)
                    r.setdefault("gpu_us_all", []).extend(us)
                    r["time_source"] = source
            for r, _c in made:
                r["reps"] = reps[id(r)]
                r["gpu_us"] = statistics.median(r["gpu_us_all"])
                r["gbps"] = s.bytes / (r["gpu_us"] * 1e-6) / 1e9
                if copy_gbps:
                    r["fraction_of_copy"] = r["gbps"] / copy_gbps
            planned = next((r for r, _c in made if r["config"] == "planned"), None)
            if planned is not None and copy_gbps:
                planned.update(ceiling_fields(dev, s.bytes, planned["fraction_of_copy"], copy_gbps,
                                              target_us=target_us, max_reps=max_reps))
            if planned is not None and use_torch and torch_available:
                try:
                    t = _torch_linear(s, st, max(planned["reps"], 20))
                    planned.update(torch_us=t["torch_us"], torch_gbps=s.torch_bytes / (t["torch_us"] * 1e-6) / 1e9,
                                   ratio_to_torch=t["torch_us"] / planned["gpu_us"],
                                   torch_note="F.linear alone" if s.fused else "")
                    if not s.fused:  # both on weight copy 0
                        diff = t["output"][:, cols] - planned["_first"]
                        planned["max_abs_diff_vs_torch"] = float(np.max(np.abs(diff)))
                except Exception as e:  # noqa: BLE001 - the reference must not take the bench down
                    planned["torch_note"] = f"torch failed: {type(e).__name__}: {e}"
        for r in rows[len(rows) - len(variants):]:
            r.pop("_first", None)
        if progress:
            for r in rows[len(rows) - len(variants):]:
                progress(_line(i, len(shapes), s, r))
        del st, made
        gc.collect()
    return rows


def _line(i: int, n: int, s: GemvShape, r: dict) -> str:
    head = f"[{i + 1:3d}/{n}] {s.label():52} {r['config'][:28]:28} "
    if r["status"] != "ok":
        return head + f"{r['status']}: {r['note'][:100]}"
    return head + (f"{r['gpu_us']:8.2f} us {r['gbps']:7.0f} GB/s"
                   + (f" ({r['fraction_of_copy']:.2f} of copy)" if "fraction_of_copy" in r else "")
                   + (f"  torch {r['torch_us']:.2f} us (ratio {r['ratio_to_torch']:.2f})" if "torch_us" in r else "")
                   + f"  err {r['max_rel_err_vs_float64']:.1g}")
