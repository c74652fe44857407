"""`python -m wgraph bench` in-process on a tiny grid: every JSON field is there (no timing asserted)."""

import json

import pytest

import wgraph as wg
from wgraph.__main__ import main as cli_main
from wgraph.bench import main as bench_main

META = {"machine", "adapter", "driver", "backend", "wgpu_version", "date", "command", "adapter_info", "git_commit"}
HOST = {"mode", "what", "n_ops", "runs", "status", "note", "host_us_per_op", "wall_us_per_op", "ratio_to_floor_host",
        "ratio_to_floor_wall", "speedup_vs_immediate_host", "submits_per_run", "compute_passes_per_run",
        "dispatches_per_run", "dispatches_per_op", "host_us_per_dispatch"}
ATTN = {"phase", "S", "L", "Hq", "Hkv", "D", "dtype", "causal", "flops", "bytes", "status", "note", "forced",
        "variant", "tier", "reason", "plan", "reps", "gpu_us", "wall_us", "time_source"}


def test_bench_json_has_every_field(tmp_path, dev):
    path = tmp_path / "bench.json"
    # planned variants only: other tests may add experimental variants to the process's registry
    result = bench_main(["--grid", "tiny", "--host-ops", "20", "--runs", "2",
                         "--json", str(path)])
    data = json.loads(path.read_text())
    assert data["meta"]["command"].startswith("python -m wgraph bench --grid tiny")
    assert META <= set(data["meta"])
    modes = {r["mode"]: r for r in data["host"]["rows"]}
    assert set(modes) == {"raw_wgpu_floor", "wgraph_immediate", "wgraph_recorded", "wgraph_recorded_fresh_outputs",
                          "wgraph_graph_replay", "attention_decode_immediate", "attention_decode_recorded",
                          "attention_prefill_immediate", "attention_prefill_recorded"}
    for name, r in modes.items():
        if name == "wgraph_graph_replay" and r["status"] == "skipped":
            assert "Graph" in r["note"]
            continue
        assert r["status"] == "ok", r
        assert HOST <= set(r), (name, HOST - set(r))
        if name.startswith("attention"):
            # 10 calls (20 host ops / 10, at least 10); a decode is split-K + combine, a prefill one dispatch
            per_op = 2 if "decode" in name else 1
            assert (r["n_ops"], r["dispatches_per_run"], r["dispatches_per_op"]) == (10, 10 * per_op, per_op)
            assert r["submits_per_run"] == (10 if name.endswith("immediate") else 1)
            continue
        assert r["dispatches_per_run"] == 20
    assert modes["raw_wgpu_floor"]["ratio_to_floor_host"] == 1.0
    assert modes["wgraph_immediate"]["submits_per_run"] == 20
    assert modes["wgraph_recorded"]["submits_per_run"] == 1

    attn = data["attention"]
    if not attn["available"]:
        pytest.skip(attn["note"])
    rows = [r for r in attn["rows"] if r["status"] == "ok"]
    assert {r["phase"] for r in rows} == {"prefill", "decode"}
    assert not any(r["forced"] for r in rows)
    for r in rows:
        assert ATTN <= set(r), ATTN - set(r)
        assert {"variant", "tier", "reason"} <= set(r["plan"])
        assert ("tflops" in r) == (r["phase"] == "prefill") and ("gbps" in r) == (r["phase"] == "decode")
        assert ("ratio_to_torch" in r) == bool(attn["torch"].get("available"))
    assert len(result["attention"]["rows"]) == len(attn["rows"])


def test_sections_skip_with_a_note_when_their_api_is_absent(monkeypatch, tmp_path, dev):
    monkeypatch.delattr(wg.ops, "attention", raising=False)
    if hasattr(wg, "Graph"):
        monkeypatch.delattr(wg, "Graph")
    result = bench_main(["--grid", "tiny", "--host-ops", "5", "--runs", "1", "--no-torch"])
    assert not result["attention"]["available"] and "attention" in result["attention"]["note"]
    replay = [r for r in result["host"]["rows"] if r["mode"] == "wgraph_graph_replay"][0]
    assert replay["status"] == "skipped" and "Graph" in replay["note"]


def test_candidate_variants_match_phase_and_dtype():
    from wgraph.bench.attention import candidate_variants
    from wgraph.bench.grids import GRIDS
    from wgraph.scheduler.registry import kernel

    for s in GRIDS["tiny"]:
        names = candidate_variants(s)
        assert names
        assert all(kernel(n).facts["phase"] == s.phase and kernel(n).facts["dtype"] == s.dtype for n in names)


def test_cli_usage():
    assert cli_main([]) == 2
    assert cli_main(["nonsense"]) == 2
