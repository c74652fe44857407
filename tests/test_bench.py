"""`python -m wgraph bench` in-process on a tiny grid: every JSON field is there (no timing asserted)."""

import attrs
import json
import math
import re
import struct
import sys
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

import wgraph as wg
from wgraph.models.config import STEPS_PER_SUBMIT
from wgraph.__main__ import main as cli_main
from wgraph.bench import main as bench_main
from wgraph.scheduler.queue import PENDING_ITEMS

META = {"machine", "adapter", "driver", "backend", "wgpu_version", "date", "command", "adapter_info", "git_commit"}
HOST = {"mode", "what", "n_ops", "runs", "status", "note", "host_us_per_op", "wall_us_per_op", "ratio_to_floor_host",
        "ratio_to_floor_wall", "speedup_vs_immediate_host", "submits_per_run", "compute_passes_per_run",
        "dispatches_per_run", "dispatches_per_op", "host_us_per_dispatch"}
GEMV = {"rows", "out_features", "in_features", "weight_dtype", "bytes", "variant", "reason", "gpu_us", "gbps",
        "fraction_of_copy", "time_source"}
GEMM = {"rows", "out_features", "in_features", "weight_dtype", "flops", "config", "variant", "splits", "reason",
        "gpu_us", "tflops", "fraction_of_fma_peak", "time_source", "max_rel_err_vs_float64"}
ATTN = {"phase", "S", "L", "Hq", "Hkv", "D", "dtype", "causal", "flops", "bytes", "status", "note", "forced",
        "variant", "tier", "reason", "plan", "reps", "gpu_us", "wall_us", "time_source"}


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _assert_image(path: Path):
    """A PNG by its signature and IHDR size, or an SVG by its root element."""
    data = path.read_bytes()
    if path.suffix == ".png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
        width, height = struct.unpack(">II", data[16:24])
        assert width > 300 and height > 200
    else:
        root = ElementTree.fromstring(data)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert len(list(root.iter())) > 50  # axes, lines, labels: not an empty canvas


def _host_attention_plan(phase, caps):
    """The plan of the host section's attention call (bench/host.py's ATTENTION_SHAPES, f32, causal) for `caps`."""
    from wgraph.bench.host import ATTENTION_SHAPES

    q, kv = (wg.TensorSpec(shape, "f32") for shape in ATTENTION_SHAPES[phase])
    return wg.ops.attention_plan(q, kv, kv, causal=True, caps=caps)


