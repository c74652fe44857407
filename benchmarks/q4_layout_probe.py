"""Does the Q4_0 GEMV's load pattern cap its bandwidth? (raw wgpu, no wgraph inside; run on a GPU or lavapipe)

wgraph's x_int8 Q4_0 GEMV (quant_gemv_r1_wide_i8) reads the lm_head at ~2.4 TB/s on both the H100 and the H200,
whose copy bandwidths differ by 40%: a cap of the SM side, not of DRAM. Its lanes each load a whole 18-byte block
as five 4-byte words, 18 bytes apart from lane to lane, so every load instruction of a warp touches several 128-byte
lines and the five instructions re-touch the same lines (the L1 serves each line once per instruction). This probe
times one GEMV shape with the same compute under two placements of the same bytes:
(Calls cycle over copies of W, 160 MB in all, so no call finds its weight in L2.)
  raw:   GGUF's blocks as they are (d then 16 quant bytes, 18 bytes a block; five word loads a lane a block)
  split: the same bytes in two arrays, every block's 16 quant bytes first (one aligned 16-byte load a lane a block:
         a slot's lanes read neighbouring 16-byte words), then every block's 2-byte d (one word, two blocks)
Both stage x once a workgroup as int8 (a step and the sum of its 32 values a block, as quant_x_i8_staged.wgsl does)
and take a block's dot as 8 dot4I8Packed: y[row] = sum_b d_b * step_b * (dot(q_b, xq_b) - 8 * sum(xq_b)).
A workgroup of 256 threads holds 256 / LANES slots; a slot's LANES lanes walk a row's blocks together for FT rows
(rows slot + f * slots), their sums added in workgroup memory. Checked against a float64 numpy reference of the same
integer sums. The copy kernel over the same bytes (read + write / time) is the ceiling.
Env: SHAPES (name:N:K,...; default the 1B's lm_head, gate_up, down, qkv, o_proj), REPS (calls a timing, default 40),
BATCHES (default 7) a round, ROUNDS (default 3; the median of all), CONFIGS (layout:lanes:ft,...), WARM_S. Writes $OUT/q4_layout_probe.json."""
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import wgpu

OUT = Path(os.environ.get("OUT", "/tmp/q4_layout_probe"))
OUT.mkdir(parents=True, exist_ok=True)
SHAPES = [(s.split(":")[0], int(s.split(":")[1]), int(s.split(":")[2])) for s in os.environ.get(
    "SHAPES", "lm_head:128256:2048,gate_up:16384:2048,down:2048:8192,qkv:3072:2048,o_proj:2048:2048").split(",")]
REPS = int(os.environ.get("REPS", "40"))
BATCHES = int(os.environ.get("BATCHES", "7"))
CONFIGS = [(c.split(":")[0], int(c.split(":")[1]), int(c.split(":")[2])) for c in os.environ.get(
    "CONFIGS", "raw:16:4,split:16:4,split:16:2,split:32:2,split:8:4,raw:32:2").split(",")]
THREADS = 256
CACHE_BYTES = 160 << 20
U = wgpu.BufferUsage


