"""Every example in examples/ runs to its end on the test device: they are what a newcomer copies first, and only
transformer_layer.py (test_explain) and chat.py's offline path (test_smollm2) were run by a test, so the others
could break unseen. quickstart.py and decode_loop.py check their own results against numpy (asserts inside);
the others are checked here on what they print."""

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN_HERE = ["quickstart.py", "attention.py", "decode_loop.py", "kv_cache.py", "llama_generate.py"]


def test_every_example_is_run_by_a_test():
    """A new example gets a row here (or in the tests named in this module's docstring)."""
    elsewhere = {"transformer_layer.py", "chat.py"}
    assert sorted(p.name for p in (ROOT / "examples").glob("*.py")) == sorted(RUN_HERE + list(elsewhere))


@pytest.mark.parametrize("name", RUN_HERE)
def test_example_runs(name, capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", [name])   # as `python examples/NAME` runs it: pytest's own arguments are not its
    runpy.run_path(str(ROOT / "examples" / name), run_name="__main__")
    out = capsys.readouterr().out
    if name == "attention.py":   # the plan table: every row names a planned variant and its workgroups
        rows = [line for line in out.splitlines() if "->" in line]
        assert rows and all(re.search(r"-> \w+_(f32|f16|f16kv)\s+\(\d+, \d+, \d+\)", r) for r in rows), out
    if name == "kv_cache.py":    # 48 replayed steps after a 20-row prompt: the last length is 68
        assert re.search(r"kv_len 68 output \(1, 8, 64\) first values \[", out), out
    if name == "decode_loop.py":
        assert out.rstrip().endswith("ok"), out
    if name == "llama_generate.py":
        assert re.search(r"32 tokens in [\d.]+ ms", out), out