def test_bench_json_has_every_field(tmp_path, dev):
    path = tmp_path / "bench.json"
    plot = ["--plot", str(tmp_path / "bench.svg")] if _has_matplotlib() else []
    # planned variants only: other tests may add experimental variants to the process's registry
    result = bench_main(["--grid", "tiny", "--host-ops", "20", "--runs", "2", "--profile",
                         "--json", str(path), *plot])
    if plot:
        _assert_image(tmp_path / "bench.svg")
    data = json.loads(path.read_text())
    assert data["meta"]["command"].startswith("python -m wgraph bench --grid tiny")
    assert META <= set(data["meta"])
    modes = {r["mode"]: r for r in data["host"]["rows"]}
    assert set(modes) == {"raw_wgpu_floor", "raw_wgpu_submit_per_op", "wgraph_immediate", "wgraph_recorded", "wgraph_recorded_fresh_outputs",
                          "wgraph_graph_replay", "attention_decode_immediate", "attention_decode_recorded",
                          "attention_prefill_immediate", "attention_prefill_recorded"}
    for name, r in modes.items():
        if name == "wgraph_graph_replay" and r["status"] == "skipped":
            assert "Graph" in r["note"]
            continue
        assert r["status"] == "ok", r
        assert HOST <= set(r), (name, HOST - set(r))
        if name.startswith("attention"):
            # a call's dispatches are its plan's on this device: lavapipe's decode is split-K + combine, a GPU
            # with subgroups (an H100) runs the one-pass decode over these 256 keys; a prefill is one dispatch
            per_op = len(_host_attention_plan(name.split("_")[1], dev.caps).dispatches)
            calls = 20 // per_op  # the floor's 20 dispatches
            assert (r["n_ops"], r["dispatches_per_run"], r["dispatches_per_op"]) == (calls, calls * per_op, per_op)
            # immediate calls share a submit per PENDING_ITEMS items (and the run's closing flush)
            assert r["submits_per_run"] == (math.ceil(20 / PENDING_ITEMS) if name.endswith("immediate") else 1)
            continue
        assert r["dispatches_per_run"] == 20
    assert modes["raw_wgpu_floor"]["ratio_to_floor_host"] == 1.0
    assert modes["wgraph_immediate"]["submits_per_run"] == math.ceil(20 / PENDING_ITEMS)
    assert modes["wgraph_recorded"]["submits_per_run"] == 1

    gemv = data["gemv"]
    assert gemv["copy"]["copy_correct"] and gemv["copy"]["gbps"] > 0
    assert [r["status"] for r in gemv["rows"]] == ["ok"] * len(gemv["rows"]) and gemv["rows"]
    for r in gemv["rows"]:
        assert GEMV <= set(r), GEMV - set(r)
        assert "gemv" in r["variant"] and r["max_rel_err_vs_float64"] < 1e-5
        assert ("ratio_to_torch" in r) == bool(gemv["torch"].get("available"))
        # the same bytes through the read kernel: the row's ceiling, set beside it
        assert r["read_same_bytes_us"] > 0 and r["of_size_ceiling"] == pytest.approx(
            r["fraction_of_copy"] / r["read_same_bytes_fraction"])

    model = data["model"]["rows"][0]
    assert model["status"] == "ok", model
    one = model["one_step_a_submit"]   # the same steps, one a submit: the same ids
    assert one["same_ids"] and one["submits"] == model["steps"]
    prof = model["profile"]
    if dev.caps.has_timestamps:   # --profile: one decode step's GPU time by op and by layer (2 layers, tiny)
        assert prof["status"] == "ok" and prof["total_us"] <= prof["span_us"] * 1.0001
        assert sum(g["dispatches"] for g in prof["by_op"]) == model["dispatches_per_token"]
        assert sum(g["gpu_us"] for g in prof["by_layer"]) == pytest.approx(prof["total_us"])
        assert [g["name"] for g in prof["by_layer"] if g["name"]] == ["layer0", "layer1"]
    else:
        assert prof["status"] == "unsupported"

    assert [r["status"] for r in data["batched_model"]["rows"]] == ["ok", "ok"], data["batched_model"]
    # the batched section with timestamps, as test_bench_batched_rows checks it (which runs it without them only:
    # this run's rows were the same section a second time, ~1.5 s on lavapipe)
    _check_batched_rows(dev, result["batched"]["rows"])

    # the quantized decode: f16, each quick type, and the x_int8 twins (QuantizedLlama's option) beside theirs
    quant_models = [r for r in data["quant"]["models"] if r["model"].startswith("wgraph")]
    assert [r["model"] for r in quant_models] == [f"wgraph {'f16' if dev.caps.has_f16 else 'f32'}", "wgraph Q4_0",
                                                  "wgraph Q4_0 x_int8", "wgraph Q4_K_M"]
    # torch's f16 decode beside them where torch runs (a GPU with CUDA): eager and CUDA graphs, after wgraph's rows
    torch_models = data["quant"]["models"][len(quant_models):]
    if gemv["torch"].get("available"):
        assert [r["model"] for r in torch_models] == ["torch f16 eager", "torch f16 cuda_graph"], torch_models
        assert all(r["status"] == "ok" and r["tokens_per_s"] > 0 for r in torch_models), torch_models
    else:
        assert [r["status"] for r in torch_models] in ([], ["unavailable"]), torch_models
    assert all(r["status"] == "ok" and r["tokens_per_s"] > 0 for r in quant_models), quant_models
    # x_int8 plans the integer-dot GEMV for the one matrix of >= 8192 rows (the vocabulary's lm_head), no other
    assert [r["x_int8_gemvs"] for r in quant_models[1:]] == [0, 1, 0]

    assert {r["type"] for r in data["fma"]["rows"]} == {"f32", "f16", "vec2f16", "vec4f16"}
    for r in data["fma"]["rows"]:
        assert r["status"] == "ok" or (r["status"] == "unsupported" and "f16" in r["type"]), r
        if r["status"] == "ok":
            assert r["tflops"] > 0 and r["max_rel_err_vs_float64"] < 1e-2 and r["iterations"] <= 65535
    gemm = data["gemm"]
    assert gemm["rows"] and gemm["fma_f32_tflops"] == [r["tflops"] for r in data["fma"]["rows"] if r["type"] == "f32"][0]
    for r in gemm["rows"]:
        if r["status"] == "unsupported" and r["weight_dtype"] == "f16" and not dev.caps.has_f16:
            continue   # f16 weights need shader-f16: the row says so, as the f16 fma rows do
        assert r["status"] == "ok" and r["planned"], r
        assert GEMM <= set(r), GEMM - set(r)
        # a CPU adapter's prefill GEMV class (registry/gemv.toml) may take the rows, in passes of 32
        assert "gemm" in r["variant"] or (dev.caps.is_cpu and r["variant"].startswith("gemv_r32_cpu_")), r
        assert r["max_rel_err_vs_float64"] < 1e-5
        assert r["flops"] == 2 * r["rows"] * r["out_features"] * r["in_features"]

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
        assert (r.get("replay_us", 0) > 0) == (r["phase"] == "decode")   # a Program replay of decode calls
    assert len(result["attention"]["rows"]) == len(attn["rows"])
    if dev.caps.has_timestamps:   # GPU times to compare: a device without timestamp queries has none
        again = attn["torch"]["first_shape_again"]   # the first shape timed again at the end of the section
        assert again["shape"] == "prefill S=16 Hq/Hkv=4/2 D=32 f32" and again["gpu_us_again"] > 0
    else:
        assert "first_shape_again" not in attn["torch"]
    assert {"clocks_before", "torch_context", "steady_work_s"} <= set(attn["torch"]["warmup"])


def test_f16_prefill_as_a_fraction_of_the_fma_peak():
    """With an FMA section in the result, each f16 prefill row gets its TFLOP/s over the best f16 FMA row."""
    from wgraph.bench.report import add_fma_fractions, fma_fraction_lines

    # the FMA rows as wgraph/bench/fma.py writes them (an H200 run's, cut to the keys read)
    h200 = json.loads((Path(__file__).resolve().parents[1] / "benchmarks/results/h200-fma-attention.json").read_text())
    assert {"type", "status", "tflops"} <= set(h200["fma"]["rows"][0])
    result = {"fma": {"rows": [{"type": "f32", "status": "ok", "tflops": 60.0},
                               {"type": "f16", "status": "ok", "tflops": 50.0},
                               {"type": "vec2f16", "status": "ok", "tflops": 120.0},
                               {"type": "vec4f16", "status": "unsupported", "tflops": None}]},
              "attention": {"rows": [dict(phase="prefill", dtype="f16", tflops=30.0, S=4096, Hq=16, Hkv=16, D=128,
                                          variant="v"),
                                     dict(phase="prefill", dtype="f32", tflops=30.0),
                                     dict(phase="decode", dtype="f16", gbps=1000.0)]}}
    add_fma_fractions(result)
    rows = result["attention"]["rows"]
    assert rows[0]["fraction_of_fma_peak"] == 30.0 / 120.0
    assert "fraction_of_fma_peak" not in rows[1] and "fraction_of_fma_peak" not in rows[2]
    assert "= 0.250 of 120" in fma_fraction_lines(result)
    no_fma = {"attention": {"rows": [dict(phase="prefill", dtype="f16", tflops=30.0)]}}
    add_fma_fractions(no_fma)
    assert "fraction_of_fma_peak" not in no_fma["attention"]["rows"][0] and fma_fraction_lines(no_fma) == ""


