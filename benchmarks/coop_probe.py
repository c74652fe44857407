"""Does this stack reach the tensor cores? A probe of wgpu-native's experimental cooperative matrices.

wgpu-native 29 (wgpu-py 0.32) lists a native feature `cooperative-matrix`: WGSL's `enable wgpu_cooperative_matrix;`
with `coop_mat{8,16}x{8,16}<T, A|B|C>`, `coopLoad`, `coopStore` and `coopMultiplyAdd`, lowered to SPIR-V's
VK_KHR_cooperative_matrix. Which element types and sizes an adapter takes is not queryable from wgpu-py, and
public reports disagree on whether the multiply computes anything on Vulkan in this release, so this probe asks
the GPU itself, with no wgraph inside:

1. whether the adapter lists the feature and a device can be opened with it;
2. for each (A/B type, C type, size) whether a shader compiles and one tile's product matches numpy's, and in
   which layout (`coopLoad` of a row-major array with the row stride: A @ B, or the transposes' B @ A);
3. a 32 x 32 x 64 product by 2 x 2 tiles and a K loop against float64 numpy (strides other than the tile);
4. the rate of a plain f16 -> f32 GEMM built of them (4096^3, tiles read straight from global memory), against
   the f32 FMA peak this stack reaches (63.3 TFLOP/s on an H100 and an H200, docs/measurements.md): a rate past
   it can only come from the tensor cores;
5. the batched decode step's product, 32 rows of x by the 1B model's W [n, k] (f16, row-major, so W^T is read
   column-major), K split so the grid fills the GPU: its time and the rate its W bytes are read at, beside
   the f32 FMA GEMMs' 11-26 TFLOP/s there (docs/measurements.md). Partial sums only (the summing pass of a split
   is not timed);
6. f16 attention prefill (16 heads, D = 128, no mask) on them, in two passes over the keys because a
   cooperative matrix has no element access (O cannot be rescaled in registers): the rows' max and sum first,
   then O += P V with P = exp(s - m) / l cut into two f16 halves (q and K are exact in f16, so q.k needs none).
   Against float64 numpy at S = 128, then timed at S = 4096 and read as TFLOP/s (4 S^2 D H, the usual count)
   beside the issue's target of 40% of the f32 FMA peak (25.3).

Run: `python benchmarks/coop_probe.py` (seconds). Prints one line a check; never raises on a missing feature.
"""
import logging
import sys
import time

import numpy as np
import wgpu

FEATURE = "cooperative-matrix"
NP_TYPE = {"f16": np.float16, "f32": np.float32}
FMA_PEAK_TFLOPS = 63.34   # this stack's f32 FMA peak on an H100 and an H200 (docs/measurements.md)


def refusal(exc: Exception) -> str:
    """An exception as one line of a probe's report."""
    text = str(exc).strip()
    return f"refused: {type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"


def header(ab, cr):
    f16 = "enable f16;\n" if "f16" in (ab, cr) else ""
    return f16 + "enable wgpu_cooperative_matrix;\n"


def tile_kernel(ab, cr, s, load, staged=False):
    """One s x s x s product: C = A B (+ the C read first, zeros), every array row-major with stride s; `staged`:
    A and B are copied into workgroup memory first (the cooperative loads from a workgroup pointer)."""
    src_a, src_b, stage = "a", "b", ""
    if staged:
        src_a, src_b = "sa", "sb"
        stage = f"""    for (var i = t; i < {s * s}u; i += 32u) {{
        sa[i] = a[i];
        sb[i] = b[i];
    }}
    workgroupBarrier();
"""
    workgroup = "".join(f"var<workgroup> {name}: array<{ab}, {s * s}>;\n" for name in ("sa", "sb") if staged)
    return header(ab, cr) + f"""
@group(0) @binding(0) var<storage, read> a: array<{ab}>;
@group(0) @binding(1) var<storage, read> b: array<{ab}>;
@group(0) @binding(2) var<storage, read_write> c: array<{cr}>;
{workgroup}@compute @workgroup_size(32)
fn main(@builtin(local_invocation_index) t: u32) {{
{stage}    let ta = {load}<coop_mat{s}x{s}<{ab}, A>>(&{src_a}[0], {s}u);
    let tb = {load}<coop_mat{s}x{s}<{ab}, B>>(&{src_b}[0], {s}u);
    var tc = {load}<coop_mat{s}x{s}<{cr}, C>>(&c[0], {s}u);
    tc = coopMultiplyAdd(ta, tb, tc);
    {load.replace("Load", "Store")}(tc, &c[0], {s}u);
}}
"""


