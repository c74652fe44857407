"""benchmarks/revisions_ab.py: the trees it prepares are the revisions' own files (git's), its table takes the
medians and ratios of what the bench wrote, and a run under a prepared tree runs that tree's wgraph."""

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("revisions_ab", ROOT / "benchmarks" / "revisions_ab.py")
rab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rab)


needs_git = pytest.mark.skipif(subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode,
                               reason="prepare archives revisions of the git checkout; this tree is not one")


def _git(*argv) -> str:
    return subprocess.run(["git", *argv], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def _model(tokens_per_s, linear_us, extra=None):
    row = {"model": "m", "dtype": "f16", "status": "ok", "tokens_per_s": tokens_per_s, "steps": 8,
           "profile": {"status": "ok", "by_op": [{"name": "linear", "gpu_us": linear_us, "nodes": 3}]}}
    return {"meta": {"adapter": "x"}, "settings": {"quick": True}, "model": {"rows": [dict(row, **(extra or {}))]},
            "elapsed_s": 1.0}


def test_row_numbers_take_the_metrics_and_the_profile():
    got = rab.row_numbers(_model(100.0, 50.0, {"ok_flag": True, "gpu_us": 7}))
    assert got == {("model", "m f16", "tokens_per_s"): 100.0, ("model", "m f16", "gpu_us"): 7.0,
                   ("model", "m f16", "linear us"): 50.0}   # steps is no metric, meta / settings no section


def test_row_numbers_take_the_lists_of_rows_a_section_holds():
    """The quant section keeps its rows under `gemv` and `models`: each list is a part named section.key."""
    result = {"quant": {"copy": {"gbps": 4000.0},
                        "gemv": [{"ggml_type": "Q4_0", "matrix": "lm_head", "variant": "v", "rows": 1, "gpu_us": 9.5}],
                        "models": [{"model": "wgraph Q4_0", "tokens_per_s": 990.0, "dispatches_per_token": 85}],
                        "bytes": "GEMV: blocks once"}}
    assert rab.row_numbers(result) == {("quant.gemv", "Q4_0 lm_head v 1", "gpu_us"): 9.5,
                                       ("quant.models", "wgraph Q4_0", "tokens_per_s"): 990.0,
                                       ("quant.models", "wgraph Q4_0", "dispatches_per_token"): 85.0}


def test_rows_that_differ_in_their_shape_keep_their_own_numbers():
    """Attention rows of one dtype and variant at two lengths (the quick grid's decode L=256 and L=1024), and a gemm
    variant forced with its own K split beside it unsplit: each row keeps its numbers (one name for both kept the
    last row's gbps for the two)."""
    att = [{"phase": "decode", "S": 1, "L": n, "Hq": 8, "Hkv": 2, "D": 64, "dtype": "f16", "causal": True,
            "variant": "decode_splitk_g4_f16", "status": "ok", "gbps": g} for n, g in ((256, 0.11), (1024, 0.17))]
    gemm = [{"rows": 37, "out_features": 3072, "in_features": 576, "weight_dtype": "f32", "variant": "g",
             "config": c, "status": "ok", "tflops": t} for c, t in (("g split_k=own", 2.0), ("g split_k=1", 1.0))]
    got = rab.row_numbers({"attention": {"rows": att}, "gemm": {"rows": gemm}})
    assert sorted(v for (s, _, m), v in got.items() if s == "attention" and m == "gbps") == [0.11, 0.17]
    assert sorted(v for (s, _, m), v in got.items() if s == "gemm" and m == "tflops") == [1.0, 2.0]
    # rows with nothing that tells them apart still keep their own numbers
    same = [{"model": "m", "tokens_per_s": 1.0}, {"model": "m", "tokens_per_s": 2.0}]
    assert sorted(rab.row_numbers({"model": {"rows": same}}).values()) == [1.0, 2.0]


def test_a_planned_row_is_one_row_whatever_variant_each_revision_planned():
    """A planner A/B: the same gemm call planned as 64x128 by one revision and 128x128 by the next is one row of
    the table (named without its variant), with both revisions' numbers; a forced variant keeps its name."""
    def result(variant, tflops):
        return {"gemm": {"rows": [
            {"rows": 512, "out_features": 2048, "in_features": 8192, "weight_dtype": "f16", "variant": variant,
             "config": "planned", "planned": True, "status": "ok", "tflops": tflops},
            {"rows": 512, "out_features": 2048, "in_features": 8192, "weight_dtype": "f16", "variant": variant,
             "config": f"{variant} split_k=1", "planned": False, "status": "ok", "tflops": 1.0}]}}
    text = rab.table({"old": [result("linear_gemm_64x128_f16w", 28.8)],
                      "new": [result("linear_gemm_128x128_f16w", 35.4)]})
    planned = [line for line in text.splitlines() if "planned" in line and "tflops" in line]
    assert len(planned) == 1 and "28.8" in planned[0] and "35.4" in planned[0] and "(1.229x)" in planned[0]
    assert "2 numbers not in every revision's results are left out" in text  # the forced rows differ by variant


def test_table_medians_and_ratios():
    runs = {"0-main": [_model(100.0, 50.0), _model(90.0, 60.0), _model(110.0, 40.0)],
            "1-new": [_model(120.0, 30.0), _model(130.0, 35.0), _model(125.0, 20.0, {"gbps": 3.0})]}
    lines = rab.table(runs).splitlines()
    tok = next(line for line in lines if "tokens_per_s" in line).split()
    assert tok[-3:] == ["100", "125", "(1.250x)"]          # medians 100 and 125
    lin = next(line for line in lines if "linear us" in line).split()
    assert lin[-3:] == ["50", "30", "(0.600x)"]
    assert lines[-1] == "(1 numbers not in every revision's results are left out)"   # gbps of one round


@needs_git
def test_prepare_archives_the_revision(tmp_path):
    head = _git("rev-parse", "HEAD").strip()
    (tmp_path / "0-stale" / "wgraph").mkdir(parents=True)   # an earlier prepare's tree: gone after this one
    manifest = rab.prepare(["HEAD"], tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0-HEAD", "manifest.json"]
    assert manifest == [{"name": "0-HEAD", "revision": "HEAD", "commit": head, "folder": "0-HEAD"}]
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest
    tree = tmp_path / "0-HEAD" / "wgraph"
    assert (tree / "__init__.py").read_text() == _git("show", "HEAD:wgraph/__init__.py")
    assert sorted(p.relative_to(tree.parent).as_posix() for p in tree.rglob("*") if p.is_file()) == \
        sorted(_git("ls-tree", "-r", "--name-only", "HEAD", "wgraph").split())
    with pytest.raises(subprocess.CalledProcessError):
        rab.prepare(["no-such-revision-here"], tmp_path)


@needs_git
def test_run_uses_each_tree(tmp_path):
    """A prepared tree whose bench says it is the tree's: the run executes the tree's wgraph, not the checkout's."""
    rab.prepare(["HEAD"], tmp_path / "trees")
    main = tmp_path / "trees" / "0-HEAD" / "wgraph" / "bench" / "__init__.py"
    marker = "WGRAPH_TREE_MARKER = True\n"
    main.write_text(main.read_text() + marker)
    probe = tmp_path / "trees" / "0-HEAD" / "wgraph" / "__main__.py"
    probe.write_text("import json, sys\nimport wgraph.bench as b\n"
                     "out = sys.argv[sys.argv.index('--json') + 1]\n"
                     "json.dump({'model': {'rows': [{'model': 'probe', 'tokens_per_s': "
                     "float(getattr(b, 'WGRAPH_TREE_MARKER', False))}]}}, open(out, 'w'))\n")
    done = rab.run(["--only", "model"], 2, 0.0, tmp_path / "out", folder=tmp_path / "trees")
    assert [(d["name"], d["round"], d["rc"]) for d in done] == [("0-HEAD", 0, 0), ("0-HEAD", 1, 0)]
    results = json.loads((tmp_path / "out" / "0-HEAD_r1.json").read_text())
    assert results["model"]["rows"][0]["tokens_per_s"] == 1.0


def test_a_run_takes_the_revisions_named_in_prepared_order():
    """--revisions picks prepared trees by the revision as prepared or by folder name, in the manifest's order
    whatever order they are named in (the first is the baseline), and refuses a name that was not prepared."""
    manifest = [{"name": f"{i}-{r}", "revision": r, "commit": "c", "folder": f"{i}-{r}"}
                for i, r in enumerate(("main", "fold-order", "gemm-raw-w"))]
    assert rab.chosen(manifest, None) == manifest
    assert [r["revision"] for r in rab.chosen(manifest, "gemm-raw-w, 0-main")] == ["main", "gemm-raw-w"]
    with pytest.raises(SystemExit, match="f16-stage not among the prepared main, fold-order, gemm-raw-w"):
        rab.chosen(manifest, "main,f16-stage")
    with pytest.raises(SystemExit, match="no name"):
        rab.chosen(manifest, " , ")
