"""Dense ops against float64 numpy: linear (f32 and f16 weights, with and without bias), rmsnorm, rope,
reshape views. Bound: the kernel's error is at most 2x that of the same math done in f32 numpy, plus atol."""

import numpy as np
import pytest

import wgraph as wg


def _within(got, exact, same_math_f32, atol=1e-6, factor=2.0):
    ref_err = np.abs(same_math_f32.astype(np.float64) - exact)
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= factor * ref_err + atol), float(np.max(err - factor * ref_err))


@pytest.mark.parametrize("m,n,k,bias", [(1, 24, 40, True), (5, 17, 33, False), (33, 48, 64, True)])
def test_linear_f32(dev, rng, m, n, k, bias):
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    got = wg.ops.linear(dev.tensor(x), dev.tensor(w), dev.tensor(b) if bias else None).numpy()
    exact = x.astype(np.float64) @ w.astype(np.float64).T + (b if bias else 0.0)
    f32 = x @ w.T + (b if bias else np.float32(0))
    assert got.shape == (m, n) and got.dtype == np.float32
    _within(got, exact, f32, atol=1e-5 * np.sqrt(k))


def test_linear_f16_weights_and_batch_dims(dev, rng):
    if not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    x = rng.standard_normal((2, 3, 40)).astype(np.float32)
    w = rng.standard_normal((20, 40)).astype(np.float16)
    b = rng.standard_normal(20).astype(np.float32)
    got = wg.ops.linear(dev.tensor(x), dev.tensor(w), dev.tensor(b)).numpy()
    exact = x.astype(np.float64) @ w.astype(np.float64).T + b   # the f16 weights are the exact operand
    f32 = x @ w.astype(np.float32).T + b
    assert got.shape == (2, 3, 20)
    _within(got, exact, f32, atol=1e-4)


def test_linear_errors(dev):
    x = dev.tensor(np.ones((2, 8), np.float32))
    with pytest.raises(wg.ShapeError, match=r"x has 8 input features .* W \(4, 6\) takes 6"):
        wg.ops.linear(x, dev.tensor(np.ones((4, 6), np.float32)))
    with pytest.raises(wg.ShapeError, match=r"bias must be \(4,\)"):
        wg.ops.linear(x, dev.tensor(np.ones((4, 8), np.float32)), dev.tensor(np.ones(3, np.float32)))
    with pytest.raises(wg.DtypeError, match="linear has no kernel for .*u32"):
        wg.ops.linear(x, dev.tensor(np.ones((4, 8), np.uint32)))


@pytest.mark.parametrize("rows,dim", [(1, 64), (7, 100), (3, 513)])
def test_rmsnorm_f32(dev, rng, rows, dim):
    x = (rng.standard_normal((rows, dim)) * 3).astype(np.float32)
    w = rng.standard_normal(dim).astype(np.float32)
    got = wg.ops.rmsnorm(dev.tensor(x), dev.tensor(w), eps=1e-5).numpy()
    x64 = x.astype(np.float64)
    exact = x64 / np.sqrt(np.mean(x64 * x64, -1, keepdims=True) + 1e-5) * w
    f32 = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + np.float32(1e-5)) * w
    _within(got, exact, f32, atol=2e-6)


def test_rmsnorm_f16(dev, rng):
    if not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    x = rng.standard_normal((4, 96)).astype(np.float16)
    w = rng.standard_normal(96).astype(np.float16)
    got = wg.ops.rmsnorm(dev.tensor(x), dev.tensor(w)).numpy()
    x64 = x.astype(np.float64)
    exact = x64 / np.sqrt(np.mean(x64 * x64, -1, keepdims=True) + 1e-6) * w
    # f32 math, one rounding to f16 at the end: within one f16 ulp (plus the reduction's f32 error)
    assert np.all(np.abs(got - exact) <= np.abs(exact) * 2.0**-10 + 1e-3)


def _rope_ref(x, cos, sin, pos):
    x = x.astype(np.float64)
    half = x.shape[-1] // 2
    c = cos[pos:pos + x.shape[0]].astype(np.float64)[:, None, :]
    s = sin[pos:pos + x.shape[0]].astype(np.float64)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, b * c + a * s], -1)


