"""Which kernel torch's SDPA runs for the bench's f32 and f16 prefill rows, and what each of its backends takes:
the reference the f32 prefill target (issue 25: >= 0.6x torch's f32 SDPA) is measured against.

For each shape (16/16 and 32/8 heads, D = 128, causal, S = 2048 / 4096): torch's default choice, then each backend
alone (flash, mem-efficient, math; a backend that refuses the call is reported as such), CUDA events over ITERS
calls after a warm-up (the bench's torch timer, `wgraph.bench.torch_ref.cuda_time_ms`), TFLOP/s as the bench counts
them (`wgraph.bench.grids.flops`: the causal half); and the CUDA kernels of the default call from torch.profiler,
which name the instruction class (`fmha_cutlassF_f32_..._sm80`: xformers' kernel, whose f32 GEMMs run on tensor
cores as 3xTF32 on SM80 and later, `cutlass::arch::OpMultiplyAddFastF32`; a `gemm` of the math backend: cuBLAS).
Needs torch with CUDA (the GPU machine). Usage: python benchmarks/torch_sdpa_backends.py [--json PATH]."""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel  # torch >= 2.3

from wgraph.bench.grids import Shape, flops
from wgraph.bench.torch_ref import cuda_time_ms

SHAPES = [(16, 16, 128, 2048), (16, 16, 128, 4096), (32, 8, 128, 4096)]
ITERS = 20
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "mem_efficient": SDPBackend.EFFICIENT_ATTENTION,
            "math": SDPBackend.MATH}


def kernels(fn) -> list[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # the math backend's matmuls on the FP32 ALUs, as the bench's GEMMs
    rows = []
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    for name_dt, dtype in (("f32", torch.float32), ("f16", torch.float16)):
        for hq, hkv, d, s in SHAPES:
            q = torch.randn(1, hq, s, d, device="cuda", dtype=dtype)
            k = torch.randn(1, hkv, s, d, device="cuda", dtype=dtype).repeat_interleave(hq // hkv, dim=1)
            v = torch.randn_like(k)
            work = flops(Shape("prefill", s, s, hq, hkv, d, name_dt))

            def call():
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

            row = {"dtype": str(dtype).split(".")[-1], "heads": f"{hq}/{hkv}", "d": d, "s": s,
                   "default_kernels": kernels(call)}
            for name, backend in {"default": None, **BACKENDS}.items():
                try:
                    if backend is None:
                        ms = cuda_time_ms(call, ITERS)
                    else:
                        with sdpa_kernel(backend):
                            ms = cuda_time_ms(call, ITERS)
                    row[name] = {"ms": round(ms, 4), "tflops": round(work / ms / 1e9, 2)}
                except RuntimeError as e:
                    row[name] = {"refused": str(e).splitlines()[0][:120]}
            rows.append(row)
            cells = "  ".join(f"{n} " + (f"{row[n]['ms']:.3f} ms {row[n]['tflops']:.1f} TFLOP/s" if "ms" in row[n]
                                           else "refused") for n in ("default", *BACKENDS))
            print(f"{row['dtype']} {row['heads']} D={d} S={s}: {cells}")
            print(f"  default kernels: {'; '.join(k[:90] for k in row['default_kernels'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
