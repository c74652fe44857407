"""Where the f16 decode attention kernel's fixed cost a call goes (run from the project root on a GPU; about 3
minutes on an H100): at 32/8 heads the planned `decode_fused_g4_f16` takes ~1.33 ns a key, as torch does, plus
~20 µs a call against torch's ~11 (docs/attention.md, "Where the 32/8 gap is"). Each ablation is a copy of the
planned entry whose WGSL is edited by text substitution in a copy of wgraph/shaders/ (experimental registry
entries, forced by `variant=`; the package's shaders are untouched), timed beside the planned kernel, a read of the
same K/V bytes and torch:

  A  planned        the planner's kernel for the shape (asserted: decode_fused_g4_f16 on a GPU)
  B  no_kv          K/V words made from the key's index instead of loaded: launch + math + merge + stores
  C  loads_only     K/V loaded, the math dropped (the words XOR-folded into one register, stored at the end):
                    streaming with the kernel's access pattern and grid, + merge + stores
  D  empty          every chunk empty (n = 0, a constant: the compiler drops the steps and their loads): launch
                    + prologue (params, range, q into workgroup memory, barrier) + merge + partial stores
  D1 empty_load1    n = 0 known only at run time: D + the pipeline's first loads (issued, never used) and the
                    planned kernel's registers
  D2 empty_nomerge  D without the chunk's merge (no shuffles, workgroup-memory rounds or barriers): each head's
                    partials stored straight from the lanes' registers, as many stores as the merge makes
  D2a empty_shuffles  D2 after the merge's subgroup butterfly (its shuffles, no workgroup-memory rounds): the
                    butterfly's cost over D2
  D2b empty_rounds  D without the butterfly (the workgroup-memory rounds and barriers alone): the rounds' cost
  D3 launch         D2 without the stores: nothing left but the launch of A's grid and its early returns (the
                    compiler drops the dead rest): the floor of one pass of this grid
  E  chunk pass     each ablation's chunk pass dispatched alone (every call's combine left out of the pass:
                    wgraph.bench.timing.kernel_subsets_us), beside the span's per-kernel split
  F  combine        the combine pass alone, the same way
  G  read           K and V read once by a plain read kernel (16 bytes a thread, nothing written but one guarded
                    word) in one dispatch (256 words a workgroup); read_grid: the same bytes in as many workgroups
                    as A's grid (256-376 at these lengths), one contiguous range each; copy: the bench's copy
                    kernel over as many bytes as K and V (it writes them too: twice the traffic)
  H  torch          torch SDPA on the same shape (CUDA events), where torch+CUDA is importable

Every attention ablation is timed as attention_ab.py times: `replay` (the bench's timer: a Program of 20 calls,
wall clock), `span` (timestamps around every dispatch, with each kernel's time), plus its passes alone; median of
3 rounds taken in turns. Then per ablation the least-squares line time = a + b * keys over the lengths >= 16384
(a: the fixed part, b: ns a key; FIT_FROM changes 16384). HEADS="32/8", DIMS="128,64",
LENGTHS="4096,16384,32768,65536" override the shapes (heads of GQA 4: the ablations are copies of the g4 kernel);
ROUNDS (3). Writes $OUT/decode_ablation.json (OUT default /tmp/decode_ablation). SMALL=1: a lavapipe smoke
run (8/2 heads, D 64, 64 and 256 keys, no torch) that checks the planned kernel against float64; the ablated
kernels compute no attention and are not checked."""
import json
import os
import statistics
import time
from pathlib import Path

import attrs
import numpy as np

import ab_registry
import ab_timing

SMALL = os.environ.get("SMALL") == "1"
OUT = Path(os.environ.get("OUT", "/tmp/decode_ablation"))
OUT.mkdir(parents=True, exist_ok=True)
HEADS = ab_registry.env_list("HEADS", lambda v: tuple(int(x) for x in v.split("/"))) or \
    (((8, 2),) if SMALL else ((32, 8),))