def test_rope_static_and_gpu_position(dev, rng):
    cos, sin = wg.ops.rope_tables(32, 16)
    x = rng.standard_normal((5, 3, 16)).astype(np.float32)
    tc, ts, tx = dev.tensor(cos), dev.tensor(sin), dev.tensor(x)
    exact = _rope_ref(x, cos, sin, 4)
    got = wg.ops.rope(tx, tc, ts, pos=4).numpy()
    assert np.all(np.abs(got - exact) <= 4 * np.finfo(np.float32).eps * (np.abs(x).max() + 1))
    pos = dev.tensor(np.array([3], np.uint32))
    got_gpu = wg.ops.rope(tx, tc, ts, pos=pos, pos_offset=1).numpy()
    assert got_gpu.tobytes() == got.tobytes()
    dev.write(pos, np.array([30], np.uint32))  # rows at positions 31..35: past the 32-row table -> zeros
    beyond = wg.ops.rope(tx, tc, ts, pos=pos, pos_offset=1)
    # reported on the device error flag (docs/errors.md): the first row to report wins, which on a parallel
    # GPU may be any of the four out of range (positions 32..35)
    with pytest.raises(wg.GpuValueError, match=r"rope: the position of a row .* was 3[2-5]; it must be < 32"):
        dev.check_errors()
    beyond = beyond.numpy()
    np.testing.assert_allclose(beyond[0], _rope_ref(x[:1], cos, sin, 31)[0], atol=1e-5)
    assert np.all(beyond[1:] == 0)


