"""A/B of source revisions on one GPU in one run: a `python -m wgraph bench` section under each revision's wgraph
(its own shaders, registry and planner), the revisions taking turns round after round (a GPU's clocks drift over
minutes: compare numbers of one run only), then each row's numbers per revision beside the first revision's.

Here, in the git checkout:
    python benchmarks/revisions_ab.py prepare main my-branch [more revisions]
        `git archive` of each revision's wgraph/ into .ab/revisions/<i>-<name>/ (.ab is git-ignored: name it in
        the device run's `carry`) and .ab/revisions/manifest.json (name, revision, commit, folder).
On the GPU machine, from the project root:
    python benchmarks/revisions_ab.py run [--rounds 2] [--warm-s 3] [--revisions main,my-branch] -- --only model ...
        for each round, each revision in order: the bench from its folder, `$OUT/<i>-<name>_r<k>.json` and its
        output beside it (.log); then the table. --warm-s: seconds of torch matmuls first (when torch is there),
        so the first revision does not run on a cold GPU.
    python benchmarks/revisions_ab.py table DIR: the table again from the JSONs in DIR.

The table takes every section of the bench JSON that has `rows` (model, gemv, batched_model, ...), and the lists of
rows a section holds under other keys (quant's `gemv` and `models`, named quant.gemv, quant.models): a row
is named by its text fields (a planned row without its variant, which a planner change changes), and its numbers
are the ones in METRICS it has (and, with --profile, each op's stamped GPU us); each is the median over the
rounds, then the ratio to the first revision's."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / ".ab" / "revisions"
# the numbers compared, where a row has them (bench JSON field names)
METRICS = ("tokens_per_s", "ms_per_token", "gpu_ms_per_token", "host_ms_per_token", "fraction_of_copy_bandwidth",
           "dispatches_per_token", "gpu_us", "gbps", "tflops", "fraction_of_copy", "fraction_of_fma_peak")
# attention rows are told apart by phase, S, L, heads and D, gemm and gemv rows by config (a variant forced with its
# own K split, or unsplit, names the same kernel): a name two rows share would keep one row's numbers for both
NAME_FIELDS = ("model", "shape", "call", "name", "kind", "phase", "S", "L", "Hq", "Hkv", "D", "format", "dtype",
               "weight_dtype", "ggml_type", "matrix", "variant", "config", "B", "batch", "rows", "out_features",
               "in_features")


def prepare(revisions: list[str], folder: Path = FOLDER) -> list[dict]:
    """Each revision's wgraph/ (git archive) in folder/<i>-<name>; returns and writes the manifest. The trees of an
    earlier prepare are removed first: a script that walks folder/*/ ran two stale revisions beside the two asked
    for (a device run's 220 s, 2026-12-07)."""
    if not revisions:
        raise SystemExit("prepare: name at least one revision (e.g. main my-branch)")
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        if old.is_dir() and re.match(r"\d+-", old.name):   # a prepared tree, never anything else there
            shutil.rmtree(old)
    manifest = []
    for i, rev in enumerate(revisions):
        commit = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, check=True,
                                capture_output=True, text=True).stdout.strip()
        tree = folder / f"{i}-{re.sub(r'[^A-Za-z0-9._-]+', '_', rev)}"
        shutil.rmtree(tree, ignore_errors=True)
        raw = subprocess.run(["git", "archive", "--format=tar", commit, "wgraph"], cwd=ROOT, check=True,
                             capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(raw)) as tar:  # our own repository's files: the data filter where
            tar.extractall(tree, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))  # it exists
        manifest.append({"name": tree.name, "revision": rev, "commit": commit, "folder": tree.name})
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _warm(seconds: float) -> None:
    if seconds <= 0:
        return
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        return
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    end = time.time() + seconds
    while time.time() < end:
        (a @ a).sum().item()


def chosen(manifest: list[dict], names: str | None) -> list[dict]:
    """The prepared revisions named in `names` (comma-separated, each as prepared, `main`, or as its folder,
    `0-main`; None: all), in the manifest's order, so one prepare serves several runs (the attention candidates on
    one bench section, the GEMM's on another)."""
    if names is None:
        return manifest
    wanted = {n.strip() for n in names.split(",") if n.strip()}
    known = {rev["revision"] for rev in manifest} | {rev["name"] for rev in manifest}
    if not wanted or wanted - known:
        raise SystemExit(f"--revisions {names!r}: {', '.join(sorted(wanted - known)) or 'no name'} not among the "
                         f"prepared {', '.join(rev['revision'] for rev in manifest)}")
    return [rev for rev in manifest if rev["revision"] in wanted or rev["name"] in wanted]


def run(bench_args: list[str], rounds: int, warm_s: float, out: Path, folder: Path = FOLDER,
        names: str | None = None) -> list[dict]:
    """The bench under each prepared revision (those `names` picks), `rounds` times in turn; returns [{name, round,
    json, rc, seconds}]."""
    manifest = chosen(json.loads((folder / "manifest.json").read_text()), names)
    out.mkdir(parents=True, exist_ok=True)
    _warm(warm_s)
    done = []
    for k in range(rounds):
        for rev in manifest:
            tree = folder / rev["folder"]
            stem = out / f"{rev['name']}_r{k}"
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]))
            t0 = time.perf_counter()
            with open(f"{stem}.log", "w") as log:
                rc = subprocess.run([sys.executable, "-m", "wgraph", "bench", *bench_args, "--json", f"{stem}.json"],
                                    cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
            seconds = time.perf_counter() - t0
            print(f"round {k} {rev['name']} ({rev['commit'][:10]}): rc {rc}, {seconds:.1f} s", flush=True)
            done.append({"name": rev["name"], "round": k, "json": f"{stem}.json", "rc": rc, "seconds": seconds})
    return done


def _row_name(row: dict) -> str:
    """The row's text fields; a planned row (`planned` true) without its variant, which is what a planner A/B
    changes: the same call under each revision's plan is one row."""
    fields = [f for f in NAME_FIELDS if not (f == "variant" and row.get("planned") is True)]
    return " ".join(f"{row[f]}" for f in fields if isinstance(row.get(f), (str, int)) and
                    not isinstance(row.get(f), bool))


def row_numbers(result: dict) -> dict[tuple[str, str, str], float]:
    """(section, row name, metric) -> value for one bench JSON: the METRICS of every row of every section with
    rows, and each op's stamped GPU us of a profiled row."""
    got = {}
    for section, body in result.items():
        if not isinstance(body, dict):
            continue
        # a section's `rows`, or (the quant section) each list of row dicts it holds under another key
        lists = {section: body["rows"]} if isinstance(body.get("rows"), list) else {
            f"{section}.{key}": v for key, v in body.items() if isinstance(v, list) and v and isinstance(v[0], dict)}
        for part, rows in lists.items():
            got.update(_part_numbers(part, rows))
    return got


def _part_numbers(section: str, rows: list) -> dict[tuple[str, str, str], float]:
    got, names = {}, set()
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            continue
        name = _row_name(row) or f"row {i}"
        if name in names:  # still the same name: its own, never the earlier row's numbers
            name = f"{name} (row {i})"
        names.add(name)
        for m in METRICS:
            v = row.get(m)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                got[(section, name, m)] = float(v)
        for op in (row.get("profile") or {}).get("by_op", ()):
            got[(section, name, f"{op['name']} us")] = float(op["gpu_us"])
    return got


def table(runs: dict[str, list[dict]]) -> str:
    """runs: revision name (in order, the first the reference) -> its rounds' bench JSONs. One line per
    (section, row, metric): the median over rounds of each revision, and each later one's ratio to the first."""
    names = list(runs)
    medians = {}
    for name, results in runs.items():
        values: dict[tuple, list[float]] = {}
        for result in results:
            for key, v in row_numbers(result).items():
                values.setdefault(key, []).append(v)
        medians[name] = {key: statistics.median(vs) for key, vs in values.items()}
    keys = [k for k in medians[names[0]] if all(k in medians[n] for n in names[1:])]
    lines = [f"{'section':14} {'row':44} {'metric':28} " + " ".join(f"{n[:22]:>22}" for n in names)]
    for key in keys:
        section, row, metric = key
        first = medians[names[0]][key]
        cells = [f"{first:22.4g}"]
        for n in names[1:]:
            v = medians[n][key]
            ratio = f"({v / first:.3f}x)" if first else "(-)"
            cells.append(f"{v:12.4g} {ratio:>9}")
        lines.append(f"{section[:14]:14} {row[:44]:44} {metric[:28]:28} " + " ".join(cells))
    missing = sorted({k for n in names for k in medians[n]} - set(keys))
    if missing:
        lines.append(f"({len(missing)} numbers not in every revision's results are left out)")
    return "\n".join(lines)


def _load(out: Path, manifest: list[dict]) -> dict[str, list[dict]]:
    runs = {}
    for rev in manifest:
        files = sorted(out.glob(f"{rev['name']}_r*.json"))
        runs[rev["name"]] = [json.loads(f.read_text()) for f in files]
        if not files:
            raise SystemExit(f"no results for {rev['name']} in {out} (did its bench fail? see its .log)")
    return runs


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    pp = sub.add_parser("prepare", help="git archive each revision's wgraph/ into .ab/revisions/")
    pp.add_argument("revisions", nargs="+")
    pr = sub.add_parser("run", help="the bench under each prepared revision, in turns; then the table")
    pr.add_argument("--rounds", type=int, default=2, help="turns of every revision (default: 2)")
    pr.add_argument("--warm-s", type=float, default=3.0, help="seconds of torch matmuls first (default: 3)")
    pr.add_argument("--revisions", metavar="NAMES", help="comma-separated names of the prepared revisions to run "
                    "(default: all), in the order they were prepared: the first is the table's baseline")
    pr.add_argument("bench_args", nargs=argparse.REMAINDER, help="-- then the bench's arguments")
    pt = sub.add_parser("table", help="the table from a run's folder of JSONs")
    pt.add_argument("folder", type=Path)
    a = p.parse_args(argv)
    if a.what == "prepare":
        for rev in prepare(a.revisions):
            print(f"{rev['folder']}: {rev['revision']} = {rev['commit']}")
        return 0
    if a.what == "table":  # the revisions whose JSONs the folder holds (<i>-<name>_r<k>.json), in their order
        out = a.folder
        names = sorted({f.name.rsplit("_r", 1)[0] for f in out.glob("*_r*.json")})
    else:
        out = Path(os.environ.get("OUT", "/tmp/revisions_ab"))
        bench_args = a.bench_args[1:] if a.bench_args[:1] == ["--"] else a.bench_args
        if a.rounds < 1:
            raise SystemExit(f"--rounds {a.rounds}: at least 1")
        names = list(dict.fromkeys(d["name"] for d in run(bench_args, a.rounds, a.warm_s, out, names=a.revisions)))
    print(table(_load(out, [{"name": n} for n in names])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
