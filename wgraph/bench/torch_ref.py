"""torch.nn.functional.scaled_dot_product_attention on CUDA for the same shapes, timed with CUDA events.
torch is optional: imported only here, only when present."""

from __future__ import annotations

import itertools
import statistics


def probe() -> dict:
    """{"available": bool, "note": why not, and torch/cuda facts when it is}."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no reference
        return {"available": False, "note": f"torch not importable ({type(e).__name__})"}
    info = {"torch_version": torch.__version__}
    if not torch.cuda.is_available():
        return {**info, "available": False, "note": "torch has no CUDA device; the reference runs on CUDA only"}
    info.update(available=True, note="", cuda_device=torch.cuda.get_device_name(0), cuda_version=torch.version.cuda,
                allow_tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32))
    return info


def _to_torch(a, dtype: str, kind: str):
    import torch

    t = torch.float16 if dtype == "f16" or (dtype == "f16kv" and kind == "kv") else torch.float32
    # [S, H, D] -> [1, H, S, D], contiguous, on the GPU
    return torch.from_numpy(a).to("cuda").to(t).permute(1, 0, 2).unsqueeze(0).contiguous()


def run_sdpa(shape, q_np, k_np, v_np, reps: int, want_output: bool = True) -> dict:
    """Median ms per call over 3 loops of `reps` calls, CUDA events; plus the output as [S, Hq, D] float32."""
    import torch.nn.functional as F

    q = _to_torch(q_np, shape.dtype, "q")
    k = _to_torch(k_np, shape.dtype, "kv")
    v = _to_torch(v_np, shape.dtype, "kv")
    if shape.dtype == "f16kv":  # torch wants one dtype: the reference computes in f32
        k, v = k.float(), v.float()
    notes = []
    kwargs = {}
    if shape.Hq != shape.Hkv:
        try:
            F.scaled_dot_product_attention(q[:, :, :1], k[:, :, :1], v[:, :, :1], enable_gqa=True)
            kwargs["enable_gqa"] = True
        except TypeError:
            k = k.repeat_interleave(shape.Hq // shape.Hkv, dim=1)
            v = v.repeat_interleave(shape.Hq // shape.Hkv, dim=1)
            notes.append("kv heads repeated before timing (torch without enable_gqa)")
    # wgraph's causal mask is bottom-right aligned; torch's is_causal is top-left: equal only when S == L.
    if shape.causal and shape.S == shape.L:
        kwargs["is_causal"] = True
    elif shape.causal and shape.S > 1:
        from torch.nn.attention.bias import causal_lower_right

        kwargs["attn_mask"] = causal_lower_right(shape.S, shape.L)
    # S == 1 with bottom-right causal masks nothing: plain attention

    def call():
        return F.scaled_dot_product_attention(q, k, v, **kwargs)

    out = call()
    result = {"torch_ms": cuda_time_ms(call, reps), "torch_reps": reps, "torch_note": "; ".join(notes)}
    if shape.S == 1:
        # a decode call's eager time is mostly torch's launch cost below ~65536 keys (h200-decode-ablation.log:
        # 34.5 -> 41.4 us from 4096 to 32768 keys at 32/8 D=128); the same call replayed from a CUDA graph is its
        # GPU time, the reference wgraph's replayed Program compares with
        try:
            result["torch_graph_ms"] = cuda_time_ms(graph_replay(call), reps)
        except Exception as e:  # noqa: BLE001 - the eager reference stands without it
            notes.append(f"no CUDA graph time ({type(e).__name__}: {e})")
            result["torch_note"] = "; ".join(notes)
    if want_output:
        result["output"] = out[0].permute(1, 0, 2).float().cpu().numpy()
    del q, k, v, out
    return result


def graph_replay(call, before_capture=None):
    """`call` captured once in a CUDA graph (after two warm calls on a side stream, as torch's docs do); returns
    the graph's replay, which launches the captured kernels without the host work of the call.
    `before_capture()`, if given, runs between the warm calls and the capture (a decode step resets its position:
    what the host work of the captured call reads is frozen into the graph)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    if before_capture is not None:
        before_capture()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return graph.replay


def cuda_time_ms(call, reps: int) -> float:
    """Milliseconds per call of a CUDA torch callable: one warm call, then the median of 3 loops of `reps`
    calls timed by CUDA events (how every torch row of the bench is timed)."""
    import torch

    call()
    torch.cuda.synchronize()
    times = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return statistics.median(times)


def cycled_linear_us(x, weights: list, reps: int) -> float:
    """Microseconds per torch.nn.functional.linear(x, w) with `reps` calls cycling over the CUDA tensors
    `weights` (enough copies that no call finds its weight in L2): each weight once untimed, then the median of 3
    loops timed by CUDA events."""
    import torch.nn.functional as F

    for w in weights:
        F.linear(x, w)
    cycle = itertools.cycle(weights)
    return cuda_time_ms(lambda: F.linear(x, next(cycle)), reps) * 1e3