def test_attention_table_shows_torch_graph_time_of_decode_rows():
    """A decode row with torch's CUDA-graph time prints it and the replay's ratio to it in the last two columns; a
    row without them prints '-' there (the values are not computed by the table: it prints what the row holds)."""
    from wgraph.bench.report import attention_table

    base = dict(status="ok", phase="decode", S=1, L=32768, Hq=32, Hkv=8, D=128, dtype="f16", variant="v", tier="t",
                gpu_us=76.8, wall_us=None, gbps=1748.0, torch_gbps=3350.0, ratio_to_torch=0.522, replay_us=68.2,
                ratio_to_torch_replay=0.587)
    with_graph = attention_table([dict(base, torch_graph_us=31.25, ratio_to_torch_graph_replay=0.4582)])
    without = attention_table([base])
    assert with_graph.splitlines()[0].split()[-2:] == ["us", "ratio"]
    assert with_graph.splitlines()[2].split()[-2:] == ["31.2", "0.458"]
    assert without.splitlines()[2].split()[-2:] == ["-", "-"]


def test_sections_skip_with_a_note_when_their_api_is_absent(monkeypatch, tmp_path, dev):
    monkeypatch.delattr(wg.ops, "attention", raising=False)
    if hasattr(wg, "Graph"):
        monkeypatch.delattr(wg, "Graph")
    # the two sections whose API is taken away (the others are test_bench_json_has_every_field's)
    result = bench_main(["--grid", "tiny", "--host-ops", "5", "--runs", "1", "--no-torch", "--only", "host,attention"])
    assert not result["attention"]["available"] and "attention" in result["attention"]["note"]
    replay = [r for r in result["host"]["rows"] if r["mode"] == "wgraph_graph_replay"][0]
    assert replay["status"] == "skipped" and "Graph" in replay["note"]


def test_candidate_variants_match_phase_and_dtype():
    from wgraph.bench.attention import candidate_variants
    from wgraph.bench.grids import GRIDS
    from wgraph.kernels.registry import kernel

    for s in GRIDS["tiny"]:
        names = candidate_variants(s)
        assert names
        assert all(kernel(n).facts["phase"] == s.phase and kernel(n).facts["dtype"] == s.dtype for n in names)


def test_every_grid_name_sizes_every_section():
    """--grid decode is attention's grid; the gemv and batched sections run their full sizes under it (they
    raised KeyError before), and under any grid they have they run that one."""
    from wgraph.bench import DEFAULT_BUDGET_S, batched, gemv, grids, section_grid

    assert set(DEFAULT_BUDGET_S) == set(grids.GRIDS)   # `--grid prefill` without a budget was a KeyError
    for table in (gemv.GEMV_GRIDS, gemv.COPY_BYTES, batched.GRIDS):
        assert section_grid("decode", table) == "full" and "decode" not in table
        for name in grids.GRIDS:
            assert section_grid(name, table) in table
            assert section_grid(name, table) == (name if name in table else "full")


H100 = wg.Caps.synthetic(adapter_name="NVIDIA H100 80GB HBM3", has_f16=True, has_timestamps=True,
                         max_storage_binding_size=(1 << 32) - 4, max_buffer_size=1 << 40)
LAVAPIPE = wg.Caps.synthetic(adapter_name="llvmpipe (LLVM 15.0.6, 256 bits) (CPU) via Vulkan", is_cpu=True,
                             has_f16=True)
L2 = 60e6   # past any H100's / H200's 50 MB L2


def test_copy_size_is_past_a_gpu_l2_and_small_on_lavapipe():
    """The copy kernel's bytes (read, and as many written) under every grid: on a GPU more than 2x an L2 of 60 MB,
    also within WebGPU's default 128 MiB binding (the tiny and quick grids' 1 and 16 MiB fit an H100's 50 MB L2:
    "of copy" fractions of a copy out of the cache); on lavapipe the grid's own size, small under --quick."""
    from wgraph.bench import gemv, grids

    default = wg.Caps.synthetic()   # a GPU with WebGPU's default limits: 128 MiB a binding
    for name in sorted(set(grids.GRIDS) | set(gemv.COPY_BYTES)):
        for caps in (H100, default):
            assert min(gemv.copy_bytes(caps, name), caps.max_storage_binding_size) > 2 * L2, (name, caps)
    assert gemv.copy_bytes(LAVAPIPE, "tiny") == 1 << 20 and gemv.copy_bytes(LAVAPIPE, "quick") == 16 << 20
    assert gemv.copy_bytes(LAVAPIPE, "full") == gemv.copy_bytes(H100, "full") == 512 << 20


class _CopyAsked(Exception):
    pass


@pytest.mark.parametrize("caps, least, most", [(H100, 2 * L2, math.inf), (LAVAPIPE, 0, 16 << 20)])
def test_quick_model_and_quant_sections_copy_past_a_gpu_l2(monkeypatch, caps, least, most):
    """--quick's model copy bandwidth and the quant section's (no gemv section before them) ask copy_bandwidth for
    more than 2x a 60 MB L2 on a GPU (16 MiB and 1 MiB before), at most 16 MiB on lavapipe."""
    import argparse
    import types

    from wgraph import bench
    from wgraph.bench import gemv, model

    asked = []

    def copy_bandwidth(dev, nbytes):
        asked.append(nbytes)
        raise _CopyAsked

    monkeypatch.setattr(gemv, "copy_bandwidth", copy_bandwidth)
    dev = types.SimpleNamespace(caps=caps)
    with pytest.raises(_CopyAsked):
        model.copy_gbps(dev, {}, quick=True)
    with pytest.raises(_CopyAsked):
        bench._quant_section(dev, argparse.Namespace(quick=True, no_torch=True), "quick", {})
    assert len(asked) == 2 and all(least < n <= most for n in asked), asked


