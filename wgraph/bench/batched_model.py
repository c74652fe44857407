"""The batched model rows: greedy decode of B sequences at once (wgraph/models/batched.py) with the model bench's
seeded Llama-3.2-1B-shaped f16 weights, at B = 1, 8, 32 from 1-token prompts: aggregate tokens/s (B per step),
ms per step, the GPU time of one step and the host's encoding time, the weight bytes of a step over its time, and
the matmuls' FLOP rate (every weight multiplies B rows) to set beside the FMA peak; beside torch on the same
values at the same B (wgraph/bench/torch_llama_batch.py), eager and as a CUDA graph, where torch with CUDA is
present. `--quick` and CPU adapters run the tiny config at B = 1 and 8."""

from __future__ import annotations

import math

from wgraph.bench.model import LLAMA_1B, TINY, SeededLlama, ran_programs, step_costs, timed_steps, torch_weights
from wgraph.models import LlamaConfig
from wgraph.models.batched import BatchedDecoder

BATCHES = {"full": (1, 8, 32), "tiny": (1, 8)}


def _wgraph_row(dev, model, batch: int, steps: int, progress, profile: bool) -> dict:
    """One batch size: its decoder built on the model's weights, warmed, then `steps` steps timed back to back."""
    progress(f"batched model: B={batch}, {steps} steps")
    dec = BatchedDecoder(model, batch)
    prompts = [[1 + b] for b in range(batch)]
    dec.generate(prompts, min(steps, 16))  # warm-up: pipelines, clocks
    dt, host, submits, ids = timed_steps(dev, dec, prompts, steps)
    # the programs the timed steps ran (the short one at a long cache's first positions) replayed: each replay a
    # step more, positions stay < max_seq
    programs, dispatches, gpu_ms = step_costs(dev, dec, prompts, ran_programs(dec, steps))
    row = {"batch": batch, "status": "ok", "steps": steps, "ms_per_step": dt * 1e3, "tokens_per_s": batch / dt,
           "host_ms_per_step": host / steps * 1e3, "gpu_ms_per_step": gpu_ms, "programs": programs,
           "dispatches_per_step": dispatches, "submits_per_step": submits / steps,
           "weight_gbps": model.weight_bytes_per_token / dt / 1e9,
           "matmul_tflops": 2.0 * batch * matmul_weights(model.config) / dt / 1e12,
           "ids": ids}
    if profile:
        from wgraph.bench.model import _profile

        row["profile"] = _profile(dec.program, progress)
    return row


def _single_ms(dev, model, steps: int) -> float:
    """ms per step of the model's own single-sequence program (Llama.generate's), timed as the rows are: what
    B = 1 is to be set beside."""
    model.generate([1], min(steps, 16))  # warm-up
    return timed_steps(dev, model, [1], steps)[0] * 1e3


def matmul_weights(cfg: LlamaConfig) -> int:
    """Weight elements a decode step multiplies by its B rows: every matrix once, a tied embedding table as the
    lm_head (an untied one gives a token one row: no product). Not weight_bytes_per_token over the matrices'
    itemsize, which also counted the f32 norm weights, as two elements each at f16."""
    from wgraph.models.llama import weight_shapes

    return sum(math.prod(shape) for name, shape in weight_shapes(cfg).items()
               if len(shape) == 2 and (name != "model.embed_tokens.weight" or cfg.tie_word_embeddings))


def bench_batched_models(dev, *, quick: bool, use_torch: bool, progress, profile: bool = False) -> dict:
    """The section: the model, its rows (one per B) and torch's beside them."""
    tiny = quick or dev.caps.is_cpu
    name, config = ("tiny-llama", TINY) if tiny else ("llama-3.2-1b-shaped", LLAMA_1B)
    cfg = LlamaConfig.from_dict(config)
    dtype = "f16" if dev.caps.has_f16 else "f32"
    steps, max_seq = (8, 32) if tiny else (128, 256)
    batches = BATCHES["tiny" if tiny else "full"]
    out = {"model": name, "dtype": dtype, "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
           "vocab": cfg.vocab_size, "steps": steps, "max_seq": max_seq, "prompt": "1 token per sequence (1 + b)",
           "rows": []}
    progress(f"batched model: seeded weights for {name} on the GPU")
    model = SeededLlama(cfg, dev, dtype=dtype, max_seq=max_seq)
    out["weight_bytes_per_token"] = model.weight_bytes_per_token
    out["matmul_weights"] = matmul_weights(cfg)
    out["single_sequence_ms_per_step"] = _single_ms(dev, model, steps)
    for batch in batches:
        try:
            out["rows"].append(_wgraph_row(dev, model, batch, steps, progress, profile))
        except Exception as e:  # noqa: BLE001 - report it and carry on
            out["rows"].append({"batch": batch, "status": "error", "note": f"{type(e).__name__}: {e}"})
    del model
    if use_torch:
        _torch_rows(cfg, out, progress)
    return out


