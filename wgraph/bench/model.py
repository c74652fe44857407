"""The model row: greedy decode of a Llama-3.2-1B-shaped model with random f16 weights (no checkpoint file),
as tokens/s, ms/token and effective weight bandwidth (weight bytes read per token / time per token, also as a
fraction of the copy bandwidth the bench measured), beside a hand-written torch decode of the same weights,
eager and as a CUDA graph, where torch with CUDA is present. `--quick` (and lavapipe) use a tiny config."""

from __future__ import annotations

import time

import numpy as np

from wgraph.models import Llama, LlamaConfig

# Llama-3.2-1B's shape (its config.json), random weights
LLAMA_1B = dict(model_type="llama", vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                rms_norm_eps=1e-5, rope_theta=500000.0, max_position_embeddings=131072, tie_word_embeddings=True,
                rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
TINY = dict(LLAMA_1B, vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32)


def random_f16_weights(cfg: LlamaConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """HF-named f16 weights: N(0, 1/fan_in) matrices, norms near 1, embeddings N(0, 1)."""
    from wgraph.models.llama import weight_shapes

    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in weight_shapes(cfg).items():
        if len(shape) == 1:
            out[name] = (1.0 + 0.05 * rng.standard_normal(shape, np.float32)).astype(np.float16)
        else:
            std = 1.0 if "embed" in name else shape[1] ** -0.5
            a = rng.standard_normal(shape, np.float32)
            a *= std
            out[name] = a.astype(np.float16)
    return out


def bench_model(dev, *, quick: bool, copy_gbps: float | None, use_torch: bool, progress, profile: bool = False) -> dict:
    """One row (a dict) for the model section; with `profile`, also the GPU time of one decode step per node,
    by op and by layer (Program.profile)."""
    big = not (quick or dev.caps.is_cpu)
    cfg = LlamaConfig.from_dict(LLAMA_1B if big else TINY)
    dtype = "f16" if dev.caps.has_f16 else "f32"
    steps, max_seq, prompt = (128, 512, [1]) if big else (16, 64, [1])
    row = {"model": "llama-3.2-1b-shaped" if big else "tiny-llama", "dtype": dtype, "layers": cfg.num_hidden_layers,
           "hidden": cfg.hidden_size, "vocab": cfg.vocab_size, "steps": steps, "max_seq": max_seq,
           "status": "ok", "note": "" if dtype == "f16" else "no shader-f16 on this device: f32 weights"}
    progress(f"model: making random weights for {row['model']}")
    weights = random_f16_weights(cfg)
    t0 = time.perf_counter()
    model = Llama.from_weights(cfg, weights, dev, dtype=dtype, max_seq=max_seq)
    row["load_s"] = time.perf_counter() - t0
    # bytes a decode step reads: every matrix once, the norms, and one row of the embedding table
    row["weight_bytes_per_token"] = model.weight_bytes_per_token
    row["dispatches_per_token"] = len(model.program.rows)

    progress(f"model: decoding {steps} tokens")
    model.generate(prompt, steps + 1, in_flight=8)  # warm-up: pipelines, clocks
    model.prefill(prompt)
    dev.sync()
    before = dev.stats.snapshot()
    t0 = time.perf_counter()
    host = model.run_steps(steps, in_flight=8)
    dev.sync()
    dt = (time.perf_counter() - t0) / steps
    d = dev.stats.since(before)
    ids = model.program.state("history").numpy()[len(prompt):len(prompt) + steps + 1].tolist()
    if profile:
        row["profile"] = _profile(model.program, progress)
    # host_ms_per_token near ms_per_token: the host's encoding bounds the rate, not the GPU
    row.update(ms_per_token=dt * 1e3, tokens_per_s=1.0 / dt, host_ms_per_token=host / steps * 1e3,
               submits_per_token=(d.submits - 1) / steps,
               weight_gbps=row["weight_bytes_per_token"] / dt / 1e9, copy_gbps=copy_gbps,
               fraction_of_copy_bandwidth=(row["weight_bytes_per_token"] / dt / 1e9 / copy_gbps) if copy_gbps else None)
    del model
    if use_torch:
        from wgraph.bench.torch_ref import probe

        info = probe()
        row["torch"] = info
        if info.get("available"):
            from wgraph.bench.torch_llama import bench_torch_decode

            progress("model: torch eager and CUDA graph decode")
            try:
                t = bench_torch_decode(cfg, weights, max_seq=max_seq, start_token=prompt[0], start_pos=0, steps=steps)
                for mode, r in t.items():
                    row[f"torch_{mode}_ms_per_token"] = r["ms_per_token"]
                    row[f"torch_{mode}_tokens_per_s"] = 1e3 / r["ms_per_token"]
                    # greedy ids agree until f16 rounding differences tip a near-tie
                    same = next((i for i, (a, b) in enumerate(zip(ids, r["ids"])) if a != b), len(r["ids"]))
                    row[f"torch_{mode}_ids_agree_first"] = same
            except Exception as e:  # noqa: BLE001 - the reference must not take the bench down
                row["torch"] = {**info, "available": False, "note": f"torch decode failed: {type(e).__name__}: {e}"}
    return row


def _profile(program, progress) -> dict:
    """One decode step timed per node on the GPU, as JSON (by op, by layer, the table's text)."""
    from wgraph.errors import UnsupportedError

    progress("model: profiling one decode step")
    try:
        prof = program.profile()
    except UnsupportedError as e:
        return {"status": "unsupported", "note": str(e)}

    def groups(gs):
        return [{"name": g.name, "nodes": g.nodes, "dispatches": g.dispatches, "gpu_us": g.gpu_us} for g in gs]

    return {"status": "ok", "span_us": prof.span_us, "total_us": prof.total_us, "inside_passes": prof.inside_passes,
            "by_op": groups(prof.by_op()), "by_layer": groups(prof.by_layer()), "table": prof.table()}


def copy_gbps(dev, result: dict, quick: bool) -> float | None:
    """The copy-kernel bandwidth (GB/s, bytes read + written) of this run: the gemv section's when it ran,
    else measured now (None where the bench has no copy measurement)."""
    measured = result.get("gemv", {}).get("copy", {}).get("gbps")
    if measured:
        return measured
    try:
        from wgraph.bench import gemv
    except ImportError:
        return None
    return gemv.copy_bandwidth(dev, gemv.COPY_BYTES["quick" if quick else "full"])["gbps"]


def table(row: dict) -> str:
    """The model row as a few aligned lines."""
    if row.get("status") != "ok":
        return f"{row.get('model', 'model')}: {row.get('status')}: {row.get('note')}"
    frac = row.get("fraction_of_copy_bandwidth")
    lines = [
        f"{row['model']} ({row['layers']} layers, hidden {row['hidden']}, vocab {row['vocab']}, {row['dtype']} weights"
        f"{'; ' + row['note'] if row['note'] else ''})",
        f"  wgraph   {row['tokens_per_s']:9.1f} tokens/s  {row['ms_per_token']:8.3f} ms/token  "
        f"{row['weight_gbps']:8.1f} GB/s of weights"
        + (f" = {frac:.1%} of the copy bandwidth ({row['copy_gbps']:.0f} GB/s)" if frac
           else " (no copy bandwidth measured)")
        + f"  [{row['dispatches_per_token']} dispatches, {row['submits_per_token']:.2f} submits and "
          f"{row['host_ms_per_token']:.3f} ms of host encoding per token]",
    ]
    torch_info = row.get("torch") or {}
    for mode in ("eager", "cuda_graph"):
        ms = row.get(f"torch_{mode}_ms_per_token")
        if ms is not None:
            lines.append(f"  torch {mode:<10} {1e3 / ms:9.1f} tokens/s  {ms:8.3f} ms/token  "
                         f"{row['weight_bytes_per_token'] / ms / 1e6:8.1f} GB/s of weights  "
                         f"[greedy ids equal to wgraph's for the first {row[f'torch_{mode}_ids_agree_first']}]")
    if torch_info and not torch_info.get("available"):
        lines.append(f"  torch: {torch_info.get('note')}")
    prof = row.get("profile")
    if prof:
        lines.append(prof["table"] if prof["status"] == "ok" else f"  profile: {prof['note']}")
    return "\n".join(lines)
