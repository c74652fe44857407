"""Every ```python block of README.md and docs/*.md runs: the blocks of one file in order, in one namespace
(a later block may use what an earlier one made). A block that is not meant to run is fenced as ```text."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks(path: Path) -> list[str]:
    return BLOCK.findall(path.read_text())


@pytest.mark.parametrize("path", [p for p in DOCS if _blocks(p)], ids=lambda p: p.name)
def test_code_blocks_run(path, dev):
    namespace = {"__name__": f"doc_{path.stem}"}
    for i, code in enumerate(_blocks(path)):
        try:
            exec(compile(code, f"{path.name} block {i + 1}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"{path.name}, python block {i + 1} fails: {type(e).__name__}: {e}") from e


def test_there_are_blocks_to_run():
    assert sum(len(_blocks(p)) for p in DOCS) >= 4
