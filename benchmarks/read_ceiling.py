"""What one pass that only READS B bytes reaches on this stack, beside the bench's copy kernel moving the same
bytes: the honest ceiling of a GEMV, which reads its weights and writes almost nothing.

The bench's same-bytes ceiling (wgraph/bench/gemv.py copy_ceiling) copies B/2 bytes into ONE output buffer each
call; below the last-level cache's size that buffer's lines can stay in the cache, so half the traffic never
reaches memory and the "ceiling" of a 32 MB row is too high. Here, per size, one call = one dispatch over
buffers that cycle (totalling >= CACHE_BYTES, so no call finds its bytes cached), calls chained in one pass:
- copy_fixed_y: the bench's copy (B/2 read, B/2 written to one y);
- copy_cycled_y: the same with y cycling too;
- read_l{L}: B bytes read, L 16-byte loads per thread all issued before any is used (grid = B / (16 L) threads),
  summed and written only where the sum equals a value it never takes (so the loads stay and nothing is stored);
- read_gs{W}: a grid-stride read over W workgroups a streaming multiprocessor's worth (4 loads in flight a step);
- read_l1_x{K}: read_l1 plus, per 16-byte word (8 f16 weights of a row of K), the two 16-byte words of an f32
  x of K that a one-row GEMV multiplies them by (x stays in the cache): what a GEMV's x loads add to its reads.
Raw wgpu (nothing of wgraph in the way); GPU time per call from timestamp queries around the pass when the
device has them (else wall time over the submit), median of RUNS passes of CALLS calls.
Usage: python benchmarks/read_ceiling.py [--json PATH] [--small]."""
import argparse
import json
import statistics
import time

import wgpu

CACHE_BYTES = 192 << 20
SIZES_MB = [4, 8, 16, 32, 64, 128, 512]
READ_LOADS = [1, 2, 4, 8, 16]
GS_WAVES = [4, 8, 16]
SMS = 132  # H100 SXM / H200: the grid-stride kernels' workgroup counts are multiples of it

COPY = """
@group(0) @binding(0) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<u32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>) {
  let stride = ng.x * 256u;
  for (var i = gid.x; i < arrayLength(&x); i = i + stride) { y[i] = x[i]; }
}"""

READ = """
@group(0) @binding(0) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<u32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) ng: vec3<u32>) {
  let threads = ng.x * 256u;
  let n = arrayLength(&x);
  var s = vec4<u32>(0u);
  for (var base = gid.x; base < n; base = base + threads * LOADSu) {
    var w: array<vec4<u32>, LOADS>;
    for (var j = 0u; j < LOADSu; j = j + 1u) { w[j] = x[min(base + j * threads, n - 1u)]; }
    for (var j = 0u; j < LOADSu; j = j + 1u) { s = s + w[j]; }
  }
  if (all(s == vec4<u32>(0xdeadbeefu))) { y[gid.x % arrayLength(&y)] = s; }
}"""


READ_X = """
@group(0) @binding(0) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> v: array<vec4<u32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let n = arrayLength(&x);
  let words = arrayLength(&v) / 2u;  // 16-byte f16 words per row of W
  if (gid.x < n) {
    let c = gid.x % words;
    let s = x[gid.x] + v[2u * c] + v[2u * c + 1u];
    if (all(s == vec4<u32>(0xdeadbeefu))) { y[gid.x % arrayLength(&y)] = s; }
  }
}"""
XS = [2048, 8192]


def pipeline(dev, src):
    sm = dev.create_shader_module(code=src)
    return dev.create_compute_pipeline(layout="auto", compute={"module": sm, "entry_point": "main"})