def test_cli_usage(capsys):
    assert cli_main([]) == 2
    assert cli_main(["nonsense"]) == 2
    assert cli_main(["--help"]) == 0
    text = capsys.readouterr().out
    commands = re.findall(r"^  (\w+) +(\S.*)$", text.split("Commands:")[-1], re.M)
    assert [c for c, _ in commands] == ["bench", "soak", "plot", "generate"]
    for name, line in commands:
        assert len(line) > 30, (name, line)  # one line that says something
        with pytest.raises(SystemExit) as info:
            cli_main([name, "--help"])
        assert info.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: python -m wgraph {name} ")


def test_quick_does_the_work_its_documented_time_was_measured_on(monkeypatch, dev):
    """--quick's time claim holds by the work it does: the sections, dispatches x runs and attention shapes the docs
    name (and its "about 20 s on lavapipe" was measured on) are exactly what a --quick run asks for; the other
    sections do not run. The sections are stubbed: no time is measured here."""
    import wgraph.bench as bench
    from wgraph.bench import QUICK, attention, batched, gemv, host

    root = Path(__file__).resolve().parents[1]
    docs = {doc: (root / doc).read_text() for doc in ("README.md", "docs/benchmarks.md")}
    for doc, text in docs.items():
        assert "about 20 s on lavapipe" in text, doc
        assert not re.search(r"under (a|one|2|two) minutes?", text), doc
    assert QUICK in " ".join(docs["docs/benchmarks.md"].split())  # the --help text, word for word
    ops, runs = map(int, re.search(r"(\d+) dispatches x (\d+) runs per host-cost mode", QUICK).groups())
    shapes = int(re.search(r"\((\d+) lavapipe-sized attention shapes\)", QUICK).group(1))
    assert (ops, runs, shapes) == (200, 3, 8)   # what docs/benchmarks.md's measured 20 s ran

    ran = []

    def fake_host(dev, *, n_ops, runs, progress):
        ran.append(("host", n_ops, runs))
        return []

    def fake_attention(dev, shapes, **kw):
        ran.append(("attention", len(shapes)))
        return [], {"available": False, "note": "stub"}

    def refuse(name):
        def section(*a, **kw):
            ran.append((name,))
            raise AssertionError(f"--quick ran the {name} section")
        return section

    monkeypatch.setattr(host, "bench_host", fake_host)
    monkeypatch.setattr(attention, "bench_attention", fake_attention)
    monkeypatch.setattr(gemv, "copy_bandwidth", refuse("gemv"))
    monkeypatch.setattr(batched, "bench_batched", refuse("batched"))
    for name in ("_gemm_section", "_model_section", "_batched_model_section", "_quant_section"):
        monkeypatch.setattr(bench, name, refuse(name))
    result = bench_main(["--quick", "--no-torch"])
    assert ran == [("host", ops, runs), ("attention", shapes)]
    assert result["settings"]["sections"] == ["host", "attention"]
    ran.clear()   # --only runs one section, at its quick size
    bench_main(["--quick", "--no-torch", "--only", "attention"])
    assert ran == [("attention", shapes)]
    ran.clear()   # several sections run in the bench's order, whatever order they are named in
    result = bench_main(["--quick", "--no-torch", "--only", "attention,host"])
    assert ran == [("host", ops, runs), ("attention", shapes)]
    assert result["settings"]["sections"] == ["host", "attention"]
    for bad in ("attention,attention", "host,gpu", ""):
        with pytest.raises(SystemExit) as info:
            bench_main(["--only", bad])
        assert info.value.code == 2


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_of_the_committed_h200_results(tmp_path, suffix):
    pytest.importorskip("matplotlib", reason="plots need matplotlib, an optional extra (pip install wgraph[plot])")
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / f"h200{suffix}"
    assert cli_main(["plot", str(root / "benchmarks/results/h200.json"), str(out)]) == 0
    _assert_image(out)


def test_plot_errors_name_the_fix(tmp_path, monkeypatch):
    from wgraph.bench.plot import check_plot_path

    with pytest.raises(ValueError, match=r"the format comes from the extension, one of \('.png', '.svg'\)"):
        check_plot_path(tmp_path / "x.jpg")
    with pytest.raises(ValueError, match=r"^plot path '': the format"):   # as typed: Path("") said '.'
        check_plot_path("")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(ImportError, match=r"plotting needs matplotlib, an optional extra: pip install wgraph\[plot\]"):
        check_plot_path(tmp_path / "x.png")
    with pytest.raises(SystemExit) as info:
        bench_main(["--plot", str(tmp_path / "x.png")])  # refused before any measuring
    assert info.value.code == 2