def _rope_options_ref(x, pos, base, rotary_dim, interleaved):
    """float64 RoPE written from the definitions: rotate-half (GPT-NeoX, Llama) or interleaved (GPT-J) pairs over
    the first rotary_dim dims, frequencies base ** (-2i / rotary_dim), the rest passed through."""
    x = x.astype(np.float64)
    rd = rotary_dim
    inv = base ** (-np.arange(0, rd, 2, dtype=np.float64) / rd)
    ang = (pos + np.arange(x.shape[0], dtype=np.float64))[:, None, None] * inv[None, None, :]
    c, s = np.cos(ang), np.sin(ang)
    out = x.copy()
    if interleaved:
        a, b = x[..., 0:rd:2], x[..., 1:rd:2]
        out[..., 0:rd:2], out[..., 1:rd:2] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., :rd // 2], x[..., rd // 2:rd]
        out[..., :rd // 2], out[..., rd // 2:rd] = a * c - b * s, b * c + a * s
    return out


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("rotary_dim,interleaved", [(16, True), (8, False), (8, True), (2, False), (12, True)])
def test_rope_rotary_dim_and_interleaved(dev, rng, dtype, rotary_dim, interleaved):
    if dtype == "f16" and not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    base, pos = 500.0, 5
    cos, sin = wg.ops.rope_tables(16, rotary_dim, base)
    x = rng.standard_normal((3, 3, 16)).astype(np.float32)  # 3 x 3 x 16: bf16 words straddle no head, rows odd
    table_dt = "f16" if dtype == "f16" else "f32"
    tx = dev.tensor(x, dtype)
    x_in = tx.numpy().astype(np.float64)  # the values as stored (rounded for f16 / bf16)
    got = wg.ops.rope(tx, dev.tensor(cos, table_dt), dev.tensor(sin, table_dt), pos=pos, rotary_dim=rotary_dim,
                      interleaved=interleaved)
    assert got.dtype == dtype
    got = got.numpy().astype(np.float64)
    exact = _rope_options_ref(x_in, pos, base, rotary_dim, interleaved)
    # f32: table rounding and a product or two; f16 / bf16: also the tables' and the result's rounding
    tol = {"f32": 4 * np.finfo(np.float32).eps, "f16": 2.0**-9, "bf16": 2.0**-7}[dtype] * (np.abs(x_in).max() + 1)
    assert np.all(np.abs(got - exact) <= tol), float(np.abs(got - exact).max())
    assert np.array_equal(got[..., rotary_dim:], x_in[..., rotary_dim:])  # passed through exactly
    posbuf = dev.tensor(np.array([pos - 2], np.uint32))  # the same rows from a GPU position
    again = wg.ops.rope(tx, dev.tensor(cos, table_dt), dev.tensor(sin, table_dt), pos=posbuf, pos_offset=2,
                        rotary_dim=rotary_dim, interleaved=interleaved)
    assert np.array_equal(again.numpy().astype(np.float64), got)


def test_rope_option_errors(dev):
    x = dev.tensor(np.ones((2, 2, 8), np.float32))
    cos, sin = (dev.tensor(t) for t in wg.ops.rope_tables(8, 4))
    with pytest.raises(wg.ShapeError, match=r"rope: rotary_dim 5 must be even and in \[2, head_dim 8\]"):
        wg.ops.rope(x, cos, sin, rotary_dim=5)
    with pytest.raises(wg.ShapeError, match=r"rotary_dim 10 must be even"):
        wg.ops.rope(x, cos, sin, rotary_dim=10)
    with pytest.raises(wg.ShapeError, match=r"cos table must be \[max_pos, 4\] for rotary_dim 8"):
        wg.ops.rope(x, cos, sin)
    for bad in (4.0, "4", True):
        with pytest.raises(wg.ArgumentError, match=r"rope: rotary_dim=.* must be an integer in \[0, 4294967295\] or None"):
            wg.ops.rope(x, cos, sin, rotary_dim=bad)
    with pytest.raises(wg.ArgumentError, match="rope: interleaved=1 must be True or False"):
        wg.ops.rope(x, cos, sin, rotary_dim=4, interleaved=1)
    xb = dev.tensor(np.ones((2, 2, 8), np.float32), "bf16")
    with pytest.raises(wg.DtypeError, match="rope: cos table dtype bf16; x of bf16 takes f32 tables"):
        wg.ops.rope(xb, dev.tensor(np.ones((8, 4), np.float32), "bf16"), dev.tensor(np.ones((8, 4), np.float32), "bf16"))


def test_graph_file_params_of_rope_and_linear_are_checked_as_their_calls(dev, rng):
    """A graph file's params reach infer unchecked by rope() / linear(): rotary_dim "4" raised a bare TypeError
    (wrapped in a GraphError), 4.0 and True passed or were a ShapeError, and linear's variant 5 a PlanError; they
    are now the calls' ArgumentErrors. The unedited file still runs: rows 0 and 1 at positions 1 and 2."""
    import json

    g = wg.Graph("file")
    cos, sin = wg.ops.rope_tables(4, 4)
    x = g.input("x", (2, 1, 6))
    g.output("y", wg.ops.rope(x, g.input("cos", (4, 2)), g.input("sin", (4, 2)), pos=1, rotary_dim=4))
    g.output("l", wg.ops.linear(g.input("a", (2, 8)), g.input("w", (3, 8))))
    data = json.loads(g.to_json())
    fields = {n["op"]: n["params"]["fields"] for n in data["nodes"] if n["op"] in ("rope", "linear")}
    cases = [("rotary_dim", "rope", bad, "an integer in") for bad in ("4", 4.0, True)]
    cases.append(("variant", "linear", 5, "a str"))
    for field, op, bad, rule in cases:
        edited = json.loads(json.dumps(data))
        next(n for n in edited["nodes"] if n["op"] == op)["params"]["fields"][field] = bad
        with pytest.raises(wg.ArgumentError, match=rf"\({op}\): {op}: {field}={bad!r} must be {rule}"):
            wg.Graph.from_json(json.dumps(edited))
    assert fields["rope"]["rotary_dim"] == 4
    xs = rng.standard_normal((2, 1, 6)).astype(np.float32)
    out = wg.Graph.from_json(json.dumps(data)).compile(dev).run(
        x=xs, cos=cos, sin=sin, a=np.ones((2, 8), np.float32), w=np.ones((3, 8), np.float32))
    x64, inv = xs.astype(np.float64), 10000.0 ** -np.array([0.0, 0.5])
    for r in range(2):
        c, s = np.cos((r + 1) * inv), np.sin((r + 1) * inv)
        want = np.concatenate([x64[r, 0, :2] * c - x64[r, 0, 2:4] * s, x64[r, 0, 2:4] * c + x64[r, 0, :2] * s,
                               x64[r, 0, 4:]])
        assert np.allclose(out["y"].numpy()[r, 0], want, rtol=1e-6, atol=1e-6)
    assert out["l"].numpy().tolist() == [[8.0] * 3] * 2


def test_rope_errors(dev):
    cos, sin = wg.ops.rope_tables(8, 16)
    x = dev.tensor(np.ones((4, 2, 16), np.float32))
    with pytest.raises(wg.LimitError, match=r"positions 6..9 \(pos \+ pos_offset \+ row\) exceed the table's 8 rows"):
        wg.ops.rope(x, dev.tensor(cos), dev.tensor(sin), pos=6)
    with pytest.raises(wg.ShapeError, match=r"cos table must be \[max_pos, 8\]"):
        wg.ops.rope(x, dev.tensor(np.ones((8, 4), np.float32)), dev.tensor(sin))
    with pytest.raises(wg.ArgumentError, match=r"rope: pos=-3 must be an integer in \[0, 4294967295\] or a u32"):
        wg.ops.rope(x, dev.tensor(cos), dev.tensor(sin), pos=-3, pos_offset=5)   # not position 2
    with pytest.raises(wg.ArgumentError, match=r"rope: pos_offset=-3 must be an integer in \[0, "):
        wg.ops.rope(x, dev.tensor(cos), dev.tensor(sin), pos=2, pos_offset=-3)


def test_reshape_op_is_a_view(dev):
    x = dev.tensor(np.arange(24, dtype=np.float32))
    v = wg.ops.reshape(x, 2, -1, 3)
    assert v.shape == (2, 4, 3) and v.buffer is x.buffer
    with pytest.raises(wg.ShapeError, match=r"reshape: cannot view \(24,\)"):
        wg.ops.reshape(x, (5, -1))
