"""The model rows: greedy decode of Llama-3.2-1B- and Llama-3.1-8B-shaped models with seeded random f16 weights
made on the GPU (wgraph/bench/weights.py: no checkpoint file, no gigabytes through the host), as tokens/s,
ms/token and effective weight bandwidth (weight bytes read per token / time per token, also as a fraction of
the copy bandwidth the bench measured); the host's encoding time per token beside the GPU time of one step
(one replay in a stamped pass); beside a hand-written torch decode of the same weights, eager and as a CUDA
graph, where torch with CUDA is present. `--quick` (and lavapipe) use a tiny config."""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

from wgraph.bench import timing, weights
from wgraph.models import Llama, LlamaConfig

# Llama-3.2-1B's and Llama-3.1-8B's shapes (their config.json), random weights
_LLAMA3_ROPE = {"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}
LLAMA_1B = dict(model_type="llama", vocab_size=128256, hidden_size=2048, intermediate_size=8192,
                num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                rms_norm_eps=1e-5, rope_theta=500000.0, max_position_embeddings=131072, tie_word_embeddings=True,
                rope_scaling={**_LLAMA3_ROPE, "factor": 32.0})
LLAMA_8B = dict(LLAMA_1B, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, head_dim=128,
                tie_word_embeddings=False, rope_scaling={**_LLAMA3_ROPE, "factor": 8.0})
TINY = dict(LLAMA_1B, vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32)
# SmolLM2-135M's shape (the real model of the demo and tests, a Llama): the CPU adapter benchmarks' model
SMOLLM2_135M = dict(model_type="llama", vocab_size=49152, hidden_size=576, intermediate_size=1536,
                    num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, head_dim=64,
                    rms_norm_eps=1e-5, rope_theta=100000.0, max_position_embeddings=2048, tie_word_embeddings=True,
                    hidden_act="silu")
MODELS = {"llama-3.2-1b-shaped": LLAMA_1B, "llama-3.1-8b-shaped": LLAMA_8B}


def _scale(name: str, shape) -> float:
    """Embeddings ~ uniform [-1, 1); matrices std ~ 1 / sqrt(fan_in)."""
    return 1.0 if "embed" in name else weights.scale_for(shape[1])


def norm_values(name: str, n: int) -> np.ndarray:
    """A norm weight: 1 + uniform [-1/16, 1/16) (float32, exact)."""
    return (1.0 + weights.values(weights.seed_of(name), np.arange(n), 1.0 / 16)).astype(np.float32)


def _filled_on_gpu(name: str, shape: tuple) -> np.ndarray:
    """SeededLlama's get_weight: never called, its _load fills every state on the GPU."""
    raise AssertionError(f"SeededLlama reads no host weight ({name})")


class SeededLlama(Llama):
    """A Llama whose weights are the bench's seeded values, filled on the GPU into the program's states (the
    tensors stacked into one state, [gate; up] and the like, each fill its own row range)."""

    def __init__(self, config: LlamaConfig, device, *, dtype: str, max_seq: int):
        super().__init__(config, device, _filled_on_gpu, dtype=dtype, max_seq=max_seq)

    def _load(self, get_weight):
        from wgraph.models.llama import _program_weights, weight_shapes

        shapes = weight_shapes(self.config)
        for name, pw in _program_weights(self.config, self.dtype).items():
            state, shape = self.program.state(name), pw.shape
            if len(shape) == 1:
                self.device.write(state, norm_values(pw.sources[0], shape[0]) + np.float32(pw.offset))
            else:
                first = 0
                for src in pw.sources:
                    count = math.prod(shapes[src])
                    weights.fill(state, weights.seed_of(src), _scale(src, shapes[src]), first=first, count=count)
                    first += count
            self._count_weight_bytes(name, state.nbytes, state.nbytes // shape[0])
        self._write_rope_tables()


def seeded_host_weights(cfg: LlamaConfig) -> dict[str, np.ndarray]:
    """The same seeded values as SeededLlama and torch_weights, HF-named float32 arrays on the host (for what
    needs host data: the quantized rows quantize them)."""
    from wgraph.models.llama import weight_shapes

    out = {}
    for name, shape in weight_shapes(cfg).items():
        if len(shape) == 1:
            out[name] = norm_values(name, shape[0])
        else:
            n = math.prod(shape)
            flat = np.empty(n, np.float32)
            for i in range(0, n, 1 << 26):  # chunks: the hash's temporaries stay small
                flat[i:i + (1 << 26)] = weights.values(weights.seed_of(name), np.arange(i, min(n, i + (1 << 26))),
                                                      _scale(name, shape))
            out[name] = flat.reshape(shape)
    return out


def torch_weights(cfg: LlamaConfig) -> dict:
    """HF-named weights for TorchLlama: each a function (torch dtype) -> a CUDA tensor of the same values."""
    from wgraph.models.llama import weight_shapes

    def make(name, shape):
        def get(dtype):
            import torch

            if len(shape) == 1:
                return torch.from_numpy(norm_values(name, shape[0])).to("cuda", dtype)
            t = torch.empty(shape, dtype=dtype, device="cuda")
            weights.torch_fill(t, weights.seed_of(name), _scale(name, shape))
            return t

        return get

    return {name: make(name, shape) for name, shape in weight_shapes(cfg).items()}


def bench_model(dev, name: str, config: dict, *, copy_gbps: float | None, use_torch: bool, progress,
                profile: bool = False) -> dict:
    """One row (a dict) for the model section; with `profile`, also the GPU time of one decode step per node,
    by op and by layer (Program.profile)."""
    cfg = LlamaConfig.from_dict(config)
    dtype = "f16" if dev.caps.has_f16 else "f32"
    big = config is not TINY
    steps, max_seq, prompt = (128, 512, [1]) if big else (16, 64, [1])
    row = {"model": name, "dtype": dtype, "layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
           "intermediate": cfg.intermediate_size, "heads": f"{cfg.num_attention_heads}/{cfg.num_key_value_heads}",
           "head_dim": cfg.head_dim, "vocab": cfg.vocab_size, "steps": steps, "max_seq": max_seq,
           "status": "ok", "note": "" if dtype == "f16" else "no shader-f16 on this device: f32 weights"}
    progress(f"model: seeded weights for {name} on the GPU")
    t0 = time.perf_counter()
    model = SeededLlama(cfg, dev, dtype=dtype, max_seq=max_seq)
    dev.sync()
    row["load_s"] = time.perf_counter() - t0
    # bytes a decode step reads: every matrix once, the norms, and one row of the embedding table
    row["weight_bytes"] = model.weight_bytes
    row["weight_bytes_per_token"] = model.weight_bytes_per_token

    progress(f"model: decoding {steps} tokens")
    model.generate(prompt, steps + 1, in_flight=8)  # warm-up: pipelines, clocks
    dt, host, submits, ids = timed_steps(dev, model, prompt, steps)
    # the same steps one a submit: what a submit's fixed cost (host and GPU) takes of a token
    dt_1, host_1, submits_1, ids_1 = timed_steps(dev, model, prompt, steps, per_submit=1)
    # the programs the timed steps ran: the short one at the first positions of a long cache, the whole cache's
    ran = ran_programs(model, steps)
    row["one_step_a_submit"] = {"ms_per_token": dt_1 * 1e3, "tokens_per_s": 1.0 / dt_1,
                                "host_ms_per_token": host_1 / steps * 1e3, "submits": submits_1,
                                "same_ids": ids_1 == ids}
    try:  # GPU time of one step, from replays in one stamped pass (each advances the model by a token)
        programs, dispatches, gpu_ms = step_costs(dev, model, prompt, ran)
    except Exception as e:  # noqa: BLE001 - the other columns stand without it
        programs, dispatches, gpu_ms = step_costs(dev, model, prompt, ran, gpu=False)
        row["note"] = f"{row['note']}; GPU time per step not measured: {type(e).__name__}: {e}"
    row.update(programs=programs, dispatches_per_token=dispatches)
    if profile:
        row["profile"] = _profile(model.program, progress)
    # host_ms_per_token near ms_per_token: the host's encoding bounds the rate, not the GPU
    row.update(ms_per_token=dt * 1e3, tokens_per_s=1.0 / dt, host_ms_per_token=host / steps * 1e3,
               gpu_ms_per_token=gpu_ms, submits_per_token=submits / steps,
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
                t = bench_torch_decode(cfg, torch_weights(cfg), max_seq=max_seq, start_token=prompt[0], start_pos=0,
                                       steps=steps)
                for mode, r in t.items():
                    row[f"torch_{mode}_ms_per_token"] = r["ms_per_token"]
                    row[f"torch_{mode}_tokens_per_s"] = 1e3 / r["ms_per_token"]
                    # greedy ids agree until f16 rounding differences tip a near-tie
                    same = next((i for i, (a, b) in enumerate(zip(ids, r["ids"])) if a != b), len(r["ids"]))
                    row[f"torch_{mode}_ids_agree_first"] = same
            except Exception as e:  # noqa: BLE001 - the reference must not take the bench down
                row["torch"] = {**info, "available": False, "note": f"torch decode failed: {type(e).__name__}: {e}"}
    return row


def timed_steps(dev, runner, prompt, steps: int, **run) -> tuple[float, float, int, list]:
    """`steps` decode steps of `runner` (a Llama, or a BatchedDecoder and its list of prompts) after a fresh
    prefill of `prompt`, submitted 8 in flight (`run`: run_steps' other options): wall seconds per step up to a
    GPU wait after the last, host seconds in all, the steps' own submits, and the ids they made (a list; one a
    sequence for a batch)."""
    runner.prefill(prompt)
    dev.sync()
    before = dev.stats.snapshot()
    t0 = time.perf_counter()
    host = runner.run_steps(steps, in_flight=8, **run)
    submits = dev.stats.since(before).submits
    dev.sync()
    dt = (time.perf_counter() - t0) / steps
    history = runner.program.state("history").numpy()
    if history.ndim == 2:   # a batch: a row a sequence, its prompt first
        return dt, host, submits, [row[len(p):len(p) + steps].tolist() for row, p in zip(history, prompt)]
    return dt, host, submits, history[len(prompt):len(prompt) + steps + 1].tolist()


def ran_programs(runner, steps: int) -> list[tuple[str, object, int]]:
    """(name, program, steps) of the programs the last `steps` decode steps of `runner` (a Llama or a
    BatchedDecoder) ran, in order, by the runner's own rule (decode_span.split_steps from the position they
    started at): "short" (the program planned for the first short_rows positions) while the position was below
    short_rows, "whole" (`runner.program`) after. A long cache's first steps run the short program, so a step's
    GPU time and dispatches are these programs', not `program`'s alone."""
    from wgraph.models.decode_span import split_steps

    short, rest = split_steps(runner._position - steps, steps, runner.short_rows)
    return [(name, prog, n) for name, prog, n in (("short", runner._short_program() if short else None, short),
                                                  ("whole", runner.program, rest)) if n]


def step_costs(dev, runner, prompt, ran: list[tuple[str, object, int]], replays: int = 8,
               gpu: bool = True) -> tuple[list[dict], int | float, float | None]:
    """What a step of the timed steps cost, from the programs they ran (`ran`: ran_programs'): per program a dict
    (its name, steps, cache rows, dispatches a step, GPU ms of a step); the dispatches and GPU ms of a step over
    the timed steps (each program's weighted by its steps). A program's GPU ms: the median of `replays` replays
    in a stamped pass at positions it serves (the whole cache's from where the timed steps left the position,
    the short one's from a fresh prefill of `prompt`, within its rows); None without timestamps or `gpu`."""
    rows = []
    for name, prog, n in sorted(ran, key=lambda r: r[0] != "whole"):  # the whole cache's first: no prefill
        ms = None
        if gpu:
            if name == "short":
                runner.prefill(prompt)
            count = replays if name == "whole" else max(1, min(replays, runner.short_rows - runner._position))
            us = [timing.program_us(prog) for _ in range(count)]   # each advances the GPU's position a step
            ms = statistics.median(us) / 1e3 if None not in us else None
        rows.append({"program": name, "steps": n, "cache_rows": runner.short_rows if name == "short"
                     else runner.max_seq, "dispatches": len(prog.rows), "gpu_ms": ms})
    rows.sort(key=lambda r: r["program"] != "short")
    steps = sum(r["steps"] for r in rows)
    dispatches = sum(r["dispatches"] * r["steps"] for r in rows) / steps
    gpu_ms = (sum(r["gpu_ms"] * r["steps"] for r in rows) / steps
              if all(r["gpu_ms"] is not None for r in rows) else None)
    return rows, int(dispatches) if dispatches == int(dispatches) else round(dispatches, 3), gpu_ms


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


def bench_models(dev, *, quick: bool, copy_gbps: float | None, use_torch: bool, progress,
                 profile: bool = False) -> list[dict]:
    """The model section's rows: the 1B and 8B shapes on a GPU, the tiny config with --quick or on a CPU."""
    todo = {"tiny-llama": TINY} if quick or dev.caps.is_cpu else MODELS
    rows = []
    for name, config in todo.items():
        try:
            rows.append(bench_model(dev, name, config, copy_gbps=copy_gbps, use_torch=use_torch, progress=progress,
                                    profile=profile))
        except Exception as e:  # noqa: BLE001 - report it and carry on
            rows.append({"model": name, "status": "error", "note": f"{type(e).__name__}: {e}"})
    return rows


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
    return gemv.copy_bandwidth(dev, gemv.copy_bytes(dev.caps, "quick" if quick else "full"))["gbps"]


def table(row: dict) -> str:
    """A model row as a few aligned lines."""
    if row.get("status") != "ok":
        return f"{row.get('model', 'model')}: {row.get('status')}: {row.get('note')}"
    frac = row.get("fraction_of_copy_bandwidth")
    gpu = row.get("gpu_ms_per_token")
    lines = [
        f"{row['model']} ({row['layers']} layers, hidden {row['hidden']}, intermediate {row['intermediate']}, heads "
        f"{row['heads']} x {row['head_dim']}, vocab {row['vocab']}, {row['dtype']} weights, "
        f"{row['weight_bytes_per_token'] / 1e9:.2f} GB read per token{'; ' + row['note'] if row['note'] else ''})",
        f"  wgraph   {row['tokens_per_s']:9.1f} tokens/s  {row['ms_per_token']:8.3f} ms/token  "
        f"{row['weight_gbps']:8.1f} GB/s of weights"
        + (f" = {frac:.1%} of the copy bandwidth ({row['copy_gbps']:.0f} GB/s)" if frac
           else " (no copy bandwidth measured)"),
        f"           {row['dispatches_per_token']} dispatches, {row['submits_per_token']:.2f} submits per token; host "
        f"encoding {row['host_ms_per_token']:.3f} ms per token, GPU "
        + (f"{gpu:.3f} ms per step (stamped replays of the programs the steps ran)" if gpu
           else "time not measured (no timestamps)"),
    ]
    if len(row.get("programs", ())) > 1:   # a long cache's first steps ran the short program
        lines.append("           steps by program: " + "; ".join(
            f"{p['program']} ({p['cache_rows']} cache rows) {p['steps']} steps, {p['dispatches']} dispatches"
            + (f", GPU {p['gpu_ms']:.3f} ms" if p.get("gpu_ms") else "") for p in row["programs"]))
    one = row.get("one_step_a_submit")
    if one:
        lines.append(f"  a step a submit {one['tokens_per_s']:9.1f} tokens/s  {one['ms_per_token']:8.3f} ms/token, host "
                     f"{one['host_ms_per_token']:.3f} ms per token ({one['submits']} submits; greedy ids "
                     f"{'the same' if one['same_ids'] else 'DIFFERENT'})")
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