def _torch_rows(cfg, out: dict, progress) -> None:
    """torch beside each ok row: ms per step eager and as a CUDA graph, the ratio (wgraph tokens/s over the CUDA
    graph's), and for how many steps every sequence's ids agree."""
    from wgraph.bench.torch_ref import probe

    info = probe()
    out["torch"] = info
    if not info.get("available"):
        return
    from wgraph.bench.torch_llama_batch import bench_torch_batch_decode

    weights = torch_weights(cfg)
    for row in out["rows"]:
        if row.get("status") != "ok":
            continue
        progress(f"batched model: torch B={row['batch']}, eager and CUDA graph")
        try:
            t = bench_torch_batch_decode(cfg, weights, max_seq=out["max_seq"],
                                         tokens=[1 + b for b in range(row["batch"])], steps=row["steps"])
        except Exception as e:  # noqa: BLE001 - the reference must not take the bench down
            row["torch_note"] = f"torch failed: {type(e).__name__}: {e}"
            continue
        for mode, r in t.items():
            row[f"torch_{mode}_ms_per_step"] = r["ms_per_step"]
            row[f"torch_{mode}_tokens_per_s"] = row["batch"] * 1e3 / r["ms_per_step"]
            # greedy ids agree until f16 rounding differences tip a near-tie
            row[f"torch_{mode}_ids_agree_first"] = min(
                next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), len(theirs))
                for mine, theirs in zip(row["ids"], r["ids"]))
        row["ratio_to_torch_cuda_graph"] = row["tokens_per_s"] / row["torch_cuda_graph_tokens_per_s"]


def table(out: dict) -> str:
    """The section as aligned lines: one per batch size."""
    lines = [f"{out['model']} ({out['layers']} layers, hidden {out['hidden']}, vocab {out['vocab']}, {out['dtype']} "
             f"weights, {out['weight_bytes_per_token'] / 1e9:.2f} GB read per step), {out['steps']} steps from "
             f"1-token prompts, KV capacity {out['max_seq']} per sequence; the single-sequence program (Llama."
             f"generate's): {out['single_sequence_ms_per_step']:.3f} ms per step",
             f"  {'B':>3} {'tokens/s':>10} {'ms/step':>8} {'GPU ms':>8} {'host ms':>8} {'disp':>5} {'GB/s':>7} "
             f"{'TFLOP/s':>8} {'torch graph':>12} {'eager':>9} {'ratio':>6}  ids agree"]
    for r in out["rows"]:
        if r.get("status") != "ok":
            lines.append(f"  {r['batch']:>3} {r.get('status')}: {r.get('note')}")
            continue
        gpu = f"{r['gpu_ms_per_step']:8.3f}" if r["gpu_ms_per_step"] else f"{'-':>8}"
        graph, eager = r.get("torch_cuda_graph_tokens_per_s"), r.get("torch_eager_tokens_per_s")
        ratio = r.get("ratio_to_torch_cuda_graph")
        agree = r.get("torch_cuda_graph_ids_agree_first")
        lines.append(f"  {r['batch']:>3} {r['tokens_per_s']:10.1f} {r['ms_per_step']:8.3f} {gpu} "
                     f"{r['host_ms_per_step']:8.3f} {r['dispatches_per_step']:>5} {r['weight_gbps']:7.1f} "
                     f"{r['matmul_tflops']:8.2f} " + (f"{graph:12.1f} " if graph else f"{'-':>12} ")
                     + (f"{eager:9.1f} " if eager else f"{'-':>9} ") + (f"{ratio:6.2f}" if ratio else f"{'-':>6}")
                     + (f"  first {agree} steps" if agree is not None else "") + (f"  {r['torch_note']}"
                                                                              if r.get("torch_note") else ""))
        prof = r.get("profile")
        if prof:
            lines.append(prof["table"] if prof["status"] == "ok" else f"  profile: {prof['note']}")
    torch_info = out.get("torch") or {}
    if torch_info and not torch_info.get("available"):
        lines.append(f"  torch: {torch_info.get('note')}")
    return "\n".join(lines)
