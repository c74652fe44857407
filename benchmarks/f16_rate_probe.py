"""Does this stack's f16 arithmetic run packed (two f16 FMAs an instruction, as NVIDIA's HFMA2), and in which WGSL
spelling? The bench's FMA peak (`--only fma`, fma_peak.wgsl) writes `a = fma(a, m, c)`; on an H100 its vec2<f16>
and vec4<f16> rows read 66 TFLOP/s counting every lane, the same as scalar f32 (63) and scalar f16 (66): one lane
an instruction, though the chip's f16 rate is twice its f32 rate. Here the same independent chains in several
spellings, raw wgpu (nothing of wgraph in the way), TFLOP/s = 2 flops x lanes x FMAs over the wall time of one
long dispatch (median of 5): `fma()` and `a * m + c` (which the driver may fuse), and the int8 dot4I8Packed the
quantized GEMVs' int8 x uses (TOP/s, 4 multiply-adds a call).
Usage: python benchmarks/f16_rate_probe.py [--small]  (on a GPU; --small: a quick run on a CPU adapter)."""
import argparse
import statistics
import time

import wgpu

FORMS = {
    # name: (type, lanes a step counts, the step's WGSL, the chain's total as f32)
    "f32_fma": ("f32", 1, "a$C = fma(a$C, m, c);", "a$C"),
    "f32_muladd": ("f32", 1, "a$C = a$C * m + c;", "a$C"),
    "f16_fma": ("f16", 1, "a$C = fma(a$C, m, c);", "f32(a$C)"),
    "f16_muladd": ("f16", 1, "a$C = a$C * m + c;", "f32(a$C)"),
    "vec2f16_fma": ("vec2<f16>", 2, "a$C = fma(a$C, m, c);", "f32(a$C.x + a$C.y)"),
    "vec2f16_muladd": ("vec2<f16>", 2, "a$C = a$C * m + c;", "f32(a$C.x + a$C.y)"),
    "vec4f16_muladd": ("vec4<f16>", 4, "a$C = a$C * m + c;", "f32(a$C.x + a$C.y + a$C.z + a$C.w)"),
    # the integer dot of the quantized GEMVs' int8 x (dot4I8Packed: 4 multiply-adds an instruction, NVIDIA's IDP4A)
    "dot4i8": ("u32", 4, "a$C = bitcast<u32>(dot4I8Packed(a$C, m)) + c;", "f32(a$C)"),
}
CHAINS, UNROLL = 8, 32
SRC = """enable f16;
@group(0) @binding(0) var<storage, read> seed: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
struct P { iterations: u32 }
@group(0) @binding(2) var<uniform> params: P;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let m = T(E(seed[1]));
  let c = T(E(seed[2]));
INIT
  for (var it = 0u; it < params.iterations; it++) {
BODY
  }
  out[g.x] = TOTAL;
}"""


def source(form: str) -> str:
    t, _, step, total = FORMS[form]
    elem = {"f32": "f32", "u32": "u32"}.get(t, "f16")
    init = "\n".join(f"  var a{c} = T(E(seed[0] + f32(g.x % 64u) * 1e-3 + f32({c}) * 1e-3));" for c in range(CHAINS))
    body = "\n".join("    " + step.replace("$C", str(c)) for _ in range(UNROLL) for c in range(CHAINS))
    tot = " + ".join(total.replace("$C", str(c)) for c in range(CHAINS))
    return (SRC.replace("INIT", init).replace("BODY", body).replace("TOTAL", tot)
            .replace("T(", f"{t}(").replace("E(", f"{elem}("))


def run(dev, form: str, workgroups: int, iterations: int) -> float:
    U = wgpu.BufferUsage
    seed = dev.create_buffer_with_data(data=memoryview(bytearray(
        __import__("struct").pack("4f", 0.5, 0.9, 0.1, 0.0))), usage=U.STORAGE)
    out = dev.create_buffer(size=workgroups * 256 * 4, usage=U.STORAGE | U.COPY_SRC)
    par = dev.create_buffer_with_data(data=memoryview(bytearray(iterations.to_bytes(4, "little"))), usage=U.UNIFORM)
    sm = dev.create_shader_module(code=source(form))
    pl = dev.create_compute_pipeline(layout="auto", compute={"module": sm, "entry_point": "main"})
    bg = dev.create_bind_group(layout=pl.get_bind_group_layout(0), entries=[
        {"binding": 0, "resource": {"buffer": seed, "offset": 0, "size": 16}},
        {"binding": 1, "resource": {"buffer": out, "offset": 0, "size": workgroups * 1024}},
        {"binding": 2, "resource": {"buffer": par, "offset": 0, "size": 4}}])
    times = []
    for _ in range(6):
        enc = dev.create_command_encoder()
        p = enc.begin_compute_pass()
        p.set_pipeline(pl)
        p.set_bind_group(0, bg)
        p.dispatch_workgroups(workgroups)
        p.end()
        t = time.perf_counter()
        dev.queue.submit([enc.finish()])
        dev.queue.read_buffer(out, 0, 16)
        times.append(time.perf_counter() - t)
    dt = statistics.median(times[1:])
    lanes = FORMS[form][1]
    return 2.0 * lanes * workgroups * 256 * iterations * UNROLL * CHAINS / dt / 1e12


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true")
    a = ap.parse_args()
    ad = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    dev = ad.request_device_sync(required_features=["shader-f16"])
    print(ad.summary)
    wgs, its = (4, 16) if a.small else (16384, 400)
    for form in FORMS:
        print(f"{form:16s} {run(dev, form, wgs, its):8.2f} TFLOP/s")