DIMS = ab_registry.env_list("DIMS", int) or ((64,) if SMALL else (128, 64))
LENGTHS = ab_registry.env_list("LENGTHS", int) or ((64, 256) if SMALL else (4096, 16384, 32768, 65536))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
# the fit's lengths: an H100's L2 holds 50 MB, and 32/8 heads' K/V at D = 128 take 67 MB from 16384 keys (D = 64:
# 34 MB at 16384 keys, 67 MB from 32768), so back-to-back calls read them from DRAM
FIT_FROM = int(os.environ.get("FIT_FROM", "16384"))
N_CALLS = 5 if SMALL else 20
PLANNED = "decode_fused_g4_f16"
EXP = Path("/tmp/decode_ablation_shaders")
FLAT = ab_registry.copy_shaders(EXP)


# ---- the ablated kernels: text substitutions of the planned kernel's WGSL, each checked to apply ----

sub = ab_registry.sub


MAIN_FILE = FLAT[PLANNED]["file"]
# the chunk's bounds written out in the main file (its include inlined), so an ablation can replace its `n`
CHUNK_INCLUDE = "//!include attention_splitk_chunk.wgsl"
MAIN = sub((EXP / MAIN_FILE).read_text(), CHUNK_INCLUDE, (EXP / "attention_splitk_chunk.wgsl").read_text())
STEPS = (EXP / "attention_fused_steps.wgsl").read_text()
STEPS_INCLUDE = "//!include attention_fused_steps.wgsl"
N_LINE = "    let n = min(chunk, range.y - lo);"
HEAD_INCLUDE = "//!include attention_splitk_head.wgsl\n"
# A kernel that loads no K/V (B, D) would leave the k and v bindings unused, which a driver or wgpu may drop from
# the pipeline: a branch never taken (num_chunks >= 1) that the compiler cannot prove dead keeps them.
KEEP_BINDINGS = HEAD_INCLUDE + ("    if (params.num_chunks == 0u) {\n"
                                "        part_acc[0] = f32(k[0].x ^ v[0].x);\n    }\n")
# B: a word of halves in [1, 2) whose mantissas are the row's index (so each step's math has new values and
# cannot be hoisted or folded), a few integer instructions in place of a 16-byte load.
FAKE_FN = """
fn fake_kv(i: u32, salt: u32) -> vec4<u32> {
    let m = ((i + salt) & 0x3ffu) * 0x00010001u;
    return (vec4<u32>(m) ^ vec4<u32>(0u, 1u, 2u, 3u)) | vec4<u32>(0x3c003c00u);
}
"""
K_LOAD = "= k[r + ${p}u * LPR];"
V_LOAD = "= v[r + ${p}u * LPR];"
DOTS = "        // partial dots s[u * G_TILE + hh], then summed over the slot's lanes\n"
LOOP = "    for (var kb: u32 = 0u; kb < n; kb += KS * U) {\n"
# C: each step's K and V words XOR-folded into one register; after the loop it goes into acc (exact small
# floats, no NaN), which the merge and the partial stores write out, so no load is dead.
FOLD = """//!repeat i U * PPL
        fold ^= kc[$i] ^ vc[$i];
//!end
    }
    acc[0] = vec4<f32>(fold & vec4<u32>(0xffffu));
"""


MERGE_INCLUDE = "//!include attention_fused_merge.wgsl"
EMPTY_N = "    let n = 0u;                                   // ablation D"
# D2: each head's (m, l) by thread 0 and its D sums by the first threads, from the lanes' own registers (the merge's
# store count; acc[0] keeps the registers live; the values are not attention)
NO_MERGE = """    // ablation D2: no merge
    if (t == 0u) {
//!repeat hh G_TILE
        if (${hh}u < ng) {
            store_ml(${hh}u, m[$hh], l[$hh]);
        }
//!end
    }
    for (var i: u32 = t; i < ng * D; i += WG) {
        store_acc(i / D, i % D, acc[0].x, 0.0);
    }"""