def gemm_kernel(ab, cr, s, tiles, m, n, k, load):
    """C[m, n] = A[m, k] B[k, n], row-major; a workgroup (one subgroup) owns tiles x tiles output tiles."""
    tile = f"coop_mat{s}x{s}<{cr}, C>"
    acc = "\n".join(f"    var c{i}{j} = {load}<{tile}>(&c[(row + {i * s}u) * {n}u + col + {j * s}u], {n}u);"
                    for i in range(tiles) for j in range(tiles))
    loads = "\n".join(
        [f"        let a{i} = {load}<coop_mat{s}x{s}<{ab}, A>>(&a[(row + {i * s}u) * {k}u + kk], {k}u);"
         for i in range(tiles)]
        + [f"        let b{j} = {load}<coop_mat{s}x{s}<{ab}, B>>(&b[kk * {n}u + col + {j * s}u], {n}u);"
           for j in range(tiles)])
    fmas = "\n".join(f"        c{i}{j} = coopMultiplyAdd(a{i}, b{j}, c{i}{j});"
                     for i in range(tiles) for j in range(tiles))
    store = load.replace("Load", "Store")
    stores = "\n".join(f"    {store}(c{i}{j}, &c[(row + {i * s}u) * {n}u + col + {j * s}u], {n}u);"
                       for i in range(tiles) for j in range(tiles))
    return header(ab, cr) + f"""
@group(0) @binding(0) var<storage, read> a: array<{ab}>;
@group(0) @binding(1) var<storage, read> b: array<{ab}>;
@group(0) @binding(2) var<storage, read_write> c: array<{cr}>;
@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) wg: vec3<u32>) {{
    let row = wg.y * {tiles * s}u;
    let col = wg.x * {tiles * s}u;
{acc}
    for (var kk = 0u; kk < {k}u; kk += {s}u) {{
{loads}
{fmas}
    }}
{stores}
}}
"""


def xw_kernel(load_x, load_w, n, k, k_split):
    """y_part[z, 32, n] += x[32, k in slice z] @ W[n, k in slice z]^T; 4 subgroups a workgroup, each 32 rows x 16
    features (2 tiles), x and W tiles read straight from global memory."""
    return header("f16", "f32") + f"""
@group(0) @binding(0) var<storage, read> x: array<f16>;
@group(0) @binding(1) var<storage, read> w: array<f16>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {{
    let col = wg.x * 64u + (lid.x / 32u) * 16u;   // NVIDIA's 32-lane subgroups
    let k0 = wg.z * {k_split}u;
    let base = wg.z * 32u * {n}u;
    var c0 = {load_x}<coop_mat16x16<f32, C>>(&y[base + col], {n}u);   // zeros on a fresh y
    var c1 = {load_x}<coop_mat16x16<f32, C>>(&y[base + 16u * {n}u + col], {n}u);
    for (var kk = k0; kk < k0 + {k_split}u; kk += 16u) {{
        let a0 = {load_x}<coop_mat16x16<f16, A>>(&x[kk], {k}u);
        let a1 = {load_x}<coop_mat16x16<f16, A>>(&x[16u * {k}u + kk], {k}u);
        let b = {load_w}<coop_mat16x16<f16, B>>(&w[col * {k}u + kk], {k}u);
        c0 = coopMultiplyAdd(a0, b, c0);
        c1 = coopMultiplyAdd(a1, b, c1);
    }}
    {load_x.replace("Load", "Store")}(c0, &y[base + col], {n}u);
    {load_x.replace("Load", "Store")}(c1, &y[base + 16u * {n}u + col], {n}u);
}}
"""


