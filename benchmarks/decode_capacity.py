"""Decode over the first positions of a long KV cache: the Llama-3.2-1B-shaped model (the bench's seeded f16
weights) with `Llama`'s default cache of 2048 positions, 128 greedy steps after a 1-token prompt, with its short
decode program (wgraph/models/decode_span.py: the first `short_rows` positions on a program planned for that
many keys) and with it off (`short_rows = None`: every step on the whole cache's program), in interleaved rounds
of one run; beside the same weights with a 512-position cache (the bench's model row). Run from the project root
on a GPU: python benchmarks/decode_capacity.py. Then the same for a BatchedDecoder of B sequences (1-token
prompts 1 + b) over the model's 2048-position caches: its short program (the caches read as pages of every
sequence's first rows) against its whole-cache program. Env: ROUNDS (default 3), BATCH (default 8; a comma list,
0: none), OUT (default .): writes $OUT/decode_capacity.json; QUICK=1: the bench's tiny model, 8 steps, f32
without shader-f16 (a smoke run)."""
import json
import os
import statistics
import sys
from pathlib import Path

import wgraph as wg
from wgraph.bench.model import LLAMA_1B, TINY, SeededLlama, timed_steps
from wgraph.bench.report import machine_meta
from wgraph.models import BatchedDecoder, LlamaConfig

ROUNDS = int(os.environ.get("ROUNDS", "3"))
OUT = Path(os.environ.get("OUT", "."))
QUICK = os.environ.get("QUICK") == "1"
STEPS, PROMPT = (8 if QUICK else 128), [1]
BATCHES = [b for b in (int(x) for x in os.environ.get("BATCH", "8").split(",")) if b]

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
        dt, host, _, got = timed_steps(dev, model, PROMPT, STEPS)
        times[label].append(dt * 1e3)
        ids[label] = got
        print(f"round {r}: {label:34} {dt * 1e3:.4f} ms/token (host {host / STEPS * 1e3:.3f})", flush=True)
long.short_rows = short_rows


batched = {}
for B in BATCHES:
    dec = BatchedDecoder(long, B)
    rows = dec.short_rows
    print(f"B={B}: short program over {rows} rows in pages of {dec.short_page}", flush=True)
    prompts = [[1 + b] for b in range(B)]
    labels = {f"B={B} 2048 positions, short program": rows, f"B={B} 2048 positions, whole cache only": None}
    for label, r in labels.items():
        dec.short_rows = r
        dec.generate(prompts, STEPS)   # warm-up: pipelines (the short program compiles), clocks
    for r_i in range(ROUNDS):
        for label, r in labels.items():
            dec.short_rows = r
            dt, _, _, got = timed_steps(dev, dec, prompts, STEPS)
            times.setdefault(label, []).append(dt * 1e3)
            ids[label] = got
            print(f"round {r_i}: {label:40} {dt * 1e3:.4f} ms/step ({B / dt:.1f} tokens/s)", flush=True)
    batched[B] = labels
    del dec
del long
short = SeededLlama(cfg, dev, dtype=DTYPE, max_seq=512)
short.generate(PROMPT, STEPS + 1, in_flight=8)
times["512 positions"] = []
for r in range(ROUNDS):
    dt, host, _, ids["512 positions"] = timed_steps(dev, short, PROMPT, STEPS)
    times["512 positions"].append(dt * 1e3)
    print(f"round {r}: {'512 positions':34} {dt * 1e3:.4f} ms/token", flush=True)

base = statistics.median(times["2048 positions, whole cache only"])
print(f"\n== {'tiny' if QUICK else '1B'} {DTYPE} decode, {STEPS} steps from a 1-token prompt: median ms/token of {ROUNDS} rounds ==")
for label, ts in times.items():
    if label.startswith("B="):
        continue
    m = statistics.median(ts)
    same = ids[label] == ids["2048 positions, whole cache only"]
    print(f"{label:34} {m:8.4f} ms/token {1e3 / m:8.1f} tokens/s  {base / m:5.3f}x the whole-cache program  "
          f"ids {'equal' if same else 'DIFFER'}")
for B, labels in batched.items():
    whole = f"B={B} 2048 positions, whole cache only"
    base = statistics.median(times[whole])
    print(f"== BatchedDecoder B={B}: median ms/step of {ROUNDS} rounds ==")
    for label in labels:
        m = statistics.median(times[label])
        print(f"{label:40} {m:8.4f} ms/step {B * 1e3 / m:8.1f} tokens/s  {base / m:5.3f}x the whole-cache program  "
              f"ids {'equal' if ids[label] == ids[whole] else 'DIFFER'}")
OUT.mkdir(parents=True, exist_ok=True)
(OUT / "decode_capacity.json").write_text(json.dumps(
    {"meta": machine_meta(dev, ["benchmarks/decode_capacity.py"]), "steps": STEPS, "rounds": ROUNDS,
     "short_rows": short_rows, "ms_per_token": times, "ids": ids}, indent=1))
