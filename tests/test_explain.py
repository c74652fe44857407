"""Program.explain() as a newcomer reads it: at most 100 columns, the graph's own names, reasons in words, a
scratch line only when there is scratch; explain(full=True) keeps every binding and count."""

import runpy
from pathlib import Path

import numpy as np

import wgraph as wg

ROOT = Path(__file__).resolve().parents[1]


def test_the_transformer_layer_example_prints_100_columns(capsys):
    runpy.run_path(str(ROOT / "examples" / "transformer_layer.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "kv_append_10" in out and "why: " in out   # the plan table is in it
    too_wide = [line for line in out.splitlines() if len(line) > 100]
    assert not too_wide, too_wide
    assert "fallback." not in out and "device_errors" not in out and "scratch: 0" not in out


def test_full_detail_on_request(dev, rng):
    g = wg.Graph("block")
    x = g.input("x", (3, 64), "f32")
    y = wg.ops.linear(x, g.const("w", rng.standard_normal((32, 64)).astype(np.float32)))   # no bias: a fallback
    q = g.input("q", (1, 8, 32), "f32")
    k, v = g.input("k", (600, 2, 32), "f32"), g.input("v", (600, 2, 32), "f32")
    g.output("y", y)
    g.output("out", wg.ops.attention(q, k, v, causal=True, kv_len=600))   # split-K: scratch buffers
    prog = g.compile(dev)
    short, full = prog.explain(), prog.explain(full=True)
    assert max(map(len, short.splitlines())) <= 100
    linear = prog.rows[0]
    fallbacks = [name for name in linear.reads if name.startswith("fallback.")]
    assert fallbacks and all(f in full for f in fallbacks) and not any(f in short for f in fallbacks)
    for row in prog.rows:   # every reason whole in full, and in the short view's words (wrapped)
        assert row.reason in full
        assert " ".join(row.reason.split()) in " ".join(short.split())
    m = prog.memory
    assert m.scratch_requests == 2
    assert f"scratch: {m.scratch_requests} requests in {m.scratch_buffers} shared buffers" in full
    assert f"{m.scratch_requests} temporary buffers of split passes share {m.scratch_buffers}" in " ".join(short.split())
    assert "uniform B" in full and "uniform B" not in short


def test_no_scratch_line_without_scratch(dev):
    g = wg.Graph("tiny")
    g.output("y", wg.ops.scale(g.input("x", (4,), "f32"), 2.0))
    prog = g.compile(dev)
    assert prog.memory.scratch_requests == 0
    assert "temporary" not in prog.explain() and "scratch: 0 requests" in prog.explain(full=True)


def test_memory_line_names_the_outputs_it_counts(dev):
    """The short memory line said "inputs, weights and state 48 B" for an f32[4] input, an f32[4] weight and an
    f32[4] output: 16 + 16 bytes of inputs and weights, the other 16 the output's own buffer, which it counts."""
    g = wg.Graph("tiny")
    x = g.input("x", (4,), "f32")
    g.output("y", wg.ops.mul(x, g.const("w", np.ones(4, np.float32))))
    words = " ".join(g.compile(dev).explain().split())
    assert "inputs, outputs, weights and state 48 B;" in words   # 3 buffers of 4 f32