# The merge (attention_fused_merge.wgsl) in its two halves: the subgroup butterfly, then the states left merged
# through workgroup memory (from `let ST`)
MERGE = (EXP / "attention_fused_merge.wgsl").read_text()
ROUNDS_AT = "    let ST = max(sg_live, LPR);"
BUTTERFLY_AT = "    for (var mask: u32 = LPR; mask < sg_live; mask *= 2u) {"
for at in (ROUNDS_AT, BUTTERFLY_AT):
    sub(MERGE, at, at)   # the edit rule's check: each cut falls at one place, else the merge changed
MERGE_SHUFFLES = "    // ablation D2a: the butterfly, then D2's stores\n" + MERGE.split(ROUNDS_AT)[0] + NO_MERGE
MERGE_ROUNDS = ("    // ablation D2b: no butterfly\n" + MERGE.split(BUTTERFLY_AT)[0] + ROUNDS_AT
                + MERGE.split(ROUNDS_AT)[1])


def ablation_sources() -> dict:
    """{tag: {file name: WGSL}} of every ablated kernel (its main file and, where changed, its steps)."""
    steps_b = sub(sub(STEPS, K_LOAD, "= fake_kv(r + ${p}u * LPR, 0u);", 2), V_LOAD,
                  "= fake_kv(r + ${p}u * LPR, 0x155u);", 2)
    head, _ = sub(STEPS, DOTS, DOTS).split(DOTS)
    steps_c = sub(head, LOOP, "    var fold = vec4<u32>(0u);\n" + LOOP) + FOLD

    def main(tag: str, steps: bool, n_line: str | None = None, extra: str = "", merge: str | None = None) -> dict:
        text = sub(MAIN, HEAD_INCLUDE, KEEP_BINDINGS)
        text = sub(text, "@compute", extra + "\n@compute") if extra else text
        if merge is not None:
            text = sub(text, MERGE_INCLUDE, merge)
        if steps:
            text = sub(text, STEPS_INCLUDE, f"//!include x_abl_steps_{tag}.wgsl")
        if n_line:
            text = sub(text, N_LINE, n_line)
        return {f"x_abl_{tag}.wgsl": text}

    return {
        "no_kv": {**main("no_kv", True, extra=FAKE_FN), "x_abl_steps_no_kv.wgsl": steps_b},
        "loads_only": {**main("loads_only", True), "x_abl_steps_loads_only.wgsl": steps_c},
        "empty": main("empty", False, EMPTY_N),
        "empty_load1": main("empty_load1", False,
                            "    let n = select(0u, min(chunk, range.y - lo), params.num_chunks == 0u);  // D1"),
        "empty_nomerge": main("empty_nomerge", False, EMPTY_N, merge=NO_MERGE),
        "empty_shuffles": main("empty_shuffles", False, EMPTY_N, merge=MERGE_SHUFFLES),
        "empty_rounds": main("empty_rounds", False, EMPTY_N, merge=MERGE_ROUNDS),
        "launch": main("launch", False, EMPTY_N, merge="    // ablation D3: no merge, no stores\n"),
    }


READ_WGSL = """// decode_ablation.py's G: K and V read once, 16 bytes a thread a step, workgroup w reading words
// [w * per, (w + 1) * per) of each; nothing written but one word where the fold meets a value it never takes
// (magic), so no load is dead.
struct ReadParams {
  count: u32,   // vec4 words of each of k and v
  per: u32,     // words of each a workgroup reads
  magic: u32,
}

@group(0) @binding(0) var<uniform> params: ReadParams;
@group(0) @binding(1) var<storage, read> k: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> v: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<u32>>;

@compute @workgroup_size({{WORKGROUP_SIZE}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let lo = wid.x * params.per;
  let hi = min(params.count, lo + params.per);
  var f = vec4<u32>(0u);
  for (var i = lo + lid.x; i < hi; i = i + {{WORKGROUP_SIZE_X}}u) {
    f = f ^ k[i] ^ v[i];
  }
  if (all(f == vec4<u32>(params.magic))) {
    y[0] = f;
  }
}
"""
ABLATIONS = {tag: f"x_abl_g4_f16_{tag}" for tag in ("no_kv", "loads_only", "empty", "empty_load1", "empty_nomerge",
                                                    "empty_shuffles", "empty_rounds", "launch")}