def kernel_source(layout: str, lanes: int, ft: int, rb: int) -> str:
    """The GEMV for one (layout, lanes, ft) and a row of rb blocks, its FT rows' loads written out (unrolled)"""
    loads, sums = [], []
    for f in range(ft):
        if layout == "raw":
            loads.append(f"""    let bi{f} = base{f} + b;
    let a{f} = bi{f} * 4u + bi{f} / 2u;
    let odd{f} = (bi{f} & 1u) != 0u;
    let w{f} = array<u32, 5>(w[a{f}], w[a{f} + 1u], w[a{f} + 2u], w[a{f} + 3u], w[a{f} + 4u]);""")
            sums.append(f"""    {{
      let q = vec4<u32>(qword(w{f}[0], w{f}[1], odd{f}), qword(w{f}[1], w{f}[2], odd{f}),
                        qword(w{f}[2], w{f}[3], odd{f}), qword(w{f}[3], w{f}[4], odd{f}));
      let d = unpack2x16float(select(w{f}[0], w{f}[0] >> 16u, odd{f})).x;
      acc[{f}] += d * xs.x * (f32(bdot(q, xl, xh)) - 8.0 * xs.y);
    }}""")
        else:
            loads.append(f"""    let bi{f} = base{f} + b;
    let q{f} = wv[bi{f}];
    let dw{f} = w[D_AT + bi{f} / 2u];""")
            sums.append(f"""    {{
      let d = unpack2x16float(select(dw{f}, dw{f} >> 16u, (bi{f} & 1u) != 0u)).x;
      acc[{f}] += d * xs.x * (f32(bdot(q{f}, xl, xh)) - 8.0 * xs.y);
    }}""")
    bases = "\n".join(f"  let base{f} = min(gs + {f}u * p.slots, p.n - 1u) * RB;" for f in range(ft))
    return f"""
struct P {{ n: u32, slots: u32, d_at: u32, pad: u32 }}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> xq: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> xf: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read> wv: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
const T: u32 = {THREADS}u;
const L: u32 = {lanes}u;
const F: u32 = {ft}u;
const S: u32 = T / L;
const RB: u32 = {rb}u;
var<workgroup> sq: array<vec4<u32>, {2 * rb}>;
var<workgroup> sf: array<vec2<f32>, {rb}>;
var<workgroup> red: array<f32, {THREADS * ft}>;

fn qword(a: u32, b: u32, odd: bool) -> u32 {{
  return select((a >> 16u) | (b << 16u), b, odd);
}}

fn bdot(q: vec4<u32>, xl: vec4<u32>, xh: vec4<u32>) -> i32 {{
  let lo = q & vec4<u32>(0x0F0F0F0Fu);
  let hi = (q >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
  return dot4I8Packed(lo.x, xl.x) + dot4I8Packed(lo.y, xl.y) + dot4I8Packed(lo.z, xl.z) + dot4I8Packed(lo.w, xl.w)
       + dot4I8Packed(hi.x, xh.x) + dot4I8Packed(hi.y, xh.y) + dot4I8Packed(hi.z, xh.z) + dot4I8Packed(hi.w, xh.w);
}}

@compute @workgroup_size({THREADS})
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) g: vec3<u32>) {{
  let D_AT = p.d_at;
  _ = &wv;  // both layouts bind both views of the weight buffer (the raw kernel reads only words)
  for (var i = t; i < RB; i += T) {{
    sq[2u * i] = xq[2u * i];
    sq[2u * i + 1u] = xq[2u * i + 1u];
    sf[i] = xf[i];
  }}
  workgroupBarrier();
  let slot = t / L;
  let lane = t % L;
  let gs = g.x * S + slot;
{bases}
  var acc: array<f32, F>;
  for (var b = lane; b < RB; b += L) {{
{chr(10).join(loads)}
    let xl = sq[2u * b];
    let xh = sq[2u * b + 1u];
    let xs = sf[b];
{chr(10).join(sums)}
  }}
  for (var f = 0u; f < F; f++) {{
    red[t * F + f] = acc[f];
  }}
  workgroupBarrier();
  if (t < S * F) {{
    let s = t / F;
    let f = t % F;
    var v = 0.0;
    for (var l = 0u; l < L; l++) {{
      v += red[(s * L + l) * F + f];
    }}
    let row = g.x * S + s + f * p.slots;
    if (g.x * S + s < p.slots && row < p.n) {{
      y[row] = v;
    }}
  }}
}}
"""


COPY_SRC = """@group(0) @binding(0) var<storage, read> a: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> b: array<vec4<u32>>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3<u32>,
                                      @builtin(num_workgroups) nw: vec3<u32>) {
  let n = arrayLength(&a);
  for (var i = g.x; i < n; i += nw.x * 256u) { b[i] = a[i]; } }"""


def quantize_x(x: np.ndarray):
    """x (K,) -> int8 values per 32-weight block, their step and sum (as quant_i8_round.wgsl rounds)"""
    blocks = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(blocks).max(axis=1)
    step = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(blocks / step[:, None]), -127, 127).astype(np.int8)
    return q, step, q.astype(np.int64).sum(axis=1)


def random_q4_0(n: int, k: int, rng):
    """n rows of k // 32 Q4_0 blocks: d (f16) and the 4-bit quants (0..15, weight = d * (q - 8)), as arrays"""
    rb = k // 32
    d = (rng.uniform(0.5, 1.5, (n, rb)) * 0.002).astype(np.float16)
    q = rng.integers(0, 16, (n, rb, 32), dtype=np.uint8)
    return d, q