def bind(dev, pl, x, y, v=None):
    return dev.create_bind_group(layout=pl.get_bind_group_layout(0), entries=[
        {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
        for i, b in enumerate((x, y) if v is None else (x, y, v))])


class Timer:
    def __init__(self, dev, stamps: bool):
        self.dev, self.stamps = dev, stamps
        if stamps:
            U = wgpu.BufferUsage
            self.qs = dev.create_query_set(type="timestamp", count=2)
            self.resolve = dev.create_buffer(size=16, usage=U.QUERY_RESOLVE | U.COPY_SRC)
        else:
            self.sync = dev.create_buffer(size=16, usage=wgpu.BufferUsage.COPY_SRC)

    def pass_us(self, pl, groups_and_bgs, calls: int) -> float:
        enc = self.dev.create_command_encoder()
        kw = {"timestamp_writes": {"query_set": self.qs, "beginning_of_pass_write_index": 0,
                                   "end_of_pass_write_index": 1}} if self.stamps else {}
        p = enc.begin_compute_pass(**kw)
        p.set_pipeline(pl)
        for i in range(calls):
            groups, bg = groups_and_bgs[i % len(groups_and_bgs)]
            p.set_bind_group(0, bg)
            p.dispatch_workgroups(groups)
        p.end()
        if self.stamps:
            enc.resolve_query_set(self.qs, 0, 2, self.resolve, 0)
        t = time.perf_counter()
        self.dev.queue.submit([enc.finish()])
        if self.stamps:
            raw = self.dev.queue.read_buffer(self.resolve, 0, 16).cast("Q")
            return (raw[1] - raw[0]) / 1e3 / calls
        self.dev.queue.read_buffer(self.sync, 0, 16)  # returns once the submit before it has finished
        return (time.perf_counter() - t) * 1e6 / calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--small", action="store_true", help="lavapipe-sized: 1-4 MB, few calls")
    args = ap.parse_args()
    sizes = [1, 2, 4] if args.small else SIZES_MB
    cache = 8 << 20 if args.small else CACHE_BYTES
    runs, target_us = (3, 2000.0) if args.small else (7, 3000.0)
    ad = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    stamps = "timestamp-query" in ad.features
    limits = {"max_storage_buffer_binding_size": ad.limits["max-storage-buffer-binding-size"],
              "max_buffer_size": ad.limits["max-buffer-size"]}
    dev = ad.request_device_sync(required_features=["timestamp-query"] if stamps else [], required_limits=limits)
    print(ad.summary, "| timestamps" if stamps else "| wall time")
    timer = Timer(dev, stamps)
    U = wgpu.BufferUsage
    pls = {"copy": pipeline(dev, COPY)}
    for L in READ_LOADS:
        pls[f"read_l{L}"] = pipeline(dev, READ.replace("LOADSu", f"{L}u").replace("LOADS", str(L)))
    pls["read_gs"] = pipeline(dev, READ.replace("LOADSu", "4u").replace("LOADS", "4"))
    pls["read_x"] = pipeline(dev, READ_X)
    vecs = {k: dev.create_buffer(size=4 * k, usage=U.STORAGE) for k in XS}
    rows = []
    for mb in sizes:
        nbytes = mb << 20
        copies = max(1, -(-cache // nbytes))
        xs = [dev.create_buffer(size=nbytes, usage=U.STORAGE | U.COPY_DST) for _ in range(copies)]
        for i, x in enumerate(xs):  # nonzero, distinct contents
            dev.queue.write_buffer(x, 0, bytes([(i * 7 + 1) % 251]) * nbytes)
        half_copies = max(1, -(-cache // (nbytes // 2)))
        halves = [dev.create_buffer(size=nbytes // 2, usage=U.STORAGE | U.COPY_DST) for _ in range(half_copies)]
        ys = [dev.create_buffer(size=nbytes // 2, usage=U.STORAGE) for _ in range(half_copies)]
        tiny = dev.create_buffer(size=256, usage=U.STORAGE)
        words = nbytes // 16
        kinds = {
            "copy_fixed_y": ("copy", [(min(-(-words // 2 // 256), 65535), bind(dev, pls["copy"], h, ys[0]))
                                      for h in halves]),
            "copy_cycled_y": ("copy", [(min(-(-words // 2 // 256), 65535), bind(dev, pls["copy"], h, y))
                                       for h, y in zip(halves, ys)]),
        }
        for L in READ_LOADS:
            groups = -(-words // (256 * L))
            if groups <= 65535:
                kinds[f"read_l{L}"] = (f"read_l{L}", [(groups, bind(dev, pls[f"read_l{L}"], x, tiny)) for x in xs])
        if -(-words // 256) <= 65535:
            for k in XS:
                kinds[f"read_l1_x{k}"] = ("read_x", [(-(-words // 256), bind(dev, pls["read_x"], x, tiny, vecs[k]))
                                                     for x in xs])
        for waves in GS_WAVES:
            kinds[f"read_gs{waves}"] = ("read_gs", [(SMS * waves, bind(dev, pls["read_gs"], x, tiny)) for x in xs])
        for name, (pl, gb) in kinds.items():
            timer.pass_us(pls[pl], gb, 4)  # warm (pipelines, clocks)
            first = timer.pass_us(pls[pl], gb, 8)
            calls = max(8, min(400, int(target_us / max(first, 0.5))))
            us = statistics.median(timer.pass_us(pls[pl], gb, calls) for _ in range(runs))
            moved = nbytes
            rows.append({"mb": mb, "kernel": name, "us": us, "gbps": moved / us / 1e3, "calls": calls})
            print(f"{mb:5d} MB {name:14s} {us:9.2f} us {moved / us / 1e3:8.1f} GB/s", flush=True)
        for b in xs + halves + ys:
            b.destroy()
    big = max(r["gbps"] for r in rows if r["kernel"] == "copy_cycled_y" and r["mb"] == sizes[-1])
    print(f"\nfraction of the {sizes[-1]} MB cycled copy's {big:.0f} GB/s (best read kernel / copies):")
    for mb in sizes:
        at = {r["kernel"]: r for r in rows if r["mb"] == mb}
        best = max((r for k, r in at.items() if k.startswith("read") and "_x" not in k), key=lambda r: r["gbps"])
        print(f"{mb:5d} MB read {best['gbps'] / big:.3f} ({best['kernel']}, {best['us']:.2f} us)  "
              f"copy fixed y {at['copy_fixed_y']['gbps'] / big:.3f}  cycled y {at['copy_cycled_y']['gbps'] / big:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"adapter": ad.summary, "stamps": stamps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