entries = []
for tag, files in ablation_sources().items():
    for name, text in files.items():
        (EXP / name).write_text(text)
    entries.append(ab_registry.toml_entry(ABLATIONS[tag], {**FLAT[PLANNED], "file": f"x_abl_{tag}.wgsl",
                                                           "tier": "exp"}))
(EXP / "x_abl_read.wgsl").write_text(READ_WGSL)
entries.append(ab_registry.toml_entry("x_abl_read", {"op": "x_abl_read", "file": "x_abl_read.wgsl", "entry": "main",
                                                     "workgroup_size": [256], "output_dtype": "u32"}))
(EXP / "registry" / "zz_ablation.toml").write_text("\n\n".join(entries) + "\n")

import wgraph.kernels.registry as R  # noqa: E402

R.SHADER_DIR = EXP
from wgraph.bench import timing, torch_ref, warmup  # noqa: E402

TORCH = False if SMALL else torch_ref.probe()["available"]
if TORCH:
    warmup.init_torch_cuda()   # torch's CUDA context before the first wgraph device
import wgraph as wg  # noqa: E402
from wgraph.bench.memory_kernels import BENCH_COPY, CopyParams  # noqa: E402
from wgraph.bench.grids import Shape  # noqa: E402

from wgraph.ops import attention_loops  # noqa: E402
from wgraph.ops.core import OpDef, apply, ceil_div, register  # noqa: E402
from wgraph.tensor import TensorSpec  # noqa: E402


# lavapipe's loop cap: the ablated kernels' loops are the planned kernel's or fewer (its bound holds); the bounds
# are known by file name, so each copy gets the planned file's (a CPU device refuses a kernel without one)
for tag in ABLATIONS:
    attention_loops.BOUNDS[f"x_abl_{tag}.wgsl"] = attention_loops.BOUNDS[MAIN_FILE]


# ---- G: the read kernel as a bench-private op ----

@attrs.frozen
class ReadParams:
    groups: int = 0   # workgroups, each one contiguous range; 0: 256 words a workgroup (one a thread)


def _infer_read(params, specs):
    k, v = specs
    if k.nbytes != v.nbytes or k.nbytes % 16:
        raise wg.ShapeError(f"x_abl_read reads two equal buffers of 16-byte words; got {k.nbytes} and {v.nbytes} bytes")
    return (TensorSpec((4,), "u32"),)


def _encode_read(ctx, params, inputs, outputs):
    (k, v), (y,) = inputs, outputs
    count = k.nbytes // 16
    groups = params.groups or min(ceil_div(count, 256), ctx.caps.max_workgroups_per_dim)
    per = ceil_div(count, groups)
    return [ctx.dispatch("x_abl_read", uniforms={"count": count, "per": per, "magic": 0x9e3779b9},
                         bindings={"k": k, "v": v, "y": y}, workgroups=(groups, 1, 1), label="x_abl_read")]


X_READ = register(OpDef("x_abl_read", _infer_read, _encode_read))

dev = wg.default_device()
print(dev.caps, flush=True)
RES = {"caps": str(dev.caps), "torch": TORCH, "planned": PLANNED, "ablations": ABLATIONS, "fit_from": FIT_FROM,
       "rows": [],
       "note": "only the planned kernel (A) computes attention and is checked against float64; B, C and D-D3 and the "
               "read kernels compute nothing meaningful and are not checked"}