def raw_bytes(d, q) -> np.ndarray:
    qs = (q[..., :16] | (q[..., 16:] << 4)).astype(np.uint8)  # byte j: weight j low, weight j + 16 high
    blocks = np.concatenate([d.view(np.uint8).reshape(*d.shape, 2), qs], axis=-1)  # 18 bytes a block
    return blocks.reshape(-1)


def split_bytes(d, q) -> tuple[np.ndarray, int]:
    qs = (q[..., :16] | (q[..., 16:] << 4)).astype(np.uint8).reshape(-1)
    dd = d.reshape(-1).view(np.uint8)
    return np.concatenate([qs, dd]), qs.size // 4  # the d words start after the quants (word index)


def pad16(a: np.ndarray) -> np.ndarray:
    return np.concatenate([a, np.zeros((-a.size) % 16 + 16, np.uint8)])


def timed_us(dev, qset, pipeline, bind_groups, groups: int) -> list[float]:
    """GPU us per call of REPS calls in one pass, cycling over the bind groups (copies of W past the L2)"""
    bind_groups = bind_groups if isinstance(bind_groups, list) else [bind_groups]
    runs = []
    for _ in range(BATCHES):
        enc = dev.create_command_encoder()
        cp = enc.begin_compute_pass(timestamp_writes={"query_set": qset, "beginning_of_pass_write_index": 0,
                                                      "end_of_pass_write_index": 1})
        cp.set_pipeline(pipeline)
        for i in range(REPS):
            cp.set_bind_group(0, bind_groups[i % len(bind_groups)])
            cp.dispatch_workgroups(groups)
        cp.end()
        enc.resolve_query_set(qset, 0, 2, TS, 0)
        enc.copy_buffer_to_buffer(TS, 0, TS_READ, 0, 16)
        dev.queue.submit([enc.finish()])
        TS_READ.map_sync(wgpu.MapMode.READ)
        t0, t1 = np.frombuffer(TS_READ.read_mapped(), np.uint64)[:2]
        TS_READ.unmap()
        runs.append((int(t1) - int(t0)) / 1e3 / REPS)
    return runs


ad = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
dev = ad.request_device_sync(required_features=["timestamp-query"],
                             required_limits={"max_storage_buffer_binding_size": ad.limits["max-storage-buffer-binding-size"],
                                              "max_buffer_size": ad.limits["max-buffer-size"]})
print(ad.summary, flush=True)
QSET = dev.create_query_set(type="timestamp", count=2)
TS = dev.create_buffer(size=16, usage=U.QUERY_RESOLVE | U.COPY_SRC)
TS_READ = dev.create_buffer(size=16, usage=U.COPY_DST | U.MAP_READ)
rng = np.random.default_rng(0)
RES = {"adapter": ad.summary, "reps": REPS, "batches": BATCHES, "rows": []}


def buf(data: np.ndarray, usage=U.STORAGE):
    return dev.create_buffer_with_data(data=np.ascontiguousarray(data).view(np.uint8), usage=usage)


ROUNDS = int(os.environ.get("ROUNDS", "3"))


def bind(pipeline, buffers):
    return dev.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
        {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}} for i, b in enumerate(buffers)])


COPY = dev.create_compute_pipeline(layout="auto", compute={"module": dev.create_shader_module(code=COPY_SRC),
                                                            "entry_point": "main"})


def warm(seconds: float):
    """The copy kernel over 96 MB until `seconds` have passed: an idle GPU's clocks up before any timing"""
    a = dev.create_buffer(size=96 << 20, usage=U.STORAGE)
    b = dev.create_buffer(size=96 << 20, usage=U.STORAGE)
    bg = bind(COPY, [a, b])
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        timed_us(dev, QSET, COPY, bg, 65535)