DECODE_SHAPES = {"qkv": (3072, 2048), "o_proj": (2048, 2048), "gate_up": (16384, 2048), "down": (2048, 8192),
                 "lm_head": (128256, 2048)}


def xw_splits(n, k, fill=264):
    splits = 1
    while (n // 64) * splits < fill and k // (splits * 2) >= 256 and (k // (splits * 2)) % 16 == 0:
        splits *= 2
    return splits


def check_xw(gpu, load_x, load_w, rng, n=256, k=512):
    x = rng.standard_normal((32, k)).astype(np.float16)
    w = rng.standard_normal((n, k)).astype(np.float16)
    splits = 2
    y = gpu.buffer(np.zeros((splits, 32, n), np.float32))
    gpu.run(gpu.pipeline(xw_kernel(load_x, load_w, n, k, k // splits)), [gpu.buffer(x), gpu.buffer(w), y],
            (n // 64, 1, splits))
    got = gpu.read(y, np.float32, (splits, 32, n)).astype(np.float64).sum(axis=0)
    want = x.astype(np.float64) @ w.astype(np.float64).T
    scale = np.abs(x.astype(np.float64)) @ np.abs(w.astype(np.float64)).T
    return float(np.max(np.abs(got - want) / scale))


def time_xw(gpu, load_x, load_w, n, k, repeat=20):
    splits = xw_splits(n, k)
    x = gpu.buffer(np.zeros((32, k), np.float16))
    w = gpu.buffer(np.zeros((n, k), np.float16))
    y = gpu.buffer(np.zeros((splits, 32, n), np.float32))
    pipeline = gpu.pipeline(xw_kernel(load_x, load_w, n, k, k // splits))
    return gpu.seconds(pipeline, [x, w, y], (n // 64, 1, splits), repeat), splits


def attention_kernel(rows, cols, s_len, heads):
    """f16 q, k, v [s_len, heads, 128] -> o f32: a workgroup 64 queries of one head, 4 subgroups of 16 rows; scores
    16 x 64 a subgroup per block of 64 keys through workgroup memory (row stride 68 floats, P's 72 halves: 16-byte
    aligned rows for the cooperative loads)."""
    d_tiles, key_tiles = 8, 4
    qs = "\n".join(f"    let q{i} = {rows}<coop_mat16x16<f16, A>>(&q[qbase + {16 * i}u], RS);" for i in range(d_tiles))

    def scores():
        out = []
        for j in range(key_tiles):
            out.append(f"        var s{j} = {rows}<coop_mat16x16<f32, C>>(&zero[0], 16u);")
            for i in range(d_tiles):
                out.append(f"        s{j} = coopMultiplyAdd(q{i}, {cols}<coop_mat16x16<f16, B>>("
                           f"&k[(kb + {16 * j}u) * RS + h * 128u + {16 * i}u], RS), s{j});")
            out.append(f"        {rows.replace('Load', 'Store')}(s{j}, &ss[sbase + {16 * j}u], SS);")
        return "\n".join(out)

    o_init = "\n".join(f"    var o{i} = {rows}<coop_mat16x16<f32, C>>(&zero[0], 16u);" for i in range(d_tiles))
    pv = []
    for j in range(key_tiles):
        pv.append(f"        let ph{j} = {rows}<coop_mat16x16<f16, A>>(&ph[pbase + {16 * j}u], PS);")
        pv.append(f"        let pl{j} = {rows}<coop_mat16x16<f16, A>>(&pl[pbase + {16 * j}u], PS);")
        for i in range(d_tiles):
            pv.append(f"        let v{j}_{i} = {rows}<coop_mat16x16<f16, B>>(&v[(kb + {16 * j}u) * RS + h * 128u + "
                      f"{16 * i}u], RS);")
            pv.append(f"        o{i} = coopMultiplyAdd(ph{j}, v{j}_{i}, o{i});")
            pv.append(f"        o{i} = coopMultiplyAdd(pl{j}, v{j}_{i}, o{i});")
    pv = "\n".join(pv)
    o_out = "\n".join(f"    {rows.replace('Load', 'Store')}(o{i}, &o[qbase + {16 * i}u], RS);" for i in range(d_tiles))
    return header("f16", "f32") + f"""
@group(0) @binding(0) var<storage, read> q: array<f16>;
@group(0) @binding(1) var<storage, read> k: array<f16>;
@group(0) @binding(2) var<storage, read> v: array<f16>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
const S: u32 = {s_len}u;
const RS: u32 = {heads * 128}u;
const SCALE: f32 = {1 / np.sqrt(128.0)};
const SS: u32 = 68u;
const PS: u32 = 72u;
var<workgroup> zero: array<f32, 256>;
var<workgroup> ss: array<f32, 4u * 16u * SS>;
var<workgroup> ph: array<f16, 4u * 16u * PS>;
var<workgroup> pl: array<f16, 4u * 16u * PS>;
var<workgroup> stat: array<f32, 4u * 16u * 4u>;
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {{
    let h = wg.y;
    let sg = t / 32u;
    let lane = t % 32u;
    let row0 = wg.x * 64u + sg * 16u;
    let qbase = row0 * RS + h * 128u;
    let sbase = sg * 16u * SS;
    let pbase = sg * 16u * PS;
    let r = lane % 16u;    // the row of this lane's 32 keys (of 64 a block), and which half
    let half = lane / 16u;
{qs}
    var m = -3.0e38;
    var l = 0.0;
    for (var kb = 0u; kb < S; kb += 64u) {{
{scores()}
        workgroupBarrier();
        for (var c = 0u; c < 32u; c++) {{
            let x = ss[sbase + r * SS + half * 32u + c] * SCALE;
            let m_new = max(m, x);
            l = l * exp(m - m_new) + exp(x - m_new);
            m = m_new;
        }}
        workgroupBarrier();
    }}
    stat[(sg * 16u + r) * 4u + half * 2u] = m;
    stat[(sg * 16u + r) * 4u + half * 2u + 1u] = l;
    workgroupBarrier();
    let m0 = stat[(sg * 16u + r) * 4u];
    let m1 = stat[(sg * 16u + r) * 4u + 2u];
    let row_m = max(m0, m1);
    let row_l = stat[(sg * 16u + r) * 4u + 1u] * exp(m0 - row_m) + stat[(sg * 16u + r) * 4u + 3u] * exp(m1 - row_m);
{o_init}
    for (var kb = 0u; kb < S; kb += 64u) {{
{scores()}
        workgroupBarrier();
        for (var c = 0u; c < 32u; c++) {{
            let p = exp(ss[sbase + r * SS + half * 32u + c] * SCALE - row_m) / row_l;
            let hi = f16(p);
            ph[pbase + r * PS + half * 32u + c] = hi;
            pl[pbase + r * PS + half * 32u + c] = f16(p - f32(hi));
        }}
        workgroupBarrier();
{pv}
        workgroupBarrier();
    }}
{o_out}
}}
"""


def run_attention(gpu, rows, cols, s_len, heads, rng, repeat=0):
    """repeat 0: the largest error against float64 numpy, over the largest |o|; else seconds a dispatch."""
    q, k, v = (rng.standard_normal((s_len, heads, 128)).astype(np.float16) for _ in range(3))
    o = gpu.buffer(np.zeros((s_len, heads, 128), np.float32))
    pipeline = gpu.pipeline(attention_kernel(rows, cols, s_len, heads))
    buffers = [gpu.buffer(q), gpu.buffer(k), gpu.buffer(v), o]
    groups = (s_len // 64, heads, 1)
    if repeat:
        return gpu.seconds(pipeline, buffers, groups, repeat)
    gpu.run(pipeline, buffers, groups)
    got = gpu.read(o, np.float32, (s_len, heads, 128))
    q64, k64, v64 = (a.astype(np.float64).transpose(1, 0, 2) for a in (q, k, v))
    s = q64 @ k64.transpose(0, 2, 1) / np.sqrt(128.0)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = ((p / p.sum(-1, keepdims=True)) @ v64).transpose(1, 0, 2)
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


class Gpu:
    def __init__(self):
        self.adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        info = self.adapter.info
        print(f"adapter: {info.get('device')} / {info.get('description')} ({info.get('backend_type')})")
        print(f"{FEATURE} listed: {FEATURE in self.adapter.features}")
        features = [f for f in (FEATURE, "shader-f16") if f in self.adapter.features]
        self.device = self.adapter.request_device_sync(required_features=features,
                                                       required_limits=dict(self.adapter.limits))
        print(f"device opened with {features}")

    def buffer(self, array):
        return self.device.create_buffer_with_data(
            data=np.ascontiguousarray(array).tobytes(),
            usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST)

    def pipeline(self, code):
        module = self.device.create_shader_module(code=code)
        return self.device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})

    def run(self, pipeline, buffers, groups, repeat=1):
        bind = self.device.create_bind_group(
            layout=pipeline.get_bind_group_layout(0),
            entries=[{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                     for i, b in enumerate(buffers)])
        encoder = self.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, bind)
        for _ in range(repeat):
            compute.dispatch_workgroups(*groups)
        compute.end()
        self.device.queue.submit([encoder.finish()])

    def read(self, buffer, dtype, shape):
        return np.frombuffer(self.device.queue.read_buffer(buffer), dtype=dtype).reshape(shape)

    def seconds(self, pipeline, buffers, groups, repeat):
        """Wall time of one dispatch, `repeat` of them in one submit after one to warm (the kernel compiled and
        its buffers resident); a 4-byte read of the last buffer waits for each submit."""
        for count in (1, repeat):
            start = time.perf_counter()
            self.run(pipeline, buffers, groups, repeat=count)
            self.device.queue.read_buffer(buffers[-1], 0, 4)
        return (time.perf_counter() - start) / repeat


def check_tile(gpu, ab, cr, s, load, rng, staged=False):
    a = rng.standard_normal((s, s)).astype(NP_TYPE[ab])
    b = rng.standard_normal((s, s)).astype(NP_TYPE[ab])
    c = gpu.buffer(np.zeros((s, s), NP_TYPE[cr]))
    gpu.run(gpu.pipeline(tile_kernel(ab, cr, s, load, staged)), [gpu.buffer(a), gpu.buffer(b), c], (1, 1, 1))
    got = gpu.read(c, NP_TYPE[cr], (s, s)).astype(np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    scale = np.abs(a64) @ np.abs(b64)
    candidates = {"A @ B": a64 @ b64, "B @ A": b64 @ a64, "(A @ B)^T": (a64 @ b64).T, "zeros": np.zeros((s, s))}
    errors = {name: float(np.max(np.abs(got - want) / (scale + 1e-30))) for name, want in candidates.items()}
    best = min(errors, key=errors.get)
    return best, errors[best]


def check_gemm(gpu, ab, cr, s, load, rng, m=32, n=32, k=64):
    a = rng.standard_normal((m, k)).astype(NP_TYPE[ab])
    b = rng.standard_normal((k, n)).astype(NP_TYPE[ab])
    c = gpu.buffer(np.zeros((m, n), NP_TYPE[cr]))
    tiles = 2
    groups = (n // (tiles * s), m // (tiles * s), 1)
    gpu.run(gpu.pipeline(gemm_kernel(ab, cr, s, tiles, m, n, k, load)), [gpu.buffer(a), gpu.buffer(b), c], groups)
    got = gpu.read(c, NP_TYPE[cr], (m, n)).astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    return float(np.max(np.abs(got - want) / scale))


def time_gemm(gpu, load, tiles, size=4096, repeat=5):
    s = 16
    a = gpu.buffer(np.zeros((size, size), np.float16))
    b = gpu.buffer(np.zeros((size, size), np.float16))
    c = gpu.buffer(np.zeros((size, size), np.float32))
    pipeline = gpu.pipeline(gemm_kernel("f16", "f32", s, tiles, size, size, size, load))
    seconds = gpu.seconds(pipeline, [a, b, c], (size // (tiles * s), size // (tiles * s), 1), repeat)
    return 2 * size ** 3 / seconds / 1e12, seconds


def main():
    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    logging.getLogger("wgpu").setLevel(logging.INFO)   # wgpu-hal logs how many configurations it accepts
    gpu = Gpu()
    if FEATURE not in gpu.device.features:
        print("no cooperative matrices on this adapter")
        return 0
    rng = np.random.default_rng(0)
    working = []
    for ab, cr, s in [("f16", "f32", 16), ("f16", "f16", 16), ("f32", "f32", 8), ("f16", "f32", 8), ("f16", "f16", 8),
                      ("f32", "f32", 16)]:
        for load in ("coopLoad", "coopLoadT"):
            name = f"{ab}x{ab}->{cr} {s}x{s}x{s} {load}"
            try:
                best, error = check_tile(gpu, ab, cr, s, load, rng)
                gemm_error = check_gemm(gpu, ab, cr, s, load, rng)
                print(f"{name}: one tile matches {best} (max rel err {error:.2e}); 32x32x64 GEMM rel err "
                      f"{gemm_error:.2e}")
                if best == "A @ B" and gemm_error < 1e-2 and (ab, cr, s) == ("f16", "f32", 16):
                    working.append(load)
            except Exception as exc:   # noqa: BLE001 - a probe reports every refusal and goes on
                print(f"{name}: {refusal(exc)}")
    for load in ("coopLoad", "coopLoadT"):
        try:
            best, error = check_tile(gpu, "f16", "f32", 16, load, rng, staged=True)
            print(f"f16xf16->f32 {load} from workgroup memory: one tile matches {best} (max rel err {error:.2e})")
        except Exception as exc:   # noqa: BLE001
            print(f"f16xf16->f32 {load} from workgroup memory: {refusal(exc)}")
    for load in working[:1]:
        for tiles in (2, 4):
            try:
                tflops, seconds = time_gemm(gpu, load, tiles)
                print(f"f16->f32 GEMM 4096^3, {tiles}x{tiles} tiles a subgroup, {load}: {seconds * 1e3:.3f} ms, "
                      f"{tflops:.1f} TFLOP/s ({tflops / FMA_PEAK_TFLOPS:.2f}x the f32 FMA peak)")
            except Exception as exc:   # noqa: BLE001
                print(f"timing {tiles}x{tiles} {load}: {refusal(exc)}")
    if working:
        right = []
        for load_x in ("coopLoad", "coopLoadT"):
            for load_w in ("coopLoad", "coopLoadT"):
                try:
                    error = check_xw(gpu, load_x, load_w, rng)
                    print(f"x by {load_x}, W by {load_w}: 32x256x512 rel err {error:.2e}")
                    if error < 1e-2:
                        right.append((load_x, load_w))
                except Exception as exc:   # noqa: BLE001
                    print(f"x by {load_x}, W by {load_w}: {refusal(exc)}")
        for load_x, load_w in right[:1]:
            try:
                error = run_attention(gpu, load_x, load_w, 128, 2, rng)
                print(f"attention f16 S=128 H=2 D=128 (rows {load_x}, columns {load_w}): max error {error:.2e} of "
                      f"max |o| against float64")
                seconds = run_attention(gpu, load_x, load_w, 4096, 16, rng, repeat=5)
                tflops = 4 * 4096 ** 2 * 128 * 16 / seconds / 1e12
                print(f"attention f16 S=4096 H=16 D=128 no mask: {seconds * 1e3:.3f} ms, {tflops:.1f} TFLOP/s "
                      f"({tflops / FMA_PEAK_TFLOPS:.2f} of the f32 FMA peak; the target 0.40)")
            except Exception as exc:   # noqa: BLE001
                print(f"attention: {refusal(exc)}")
            for name, (n, k) in DECODE_SHAPES.items():
                seconds, splits = time_xw(gpu, load_x, load_w, n, k)
                print(f"32 rows x {name} [{n}, {k}] f16 W, {splits} K slices: {seconds * 1e6:.1f} us, "
                      f"{2 * 32 * n * k / seconds / 1e12:.1f} TFLOP/s, W read at {2 * n * k / seconds / 1e9:.0f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
