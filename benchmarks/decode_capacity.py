"""Decode over the first positions of a long KV cache: the Llama-3.2-1B-shaped model (the bench's seeded f16
weights) with `Llama`'s default cache of 2048 positions, 128 greedy steps after a 1-token prompt, with its short
decode program (wgraph/models/decode_span.py: the first `short_rows` positions on a program planned for that
many keys) and with it off (`short_rows = None`: every step on the whole cache's program), in interleaved rounds
of one run; beside the same weights with a 512-position cache (the bench's model row). Run from the project root
on a GPU: python benchmarks/decode_capacity.py. Env: ROUNDS (default 3), OUT (default .): writes
$OUT/decode_capacity.json; QUICK=1: the bench's tiny model, 8 steps, f32 without shader-f16 (a smoke run)."""
import json
import os
import statistics
import sys
from pathlib import Path

import wgraph as wg
from wgraph.bench.model import LLAMA_1B, TINY, SeededLlama, _timed_steps
from wgraph.bench.report import machine_meta
from wgraph.models import LlamaConfig

ROUNDS = int(os.environ.get("ROUNDS", "3"))
OUT = Path(os.environ.get("OUT", "."))
QUICK = os.environ.get("QUICK") == "1"
STEPS, PROMPT = (8 if QUICK else 128), [1]

dev = wg.default_device()
if not dev.caps.has_f16 and not QUICK:
    sys.exit(f"{dev.caps.adapter_name} has no shader-f16: this compares the f16 model")
DTYPE = "f16" if dev.caps.has_f16 else "f32"
cfg = LlamaConfig.from_dict(TINY if QUICK else LLAMA_1B)
long = SeededLlama(cfg, dev, dtype=DTYPE, max_seq=2048)
short_rows = long.short_rows
print(f"{dev.caps.adapter_name}: 2048-position cache, short program over {short_rows} rows", flush=True)
configs = {"2048 positions, short program": (long, short_rows), "2048 positions, whole cache only": (long, None)}
for label, (model, rows) in configs.items():
    model.short_rows = rows
    model.generate(PROMPT, STEPS + 1, in_flight=8)  # warm-up: pipelines (the short program compiles), clocks
times: dict = {label: [] for label in configs}
ids: dict = {}
for r in range(ROUNDS):
    for label, (model, rows) in configs.items():
        model.short_rows = rows
        dt, host, _, got = _timed_steps(dev, model, PROMPT, STEPS)
        times[label].append(dt * 1e3)
        ids[label] = got
        print(f"round {r}: {label:34} {dt * 1e3:.4f} ms/token (host {host / STEPS * 1e3:.3f})", flush=True)
long.short_rows = short_rows
del long
short = SeededLlama(cfg, dev, dtype=DTYPE, max_seq=512)
short.generate(PROMPT, STEPS + 1, in_flight=8)
times["512 positions"] = []
for r in range(ROUNDS):
    dt, host, _, ids["512 positions"] = _timed_steps(dev, short, PROMPT, STEPS)
    times["512 positions"].append(dt * 1e3)
    print(f"round {r}: {'512 positions':34} {dt * 1e3:.4f} ms/token", flush=True)

base = statistics.median(times["2048 positions, whole cache only"])
print(f"\n== {'tiny' if QUICK else '1B'} {DTYPE} decode, {STEPS} steps from a 1-token prompt: median ms/token of {ROUNDS} rounds ==")
for label, ts in times.items():
    m = statistics.median(ts)
    same = ids[label] == ids["2048 positions, whole cache only"]
    print(f"{label:34} {m:8.4f} ms/token {1e3 / m:8.1f} tokens/s  {base / m:5.3f}x the whole-cache program  "
          f"ids {'equal' if same else 'DIFFER'}")
OUT.mkdir(parents=True, exist_ok=True)
(OUT / "decode_capacity.json").write_text(json.dumps(
    {"meta": machine_meta(dev, ["benchmarks/decode_capacity.py"]), "steps": STEPS, "rounds": ROUNDS,
     "short_rows": short_rows, "ms_per_token": times, "ids": ids}, indent=1))