warm(float(os.environ.get("WARM_S", "2")))
for name, n, k in SHAPES:
    rb = k // 32
    d, q = random_q4_0(n, k, rng)
    x = rng.standard_normal(k).astype(np.float32)
    xq8, step, xsum = quantize_x(x)
    # the reference: the same integer sums in float64
    idot = np.einsum("nbk,bk->nb", q.astype(np.int64), xq8.astype(np.int64))
    ref = ((d.astype(np.float64) * step.astype(np.float64)) * (idot - 8 * xsum)).sum(axis=1)
    xq_words = np.concatenate([xq8[:, :16].reshape(rb, 16), xq8[:, 16:].reshape(rb, 16)], axis=1).view(np.uint32)
    xq_buf = buf(xq_words.reshape(-1))
    xf_buf = buf(np.stack([step, xsum.astype(np.float32)], axis=1).reshape(-1))
    y_buf = dev.create_buffer(size=n * 4, usage=U.STORAGE | U.COPY_SRC | U.COPY_DST)
    raw = pad16(raw_bytes(d, q))
    split, d_at = split_bytes(d, q)
    split = pad16(split)
    weight_bytes = n * rb * 18
    # calls cycle over copies of W whose bytes together pass the L2 (50 MB on the H100 and H200)
    copies = 1 if "CPU" in ad.summary else max(1, -(-CACHE_BYTES // weight_bytes))
    w_bufs = {"raw": [buf(raw) for _ in range(copies)], "split": [buf(split) for _ in range(copies)]}
    # the ceiling: the copy kernel over the same bytes, timed in turns with the GEMVs
    dst = dev.create_buffer(size=split.size, usage=U.STORAGE)
    calls = {"copy": (COPY, [bind(COPY, [wb, dst]) for wb in w_bufs["split"]],
                      min(65535, (split.size // 16 + 255) // 256))}
    errors = {}
    for layout, lanes, ft in CONFIGS:
        slots = -(-n // ft)
        if (THREADS // lanes) * ft > THREADS:
            continue  # the sums' last step takes one thread per (slot, row)
        groups = -(-slots // (THREADS // lanes))
        p_buf = buf(np.array([n, slots, d_at if layout == "split" else 0, 0], np.uint32), U.UNIFORM)
        pl = dev.create_compute_pipeline(layout="auto", compute={
            "module": dev.create_shader_module(code=kernel_source(layout, lanes, ft, rb)), "entry_point": "main"})
        bgs = [bind(pl, [p_buf, xq_buf, xf_buf, wb, wb, y_buf]) for wb in w_bufs[layout]]
        enc = dev.create_command_encoder()
        enc.clear_buffer(y_buf)
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pl)
        cp.set_bind_group(0, bgs[0])
        cp.dispatch_workgroups(groups)
        cp.end()
        dev.queue.submit([enc.finish()])
        got = np.frombuffer(dev.queue.read_buffer(y_buf), np.float32)
        label = f"{layout}:{lanes}:{ft}"
        errors[label] = float(np.abs(got - ref).max() / np.abs(ref).max())
        calls[label] = (pl, bgs, groups)
    runs = {label: [] for label in calls}
    for _ in range(ROUNDS):  # in turns: a clock change hits every kernel alike
        for label, (pl, bg, groups) in calls.items():
            runs[label] += timed_us(dev, QSET, pl, bg, groups)
    copy_us = statistics.median(runs["copy"])
    copy_gbps = 2 * split.size / copy_us / 1e3
    print(f"{name} [{n}, {k}]: copy of the same bytes {copy_us:.2f} us, {copy_gbps:.1f} GB/s ({copies} copies of W "
          f"cycled)", flush=True)
    RES["rows"].append({"shape": name, "n": n, "k": k, "kernel": "copy", "us": copy_us, "runs": runs["copy"],
                        "gbps": copy_gbps, "copies": copies})
    for label, err in errors.items():
        us = statistics.median(runs[label])
        gbps = weight_bytes / us / 1e3
        row = {"shape": name, "n": n, "k": k, "kernel": label, "us": us, "runs": runs[label],
               "gbps": gbps, "of_copy": gbps / copy_gbps, "max_rel_err": err, "ok": err < 1e-4}
        RES["rows"].append(row)
        print(f"  {label:12}: {us:9.2f} us  {gbps:7.1f} GB/s  {gbps / copy_gbps:.3f} of copy"
              f"  err {err:.1e}{'' if row['ok'] else '  WRONG'}  (runs {min(runs[label]):.2f}-{max(runs[label]):.2f})",
              flush=True)
    (OUT / "q4_layout_probe.json").write_text(json.dumps(RES, indent=1))
print(f"wrote {OUT / 'q4_layout_probe.json'}")