RES["prepare"] = warmup.prepare(dev, TORCH)
WARM_S = 0.05 if SMALL else 0.15


def save():
    (OUT / "decode_ablation.json").write_text(json.dumps(RES, indent=1, default=str))


def reference(q, k, v):
    """float64 attention of one decode query [1, hq, D] over k, v [L, hkv, D] (no mask: the query is the last)."""
    hq, hkv, d = q.shape[1], k.shape[1], q.shape[2]
    qg = q[0].astype(np.float64).reshape(hkv, hq // hkv, d)    # q heads by kv head (GQA), no K/V copy per q head
    s = np.einsum("kgd,lkd->kgl", qg, k.astype(np.float64)) / np.sqrt(d)
    p = np.exp(s - s.max(axis=2, keepdims=True))
    p /= p.sum(axis=2, keepdims=True)
    return np.einsum("kgl,lkd->kgd", p, v.astype(np.float64)).reshape(1, hq, d)


def is_combine(name: str) -> bool:
    return "combine" in name


PASSES = {"chunk": lambda name: not is_combine(name), "combine": is_combine}


class Case:
    """One timed thing of a shape: `call()` (immediate, for the span), `build(graph, i)` (the replay's Program)
    and whether its passes are timed alone."""

    def __init__(self, label: str, call, build, passes: bool):
        self.label, self.call, self.passes = label, call, passes
        self.prog = timing.compile_calls(dev, build, N_CALLS, label.replace(" ", "_"))
        self.rounds: list[dict] = []

    def time_round(self) -> dict:
        r = {}
        r["span_us"], r["split"] = ab_timing.span_us(dev, self.call, N_CALLS, WARM_S)
        replay = timing.replay_time(dev, self.prog, N_CALLS, min_s=WARM_S, warm_s=WARM_S)
        r["replay_us"], r["gpu_bound"] = replay.us_per_call, replay.gpu_bound
        if self.passes:
            alone = timing.kernel_subsets_us(dev, self.call, N_CALLS, PASSES, batches=3)
            r["alone_us"] = None if alone is None else {k: round(v[0], 2) for k, v in alone.items()}
        self.rounds.append(r)
        return r

    def summary(self) -> dict:
        """Medians over the rounds (the split and the passes alone per kernel)."""
        med = {k: statistics.median(r[k] for r in self.rounds) for k in ("span_us", "replay_us")}
        med["split"] = {k: statistics.median(r["split"].get(k, 0.0) for r in self.rounds)
                        for k in self.rounds[0]["split"]}
        if self.rounds[0].get("alone_us"):
            med["alone_us"] = {k: statistics.median(r["alone_us"][k] for r in self.rounds)
                               for k in self.rounds[0]["alone_us"]}
        med["gpu_bound"] = all(r["gpu_bound"] for r in self.rounds)
        med["rounds"] = self.rounds
        return med


def attention_case(label, arrays, tensors, var):
    out = wg.ops.attention(*tensors, causal=True, variant=var)

    def build(g, i):
        if i == 0:
            build.st = timing.states(g, arrays, ("f16",) * 3)
        return wg.ops.attention(*build.st, causal=True, variant=var)

    case = Case(label, lambda: wg.ops.attention(*tensors, causal=True, variant=var, out=out), build, True)
    case.out = out
    return case


def read_case(label, arrays, tensors, groups):
    y = dev.empty((4,), "u32")

    def build(g, i):
        if i == 0:
            build.st = timing.states(g, arrays[1:], ("f16",) * 2)
        return apply(X_READ, ReadParams(groups), tuple(build.st))

    return Case(label, lambda: apply(X_READ, ReadParams(groups), tuple(tensors[1:]), out=y), build, False)


def copy_case(label, nbytes):
    x = dev.tensor(np.full(nbytes // 4, 1.0, np.float32))
    y = dev.empty(x.shape, "f32")

    def build(g, i):
        if i == 0:
            build.st = timing.states(g, (np.full(nbytes // 4, 1.0, np.float32),), ("f32",))
        return apply(BENCH_COPY, CopyParams(), tuple(build.st))

    return Case(label, lambda: apply(BENCH_COPY, CopyParams(), (x,), out=y), build, False)


def run_shape(hq: int, hkv: int, D: int, L: int) -> dict:
    s = Shape("decode", 1, L, hq, hkv, D, "f16")
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-1, 1, (1, hq, D)).astype(np.float16)] + \
             [rng.uniform(-1, 1, (L, hkv, D)).astype(np.float16) for _ in range(2)]
    tensors = [dev.tensor(a) for a in arrays]
    kv_bytes = 2 * L * hkv * D * 2
    row = {"shape": s.label(), "L": L, "Hq": hq, "Hkv": hkv, "D": D, "kv_bytes": kv_bytes}
    print(s.label(), flush=True)
    plan = wg.ops.attention_plan(*tensors, causal=True)
    row["planner_pick"] = plan.variant
    if not dev.caps.is_cpu and plan.variant != PLANNED:
        raise SystemExit(f"the planner picks {plan.variant} for {s.label()}, not {PLANNED}: the ablations are copies "
                         f"of {PLANNED}; update PLANNED")
    forced = wg.ops.attention_plan(*tensors, causal=True, variant=PLANNED)
    row["workgroups"] = forced.workgroups
    cases = {"A planned": attention_case("A planned", arrays, tensors, PLANNED)}
    ref = reference(*arrays)
    diff = float(np.max(np.abs(cases["A planned"].out.numpy().astype(np.float64) - ref)))
    row["A_max_abs_diff_f64"] = diff
    print(f"  planner: {plan.variant} ({'forced ' + PLANNED + ' on a CPU adapter' if dev.caps.is_cpu else 'asserted'})"
          f", {forced.workgroups} workgroups; A against float64: max |diff| {diff:.2e}", flush=True)
    if not diff < 1e-2:
        raise SystemExit(f"{PLANNED} at {s.label()} is {diff:.3g} from the float64 reference (limit 1e-2)")
    for tag, label in (("no_kv", "B no_kv"), ("loads_only", "C loads_only"), ("empty", "D empty"),
                       ("empty_load1", "D1 empty_load1"), ("empty_nomerge", "D2 empty_nomerge"),
                       ("empty_shuffles", "D2a empty_shuffles"), ("empty_rounds", "D2b empty_rounds"),
                       ("launch", "D3 launch")):
        cases[label] = attention_case(label, arrays, tensors, ABLATIONS[tag])
    grid = int(np.prod(forced.workgroups))
    row["read_grid_workgroups"] = grid
    make = {"G read": lambda: read_case("G read", arrays, tensors, 0),
            "G read_grid": lambda: read_case("G read_grid", arrays, tensors, grid),
            "G copy": lambda: copy_case("G copy", kv_bytes)}
    errors = row["errors"] = {}
    for label, new in make.items():
        try:
            cases[label] = new()
        except Exception as e:  # noqa: BLE001 - a reference that cannot run here (a binding limit) is left out
            errors[label] = f"{type(e).__name__}: {str(e)[:300]}"
            print(f"  {label} left out: {errors[label]}", flush=True)
    dev.sync()
    torch_us = []
    for rnd in range(ROUNDS):   # rounds in turns: each round times every case once
        for label, case in list(cases.items()):
            try:
                case.time_round()
            except Exception as e:  # noqa: BLE001 - one failing case must not end the run
                errors[label] = f"{type(e).__name__}: {str(e)[:300]}"
                print(f"  {label} failed: {errors[label]}", flush=True)
                del cases[label]
        if TORCH:
            torch_us.append(torch_ref.run_sdpa(s, *arrays, reps=N_CALLS, want_output=False)["torch_ms"] * 1e3)
    row["cases"] = {label: c.summary() for label, c in cases.items()}
    if TORCH:
        row["torch_us"], row["torch_rounds"] = statistics.median(torch_us), torch_us
    for label, c in row["cases"].items():
        alone = c.get("alone_us")
        print(f"  {label:16} replay {c['replay_us']:8.2f} span {c['span_us']:8.2f} us  split {c['split']}"
              f"{'  alone ' + str(alone) if alone else ''}{'' if c['gpu_bound'] else '  HOST-BOUND'}", flush=True)
    if TORCH:
        print(f"  {'H torch':16} {row['torch_us']:8.2f} us", flush=True)
    return row


def metrics(row: dict) -> dict:
    """{(ablation, metric): µs} of one shape: replay, span and the passes alone (E: the chunk pass, F: the
    combine); torch's time."""
    out = {}
    for label, c in row["cases"].items():
        out[(label, "replay")] = c["replay_us"]
        out[(label, "span")] = c["span_us"]
        for k, v in (c.get("alone_us") or {}).items():
            out[(label, f"{k} alone")] = v
    if "torch_us" in row:
        out[("H torch", "cuda events")] = row["torch_us"]
    return out


def fit(points: list) -> tuple:
    """Least squares time = a + b * keys over (keys, µs) points: (a µs, b ns a key)."""
    keys = np.array([p[0] for p in points], np.float64)
    us = np.array([p[1] for p in points], np.float64)
    b, a = np.polyfit(keys, us, 1)
    return float(a), float(b * 1e3)


def report(rows: list) -> dict:
    """The table: per head dim, each (ablation, metric)'s µs at every length and its line over the lengths >=
    FIT_FROM (all lengths where fewer than two reach it)."""
    fits = {}
    for hq, hkv in HEADS:
        for D in DIMS:
            mine = [r for r in rows if r["D"] == D and r["Hq"] == hq and r["Hkv"] == hkv]
            if not mine:
                continue
            lengths = [r["L"] for r in mine]
            fit_ls = [x for x in lengths if x >= FIT_FROM]
            fit_ls = fit_ls if len(fit_ls) >= 2 else lengths
            per = [metrics(r) for r in mine]
            keys = list(dict.fromkeys(k for p in per for k in p))   # every shape's, in order
            print(f"\n{hq}/{hkv} heads, D={D}, f16: µs a call; line a + b*keys over keys {fit_ls}", flush=True)
            print(f"  {'ablation':16} {'metric':14}" + "".join(f"{x:>10}" for x in lengths) +
                  f"{'a (us)':>10}{'b (ns/key)':>12}{'a - A a':>10}", flush=True)
            ref_a = {}
            shape_fits = {}
            for key in keys:
                pts = [(r["L"], p[key]) for r, p in zip(mine, per) if key in p and r["L"] in fit_ls]
                a, b = fit(pts) if len(pts) >= 2 else (float("nan"), float("nan"))
                shape_fits[f"{key[0]} | {key[1]}"] = {"a_us": a, "b_ns_per_key": b, "keys": [p[0] for p in pts]}
                if key[0] == "A planned":
                    ref_a[key[1]] = a
                base = ref_a.get(key[1], ref_a.get("replay"))
                print(f"  {key[0]:16} {key[1]:14}" + "".join(f"{p.get(key, float('nan')):10.2f}" for p in per) +
                      f"{a:10.2f}{b:12.4f}{a - base:10.2f}", flush=True)
            fits[f"{hq}/{hkv} D={D}"] = shape_fits
    return fits


t_start = time.perf_counter()
for hq, hkv in HEADS:
    for D in DIMS:
        for L in LENGTHS:
            RES["rows"].append(run_shape(hq, hkv, D, L))
            save()
RES["fits"] = report(RES["rows"])
RES["elapsed_s"] = time.perf_counter() - t_start
save()
print(f"\n{RES['note']}.\ndone in {RES['elapsed_s']:.0f} s; wrote {OUT / 'decode_ablation.json'}", flush=True)