@pytest.mark.parametrize("args,message", [
    (["--runs", "-1"], "--runs -1 must be in [1, 1000]"),          # an AttributeError traceback after the run
    (["--host-ops", "0"], "--host-ops 0 must be in [1, 1000000]"),  # 0 ran the default 1000
    (["--host-ops", str(2**64)], f"--host-ops {2**64} must be in [1, 1000000]"),   # a graph grown out of memory
    (["--runs", "1001"], "--runs 1001 must be in [1, 1000]"),
    (["--budget-s", "nan"], "argument --budget-s: expected a finite number of seconds > 0, got 'nan'"),
    (["--budget-s", "-1"], "argument --budget-s: expected a finite number of seconds > 0, got '-1'"),
    (["--budget-s", "0"], "argument --budget-s: expected a finite number of seconds > 0, got '0'"),
    # float() made 1e400 inf: the message showed inf, not the text as typed
    (["--budget-s", "1e400"], "argument --budget-s: expected a finite number of seconds > 0, got '1e400'"),
    (["--budget-s", "soon"], "argument --budget-s: expected a finite number of seconds > 0, got 'soon'"),
])
def test_bad_bench_arguments_are_refused_before_the_run(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as info:
        bench_main(args)
    assert info.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_main(["--json", str(tmp_path)])   # a directory: found before, not after, the run
    assert "is a directory; give a file path" in capsys.readouterr().err


def test_plot_of_a_json_that_is_no_bench_result_says_so(tmp_path, capsys):
    from wgraph.bench.plot import main as plot_main

    for text, message in (("[1, 2]", "is not a result of python -m wgraph bench --json"),
                          ("{bad", "is not a JSON file"),
                          ("[" * 100_000, "is not a JSON file: maximum recursion depth exceeded")):  # a traceback
        (tmp_path / "r.json").write_text(text)
        with pytest.raises(SystemExit) as info:
            plot_main([str(tmp_path / "r.json"), str(tmp_path / "o.png")])
        assert info.value.code == 2 and message in capsys.readouterr().err


def test_bench_batched_rows(dev, monkeypatch):
    """The batched section on a device without timestamp queries (a device lacking the feature): every tiny shape
    runs in one or two dispatches and reports its throughput, with its Program replay timed by the wall clock (the
    replay was left out there, though it needs no timestamps). With timestamps: test_bench_json_has_every_field's
    run of the section, checked by the same _check_batched_rows."""
    from wgraph.bench.batched import bench_batched

    monkeypatch.setattr(dev, "caps", attrs.evolve(dev.caps, has_timestamps=False, has_timestamps_inside_passes=False))
    rows, _ = bench_batched(dev, "tiny", use_torch=False)
    _check_batched_rows(dev, rows)


def _check_batched_rows(dev, rows):
    from wgraph.bench.batched import table
    from wgraph.ops.attention_planner import PlanFacts, plan

    assert [r["status"] for r in rows] == ["ok", "ok"], rows
    for r in rows:
        # the plan's dispatches on this device: lavapipe's decode is split-K + combine, a GPU with subgroups (an
        # H100) runs the one-pass batched decode over 32 keys; a varlen prefill is one dispatch
        n, decode = max(r["lengths"]), r["kind"] == "decode"
        facts = PlanFacts("decode" if decode else "prefill", r["dtype"], 1 if decode else n, r["Hq"], r["D"], n,
                          num_kv_heads=r["Hkv"], family="attention_batched", batch=r["B"])
        assert r["dispatches"] == len(plan(facts, dev.caps).dispatches) in (1, 2), r
        assert r[{"decode": "gbps", "varlen": "tflops"}[r["kind"]]] > 0
        assert r["replay_us"] > 0
    assert "decode B=3" in table(rows)


def test_bench_batched_b1_beside_the_single_sequence_kernel(dev):
    """B = 1 rows time the single-sequence kernel twice: with an int kv_len and with kv_len on the GPU (as the batched
    call reads cache_seqlens), each also replayed; the table prints both."""
    import numpy as np

    from wgraph.bench.batched import BatchedShape, _arrays, measure, table

    s = BatchedShape("decode", (40,), 4, 2, 32, "f32")
    row = measure(dev, s, _arrays(s, np.random.default_rng(0)), 0.01, 3)
    if row["time_source"] != "timestamp-span":
        pytest.skip("the device has no timestamp queries: the B = 1 comparison needs GPU times")
    assert row["single_gpu_us"] > 0 and row["single_gpu_len_gpu_us"] > 0 and row["single_gpu_len_replay_us"] > 0
    assert row["turns_batched_replay_us"] > 0 and row["turns_single_gpu_len_replay_us"] > 0
    assert row["single_variant"].startswith("decode_") and row["single_gpu_len_variant"].startswith("decode_")
    row.update(status="ok", kind="decode", label="decode B=1", gbps=1.0)
    text = table([row])
    assert "single-sequence " + row["single_variant"] in text and "kv_len on the GPU: " in text


def test_bench_batched_model_rows(dev):
    """The batched model section: B = 1 and 8 of the tiny config; each row's step is as many dispatches whatever
    B, B tokens per step, and sequence 0 (the same prompt in both) gets the same ids."""
    from wgraph.bench.batched_model import bench_batched_models, table

    out = bench_batched_models(dev, quick=True, use_torch=False, progress=lambda _msg: None)
    rows = out["rows"]
    assert [(r["batch"], r["status"]) for r in rows] == [(1, "ok"), (8, "ok")], rows
    assert rows[0]["dispatches_per_step"] == rows[1]["dispatches_per_step"]
    for r in rows:
        assert r["tokens_per_s"] == pytest.approx(r["batch"] * 1e3 / r["ms_per_step"])
        # STEPS_PER_SUBMIT steps a submit (run_steps' default)
        assert r["submits_per_step"] == 1 / STEPS_PER_SUBMIT and len(r["ids"]) == r["batch"]
        assert len(r["ids"][0]) == out["steps"]
    assert rows[0]["ids"][0] == rows[1]["ids"][0]
    assert "tiny-llama" in table(out) and "torch graph" in table(out)
    # TINY by hand: hidden 128, intermediate 256, 4/2 heads of 32, vocab 512, 2 layers, tied: per layer q and o
    # 128 x 128, k and v 64 x 128, gate, up and down 256 x 128; the table once (the lm_head); 5 f32 norms of 128
    matrices = 2 * (2 * 128 * 128 + 2 * 64 * 128 + 3 * 256 * 128) + 512 * 128
    itemsize = 2 if out["dtype"] == "f16" else 4
    assert out["weight_bytes_per_token"] == itemsize * matrices + 4 * 5 * 128
    for r in rows:   # 2 flops a weight a sequence; the norms are no matmul (they were counted as 2 weights each)
        assert r["matmul_tflops"] == pytest.approx(2 * r["batch"] * matrices / (r["ms_per_step"] * 1e-3) / 1e12)


def test_read_ceiling_reads_the_bytes_it_reports(dev):
    from wgraph.bench import gemv

    c = gemv.read_ceiling(dev, 4096 + 40, target_us=50.0, max_reps=4)
    # 4136 bytes: 258 whole 16-byte words, 4128 bytes read a call
    assert c["bytes_read"] == 4128 and c["gpu_us"] > 0
    assert c["gbps"] == pytest.approx(4128 / (c["gpu_us"] * 1e-6) / 1e9)


@pytest.mark.parametrize("words", [1000, 256 * 65535 + 300])
def test_read_kernel_sums_every_word_a_thread_reads(dev, words):
    """The read kernel's loads are real: a thread whose words' lane sum is `magic` writes their sum, so with
    magic set to thread 0's sum (numpy: words 0, stride, 2 stride, ... wrapping u32 adds) y holds it, and with the
    bench's magic y is untouched. The second size passes the workgroups a dimension allows (threads stride over
    the rest: 268 MB, run on a GPU's device job)."""
    from wgraph.bench.memory_kernels import BENCH_READ, ReadParams
    from wgraph.ops.core import apply

    if words > 256 * dev.caps.max_workgroups_per_dim and dev.caps.is_cpu:
        pytest.skip("268 MB of reads: the strided case runs on a GPU")
    groups = min(-(-words // 256), dev.caps.max_workgroups_per_dim)
    x = np.random.default_rng(words).integers(0, 2**32, (words, 4), dtype=np.uint64).astype(np.uint32)
    mine = x[::groups * 256].sum(axis=0, dtype=np.uint64) % 2**32   # thread 0's words
    magic = int(mine.sum() % 2**32)
    tx = dev.tensor(x.reshape(-1))
    y = dev.tensor(np.zeros(4, np.uint32))
    apply(BENCH_READ, ReadParams(), (tx,), out=y)
    assert (y.numpy() == 0).all()
    apply(BENCH_READ, ReadParams(magic=magic), (tx,), out=y)
    assert y.numpy().tolist() == mine.tolist()


def test_kernel_subsets_count_each_pass_of_a_split_k_decode(dev):
    """kernel_subsets_us keeps the dispatches each subset accepts: a split-K decode call is one chunk pass and one
    combine (its plan's two dispatches), and their subsets time a positive span."""
    import numpy as np

    from wgraph.bench.timing import kernel_subsets_us

    if not dev.caps.has_timestamps:
        pytest.skip("no timestamp queries on this adapter")
    rng = np.random.default_rng(0)
    k = dev.tensor(rng.standard_normal((64, 2, 32)).astype(np.float32))
    q = dev.tensor(rng.standard_normal((1, 4, 32)).astype(np.float32))
    kl = dev.tensor(np.array([40], np.uint32))
    variant = "decode_splitk_g4_f32"   # named: a GPU with subgroups plans the one-pass decode (one dispatch) here
    plan = wg.ops.attention_plan(q, k, k, causal=True, kv_len=kl, variant=variant)
    names = [name for name, _ in plan.dispatches]
    assert names == [variant, "decode_splitk_combine_f32"]

    def call():
        wg.ops.attention(q, k, k, causal=True, kv_len=kl, variant=variant)
    call()
    dev.sync()
    got = kernel_subsets_us(dev, call, 3, {"all": lambda n: True, "main": lambda n: n == names[0],
                                           "combine": lambda n: n == names[1]}, batches=1)
    assert {name: count for name, (_, count) in got.items()} == {"all": 2, "main": 1, "combine": 1}
    assert all(us > 0 for us, _ in got.values())


def test_host_table_shows_a_missing_floor_as_a_dash():
    """The x floor ratios are None when the raw wgpu loop's row failed; host_table raised TypeError formatting
    them (the whole table, and the bench's report, lost). Now they read '-' and the rest of the row is kept."""
    from wgraph.bench.report import host_table

    rows = [{"mode": "raw_wgpu_floor", "status": "error", "note": "boom"},
            {"mode": "wgraph_program", "status": "ok", "host_us_per_op": 12.5, "dispatches_per_op": 2.0,
             "ratio_to_floor_host": None, "wall_us_per_op": 30.25, "ratio_to_floor_wall": None,
             "submits_per_run": 1, "compute_passes_per_run": 1, "speedup_vs_immediate_host": None}]
    line = [ln for ln in host_table(rows).splitlines() if ln.startswith("wgraph_program")][0]
    assert line.split() == ["wgraph_program", "12.50", "2.0", "-", "30.25", "-", "1", "1", "-x"]
    assert "raw_wgpu_floor                 error: boom" in host_table(rows)


def test_plot_without_the_attention_section_is_a_usage_error(tmp_path, capsys):
    """--plot draws the attention rows; with --only host it ran the whole bench and then raised ValueError ('no
    attention rows that ran'); now a usage error before any GPU work."""
    with pytest.raises(SystemExit) as e:
        bench_main(["--only", "host", "--no-torch", "--plot", str(tmp_path / "p.svg")])
    assert e.value.code == 2
    assert "--plot draws the attention section's rows; --only host runs none of them" in capsys.readouterr().err


def test_json_and_plot_paths_that_cannot_be_written_are_refused_before_the_run(tmp_path, capsys):
    """--json under a path that is a file ran the whole bench, then raised FileExistsError from write_json's mkdir
    (a traceback, the result lost); --plot the same from plot_result. Now a usage error before any GPU work."""
    (tmp_path / "f").write_text("")
    for option, name in (("--json", "r.json"), ("--plot", "p.svg")):
        with pytest.raises(SystemExit) as info:
            bench_main(["--only", "attention", "--grid", "tiny", "--no-torch", option,
                        str(tmp_path / "f" / "sub" / name)])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert f"{option} {tmp_path / 'f' / 'sub' / name}: {tmp_path / 'f'} is not a directory" in err


@pytest.mark.parametrize("args, message", [
    # each was accepted and ignored: the run went by without the profile, the variants, the runs asked for
    (["--quick", "--profile"], "--profile is read by the model and batched_model sections only; --quick runs none"),
    (["--only", "host,gemv", "--variants", "all"], "--variants all is read by the attention and gemm sections only; "
                                                    "--only host,gemv runs none of them"),
    (["--only", "gemv", "--runs", "21"], "--runs is read by the host section only; --only gemv runs none of them"),
    (["--only", "attention", "--host-ops", "50"], "--host-ops is read by the host section only; --only attention"),
    (["--only", "fma", "--budget-s", "30"], "--budget-s is read by the attention and gemm sections only; --only fma"),
])
def test_an_option_no_chosen_section_reads_is_refused_before_the_run(capsys, monkeypatch, args, message):
    import wgraph

    monkeypatch.setattr(wgraph, "default_device", lambda *a, **k: pytest.fail("the run started"))
    with pytest.raises(SystemExit) as info:
        bench_main(["--no-torch", *args])
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_a_plot_of_no_attention_row_that_ran_is_an_error_after_the_json(tmp_path, capsys, monkeypatch, dev):
    """--plot where no attention row ran (every shape failed on this device) raised plot_result's ValueError out of
    the bench: a traceback after the run. Now one line on stderr, exit code 1, and the JSON written before it."""
    pytest.importorskip("matplotlib", reason="plots need matplotlib, an optional extra (pip install wgraph[plot])")
    from wgraph.bench import attention

    failed = _decode_row(status="error", note="ShaderError: boom", S=1, variant=None)
    monkeypatch.setattr(attention, "bench_attention", lambda *a, **k: ([failed], {"available": False, "note": "-"}))
    json_path, plot_path = tmp_path / "r.json", tmp_path / "p.svg"
    argv = ["bench", "--only", "attention", "--grid", "tiny", "--no-torch", "--json", str(json_path),
            "--plot", str(plot_path)]
    with pytest.raises(SystemExit) as info:
        cli_main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 1 and "Traceback" not in err
    assert (f"python -m wgraph bench: --plot {plot_path} not written: the bench result has no attention rows that "
            f"ran: nothing to plot (the results are in {json_path})") in err
    assert json.loads(json_path.read_text())["attention"]["rows"] == [failed] and not plot_path.exists()


def test_a_json_path_no_file_can_have_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    """--json with a name past the file system's limit raised Path.is_dir()'s OSError (File name too long) as a
    traceback; one holding a NUL byte passed the check (is_dir() and exists() take it for nothing there) and its
    write failed after the run. Both are usage errors before any GPU work now."""
    import wgraph

    monkeypatch.setattr(wgraph, "default_device", lambda *a, **k: pytest.fail("the run started"))
    for path, why in ((str(tmp_path / ("y" * 300) / "out.json"), "cannot be a file path (File name too long)"),
                      (str(tmp_path / "a\0b.json"), "holds a NUL byte, which no file name can")):
        with pytest.raises(SystemExit) as info:
            bench_main(["--only", "attention", "--grid", "tiny", "--no-torch", "--json", path])
        assert info.value.code == 2 and f"--json {path}: {why}" in capsys.readouterr().err


def test_an_empty_json_or_plot_path_is_refused_before_the_run(capsys, monkeypatch):
    """--json "" (or --plot "") was falsy: neither checked nor written, so the run's results were silently not
    saved (exit 0); now a usage error before any GPU work. So is one path for both."""
    import wgraph

    monkeypatch.setattr(wgraph, "default_device", lambda *a, **k: pytest.fail("the run started"))
    for option in ("--json", "--plot"):
        with pytest.raises(SystemExit) as info:
            bench_main(["--only", "attention", "--grid", "tiny", "--no-torch", option, ""])
        assert info.value.code == 2
        assert f"{option} '': is empty; give a file path" in capsys.readouterr().err
    # one file for both: the plot was written over the JSON after the run (exit 0, the results lost)
    with pytest.raises(SystemExit) as info:
        bench_main(["--only", "attention", "--json", "out.svg", "--plot", "./out.svg"])
    assert info.value.code == 2
    assert "--json and --plot name one file, ./out.svg: the plot would replace the results" in capsys.readouterr().err


def test_bench_json_is_strict_json_and_plot_reads_it_back(tmp_path):
    """A non-finite field (a kernel that wrote NaN makes max_abs_diff_vs_torch NaN) was written as a bare NaN or
    Infinity, which strict JSON readers refuse; numpy scalars were written by default=str as strings ("1.5").
    Now the non-finite values are the strings float() reads back, numpy scalars their numbers, and plot still
    reads the file."""
    import numpy as np

    from wgraph.bench.plot import main as plot_main
    from wgraph.bench.report import write_json

    row = _decode_row(max_abs_diff_vs_torch=float("nan"), ratio_to_torch=np.float64("inf"),
                      torch_us=np.float32("-inf"), reps=np.int64(7), wall_us=np.float32(1.5), S=np.int32(1))
    path = write_json(tmp_path / "r.json", {"attention": {"rows": [row]}, "elapsed_s": 2.5})

    def refuse(constant):
        raise AssertionError(f"{constant} is not strict JSON")

    back = json.loads(path.read_text(), parse_constant=refuse)["attention"]["rows"][0]
    assert (back["max_abs_diff_vs_torch"], back["ratio_to_torch"], back["torch_us"]) == ("NaN", "Infinity",
                                                                                         "-Infinity")
    assert [float(back[k]) for k in ("ratio_to_torch", "torch_us")] == [np.inf, -np.inf]
    assert np.isnan(float(back["max_abs_diff_vs_torch"]))
    assert (back["reps"], back["wall_us"], back["S"], back["gbps"]) == (7, 1.5, 1, 3.0)
    pytest.importorskip("matplotlib", reason="plots need matplotlib, an optional extra (pip install wgraph[plot])")
    assert plot_main([str(path), str(tmp_path / "o.svg")]) == 0


def _decode_row(**fields) -> dict:
    return {"status": "ok", "phase": "decode", "dtype": "f16", "Hq": 4, "Hkv": 2, "D": 32, "L": 64, "gbps": 3.0,
            **fields}


@pytest.mark.parametrize("row, message", [
    # a string was drawn on a category axis and the plot written (exit 0)
    (_decode_row(gbps="fast"), "attention row 1 (decode f16): gbps='fast' is not a positive finite number"),
    # inf (1e400 in the file) raised matplotlib's 'Data cannot be log-scaled because all values are <= 0'
    (_decode_row(gbps=float("inf")), "attention row 1 (decode f16): gbps=inf is not a positive finite number"),
    (_decode_row(L=0), "attention row 1 (decode f16): L=0 is not a positive finite number"),   # an empty panel
    (_decode_row(torch_gbps=-2.0), "attention row 1 (decode f16): torch_gbps=-2.0 is not a positive finite"),
])
def test_plot_refuses_a_row_value_no_bench_writes(tmp_path, capsys, row, message):
    pytest.importorskip("matplotlib", reason="plots need matplotlib, an optional extra (pip install wgraph[plot])")
    from wgraph.bench.plot import main as plot_main

    (tmp_path / "r.json").write_text(json.dumps({"attention": {"rows": [{"status": "error"}, row]}}))
    with pytest.raises(SystemExit) as info:
        plot_main([str(tmp_path / "r.json"), str(tmp_path / "o.png")])
    assert info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o.png").exists()


@pytest.mark.parametrize("result, message", [
    # each said only as the exception inside plot (AttributeError: 'NoneType' object has no attribute 'get', ...)
    ({"attention": None}, "attention is None, not an object as python -m wgraph bench --json writes"),
    ({"attention": {"rows": 5}}, "attention.rows is 5, not a list of rows"),
    ({"attention": {"rows": ["x"]}}, "attention row 0 is 'x', not an object"),
    ({"attention": {"rows": [_decode_row(dtype=[1])]}}, "attention row 0: dtype=[1] is not a string"),
    ({"attention": {"rows": [_decode_row(phase="both")]}}, "attention row 0: phase='both' is not one of prefill, "
                                                           "decode"),
    ({"attention": {"rows": [{k: v for k, v in _decode_row().items() if k != "Hq"}]}},
     "attention row 0 (decode f16) has no Hq: every row that ran has them"),
    ({"meta": [], "attention": {"rows": [_decode_row()]}}, "meta is [], not an object"),
    ({"attention": {"torch": "cuda", "rows": [_decode_row()]}}, "attention.torch is 'cuda', not an object"),
    # an integer past the float range: OverflowError from matplotlib, a traceback with exit code 1
    ({"attention": {"rows": [_decode_row(L=10**400)]}}, "attention row 0 (decode f16): L=1000000000"),
])
def test_plot_names_the_field_a_hand_edited_json_got_wrong(tmp_path, capsys, result, message):
    pytest.importorskip("matplotlib", reason="plots need matplotlib, an optional extra (pip install wgraph[plot])")
    from wgraph.bench.plot import main as plot_main

    (tmp_path / "r.json").write_text(json.dumps(result))
    with pytest.raises(SystemExit) as info:
        plot_main([str(tmp_path / "r.json"), str(tmp_path / "o.png")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and "Error" not in err, err
    assert len(err) < 300 and not (tmp_path / "o.png").exists()


def test_plot_of_two_rows_at_one_size_one_with_torch(tmp_path):
    """Two rows of one path and size, one with a torch value and one without, raised TypeError comparing the torch
    value with None as the points were sorted; they are sorted by size alone."""
    pytest.importorskip("matplotlib", reason="plots need matplotlib, an optional extra (pip install wgraph[plot])")
    from wgraph.bench.plot import main as plot_main

    (tmp_path / "r.json").write_text(json.dumps({"attention": {"rows": [_decode_row(torch_gbps=2.0),
                                                                        _decode_row()]}}))
    assert plot_main([str(tmp_path / "r.json"), str(tmp_path / "o.svg")]) == 0


def test_plot_leaves_out_a_row_without_a_measured_time(tmp_path, capsys):
    """bench leaves gbps out of an ok row where no time was measured: alone in its panel, it raised matplotlib's
    'Data cannot be log-scaled because all values are <= 0'; it is left out, as the rows that did not run are."""
    pytest.importorskip("matplotlib", reason="plots need matplotlib, an optional extra (pip install wgraph[plot])")
    from wgraph.bench.plot import main as plot_main

    timeless = {k: v for k, v in _decode_row(dtype="f32").items() if k != "gbps"}
    (tmp_path / "r.json").write_text(json.dumps({"attention": {"rows": [_decode_row(), timeless]}}))
    assert plot_main([str(tmp_path / "r.json"), str(tmp_path / "o.svg")]) == 0
    assert "decode f32" not in (tmp_path / "o.svg").read_text() and "decode f16" in (tmp_path / "o.svg").read_text()
    (tmp_path / "r.json").write_text(json.dumps({"attention": {"rows": [timeless]}}))
    with pytest.raises(SystemExit) as info:
        plot_main([str(tmp_path / "r.json"), str(tmp_path / "o.svg")])
    assert info.value.code == 2 and "no attention rows that ran: nothing to plot" in capsys.readouterr().err


def test_steady_work_reuses_its_buffers_and_waits_only_on_its_stamped_recordings(dev):
    """The timers' warm-up (timing.warm) keeps the GPU busy with copies: after the first call no buffer is made
    (the pair is kept for the device), each recording holds COPIES_A_RECORDING copies, and the host waits for the
    GPU (a readback) only on every STAMP_EVERY-th recording and once at the end: waiting on every recording
    left an H100 idle enough that its clock stayed low (h100-cold-probe-1207.log)."""
    from wgraph.bench import warmup

    warmup.steady_work(dev, 0.0, nbytes=1 << 16)   # makes the pair, runs nothing
    held = warmup._COPY_BUFFERS[dev]
    assert [t.nbytes for t in held] == [1 << 16, 1 << 16]
    words = np.random.default_rng(3).integers(0, 2**32, size=(1 << 14,), dtype=np.uint32)
    dev.write(held[0], words)
    dev.sync()
    before = dev.stats.snapshot()
    trace = warmup.steady_work(dev, 0.3, nbytes=1 << 16)
    d = dev.stats.since(before)
    assert warmup._COPY_BUFFERS[dev] is held
    recordings = d.compute_passes   # one pass a recording (d.submits also counts the last wait's copy)
    assert recordings >= 1 and d.dispatches == recordings * warmup.COPIES_A_RECORDING
    stamped = -(-recordings // warmup.STAMP_EVERY) if dev.caps.has_timestamps else 0
    assert len(trace) == stamped
    assert d.readbacks <= stamped + 1
    np.testing.assert_array_equal(held[1].numpy(), words)
