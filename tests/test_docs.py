"""Every ```python block of README.md and docs/*.md runs: the blocks of one file in order, in one namespace
(a later block may use what an earlier one made). A block that is not meant to run is fenced as ```text."""

import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks(path: Path) -> list[str]:
    return BLOCK.findall(path.read_text())


# Blocks that make f16 tensors, by (page, block number), and why: on a device without shader-f16 each is left out
# (with a warning naming it) and the page's other blocks run; the page keeps its example as it is meant.
F16_BLOCKS = {("ops.md", 2): "its decode layer's weights and KV cache are f16"}


@pytest.mark.parametrize("path", [p for p in DOCS if _blocks(p)], ids=lambda p: p.name)
def test_code_blocks_run(path, dev):
    namespace = {"__name__": f"doc_{path.stem}"}
    for i, code in enumerate(_blocks(path)):
        why = F16_BLOCKS.get((path.name, i + 1))
        assert why is None or "float16" in code, f"{path.name} block {i + 1} is listed in F16_BLOCKS but makes no f16"
        if why and not dev.caps.has_f16:
            warnings.warn(f"{path.name} python block {i + 1} not run: {why}, which needs the shader-f16 feature "
                          f"{dev.caps.adapter_name!r} lacks")
            continue
        try:
            exec(compile(code, f"{path.name} block {i + 1}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"{path.name}, python block {i + 1} fails: {type(e).__name__}: {e}") from e


def test_there_are_blocks_to_run():
    assert sum(len(_blocks(p)) for p in DOCS) >= 4


RESULT_FILE = re.compile(r"(?<!\$OUT/)\b((?:h100|h200|lavapipe)[\w.-]*\.(?:log|json|svg|png))\b")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_cited_result_files_exist(path):
    """A benchmark log or JSON a page cites as evidence (`h200-model-single.log`) is a committed file of
    benchmarks/results/ (a command's `> $OUT/name.log` is an output name, not a citation)."""
    results = {p.name for p in (ROOT / "benchmarks" / "results").iterdir()}
    missing = sorted(set(RESULT_FILE.findall(path.read_text())) - results)
    assert not missing, f"{path.name} cites files not in benchmarks/results/: {missing}"
