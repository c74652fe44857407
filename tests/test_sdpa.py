"""wg.ops.sdpa against the float64 numpy reference with torch's semantics (tests/sdpa_reference.py) and, where
torch is importable, against torch's scaled_dot_product_attention on the CPU (an optional test dependency)."""

import numpy as np
import pytest

import wgraph as wg
from kernel_support import skip_unless_f16
from sdpa_reference import sdpa_reference, sdpa_tolerance_check

def _mask(rng, shape, kind):
    if kind == "bool":
        return rng.random(shape) > 0.3
    if kind == "-inf":
        return np.where(rng.random(shape) > 0.3, 0.0, -np.inf).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


# name, q shape, k/v shape, options, mask (shape, kind) or None
CASES = [
    ("one-batch-axis", (2, 4, 5, 16), (2, 4, 7, 16), {}, None),
    ("two-batch-axes", (2, 3, 2, 4, 8), (2, 3, 2, 6, 8), {}, None),
    ("no-batch-axis", (2, 5, 16), (2, 5, 16), {"scale": 0.7}, None),
    ("two-d", (6, 16), (9, 16), {}, None),
    ("causal-L<S", (2, 4, 5, 16), (2, 4, 9, 16), {"is_causal": True}, None),
    ("causal-L>S", (1, 2, 9, 16), (1, 2, 4, 16), {"is_causal": True}, None),
    ("causal-decode", (3, 4, 1, 32), (3, 4, 12, 32), {"is_causal": True}, None),
    ("gqa", (2, 8, 5, 16), (2, 2, 7, 16), {"enable_gqa": True, "scale": 0.3}, None),
    ("gqa-causal", (2, 6, 7, 16), (2, 3, 7, 16), {"enable_gqa": True, "is_causal": True}, None),
    ("bool-mask-LS", (2, 4, 5, 16), (2, 4, 7, 16), {}, ((5, 7), "bool")),
    ("bool-mask-full", (2, 8, 5, 32), (2, 2, 70, 32), {"enable_gqa": True}, ((2, 8, 5, 70), "bool")),
    ("bool-mask-head-rows", (2, 4, 5, 16), (2, 4, 7, 16), {}, ((4, 1, 7), "bool")),
    ("float-mask-batch", (2, 4, 5, 16), (2, 4, 7, 16), {"scale": 0.5}, ((2, 1, 5, 7), "float")),
    ("float-mask-inf", (3, 5, 16), (3, 70, 16), {}, ((5, 70), "-inf")),
    ("mask-partial-batch", (2, 3, 2, 4, 8), (2, 3, 2, 6, 8), {}, ((3, 1, 4, 6), "float")),
    # the rest of torch's contract, each checked against torch 2.13's CPU SDPA too when this file was written
    ("mask-B-H-1-S", (2, 3, 5, 8), (2, 3, 7, 8), {}, ((2, 3, 1, 7), "bool")),
    ("mask-1-H-L-S", (2, 3, 5, 8), (2, 3, 7, 8), {}, ((1, 3, 5, 7), "float")),
    ("mask-L-1", (2, 3, 5, 8), (2, 3, 7, 8), {}, ((5, 1), "-inf")),
    ("mask-three-d", (3, 5, 8), (3, 7, 8), {}, ((3, 5, 7), "float")),
    ("scale-0", (1, 2, 3, 8), (1, 2, 7, 8), {"scale": 0.0}, None),
    ("scale-negative-mask", (1, 2, 3, 8), (1, 2, 7, 8), {"scale": -0.5}, ((3, 7), "float")),
    ("no-keys-mask", (1, 2, 3, 8), (1, 2, 0, 8), {}, ((3, 0), "bool")),
    ("no-keys-causal", (1, 2, 3, 8), (1, 2, 0, 8), {"is_causal": True}, None),
    ("no-queries", (1, 2, 0, 8), (1, 2, 7, 8), {"is_causal": True}, None),
    ("one-key", (1, 2, 3, 8), (1, 2, 1, 8), {"is_causal": True}, None),
]


def _check(got, q, k, v, **options):
    ok, err, base, bound = sdpa_tolerance_check(got, q, k, v, **options)
    assert ok, f"error {err:.3g} > bound {bound:.3g} (same math in f32: {base:.3g})"
    return bound


def _case(dev, seed, qs, ks, options, mask):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in (qs, ks, ks))
    m = None if mask is None else _mask(rng, *mask)
    got = wg.ops.sdpa(dev.tensor(q), dev.tensor(k), dev.tensor(v), attn_mask=m, **options).numpy()
    assert got.shape == qs and got.dtype == np.float32
    return got, (q, k, v), dict(options, attn_mask=m)


@pytest.mark.parametrize("name,qs,ks,options,mask", CASES, ids=[c[0] for c in CASES])
def test_sdpa_matches_reference(dev, name, qs, ks, options, mask):
    got, qkv, options = _case(dev, 7, qs, ks, options, mask)
    _check(got, *qkv, **options)


def test_sdpa_matches_torch(dev):
    """The same cases against torch's own SDPA on the CPU: |wgraph - torch| within the reference bound plus
    torch's own error against the float64 reference."""
    torch = pytest.importorskip("torch", reason="torch is an optional test dependency (pip install torch)")
    F = torch.nn.functional
    for name, qs, ks, options, mask in CASES:
        got, qkv, options = _case(dev, 7, qs, ks, options, mask)
        bound = _check(got, *qkv, **options)
        q, k, v = (torch.from_numpy(a) for a in qkv)
        m = options.pop("attn_mask")
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=None if m is None else torch.from_numpy(m),
                                              **options).numpy()
        torch_err = float(np.max(np.abs(want - sdpa_reference(*qkv, attn_mask=m, **options)), initial=0.0))
        err = float(np.max(np.abs(got.astype(np.float64) - want), initial=0.0))
        assert err <= bound + torch_err, (name, err, bound, torch_err)


def test_sdpa_f16_and_a_fully_masked_row(dev, rng):
    skip_unless_f16(dev)
    q, k, v = (rng.standard_normal(s).astype(np.float16) for s in ((2, 4, 5, 16), (2, 4, 7, 16), (2, 4, 7, 16)))
    for m, options in ((None, {"is_causal": True}), (_mask(rng, (5, 7), "bool"), {})):
        got = wg.ops.sdpa(dev.tensor(q), dev.tensor(k), dev.tensor(v), attn_mask=m, **options).numpy()
        assert got.dtype == np.float16
        _check(got, q, k, v, attn_mask=m, **options)
    m = _mask(rng, (2, 4, 5, 7), "bool")
    m[1, 2, 3] = False  # batch 1, head 2, query 3 sees no key: zeros (torch's safe softmax gives the same)
    got = wg.ops.sdpa(dev.tensor(q), dev.tensor(k), dev.tensor(v), attn_mask=m).numpy()
    assert not got[1, 2, 3].any() and np.isfinite(got).all()
    _check(got, q, k, v, attn_mask=m)


def test_sdpa_masks_as_gpu_tensors_recorded_in_one_submit(dev, rng):
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 5, 16), (2, 4, 7, 16), (2, 4, 7, 16)))
    boolean = _mask(rng, (4, 5, 7), "bool")
    additive = _mask(rng, (1, 4, 1, 7), "-inf")
    Q, K, V = dev.tensor(q), dev.tensor(k), dev.tensor(v)
    mb, mf = dev.tensor(boolean, dtype="u32"), dev.tensor(additive)  # u32: nonzero takes part; f32: added
    before = dev.stats.snapshot()
    with dev.record():
        a = wg.ops.sdpa(Q, K, V, attn_mask=mb)
        b = wg.ops.sdpa(Q, K, V, attn_mask=mf)
    assert dev.stats.since(before).submits == 1
    _check(a.numpy(), q, k, v, attn_mask=boolean)
    _check(b.numpy(), q, k, v, attn_mask=additive)


def test_sdpa_in_a_graph(dev, rng):
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 3, 8), (2, 2, 6, 8), (2, 2, 6, 8)))
    mask = _mask(rng, (3, 6), "float")
    g = wg.Graph("sdpa")
    Q, K, V = g.input("q", q.shape, "f32"), g.input("k", k.shape, "f32"), g.input("v", v.shape, "f32")
    g.output("causal", wg.ops.sdpa(Q, K, V, is_causal=True, enable_gqa=True))
    g.output("masked", wg.ops.sdpa(Q, K, V, attn_mask=g.const("mask", mask), enable_gqa=True))
    out = g.compile(dev).run(q=q, k=k, v=v)
    _check(out["causal"].numpy(), q, k, v, is_causal=True, enable_gqa=True)
    _check(out["masked"].numpy(), q, k, v, attn_mask=mask, enable_gqa=True)
    again = wg.Graph.from_json(g.to_json()).compile(dev).run(q=q, k=k, v=v)  # sdpa's params serialise
    for name in ("causal", "masked"):
        np.testing.assert_array_equal(again[name].numpy(), out[name].numpy())
    # a mask broadcast over some batch axes but not all: a graph takes no host data, so the message says g.const
    # (it said "or pass it as host data", which a graph refuses)
    g = wg.Graph("partial")
    Q, K = g.input("q", (2, 3, 1, 4, 8), "f32"), g.input("k", (2, 3, 1, 6, 8), "f32")
    with pytest.raises(wg.ShapeError, match=r"sdpa: a graph's attn_mask \(3, 1, 4, 6\) broadcasts over some batch "
                                            r"axes of \(2, 3\) but not all; expand it to \(2, 3, 1, 4, 6\) "
                                            r"\(g.const of the expanded array\)"):
        wg.ops.sdpa(Q, K, K, attn_mask=g.const("m", np.zeros((3, 1, 4, 6), np.float32)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_transpose01(dev, rng, dtype):
    skip_unless_f16(dev, dtype)
    x = rng.standard_normal((3, 70, 5)).astype(dtype)  # 1050 elements: more than one 256-thread workgroup
    np.testing.assert_array_equal(wg.ops.transpose01(dev.tensor(x)).numpy(), np.swapaxes(x, 0, 1))
    with pytest.raises(wg.ShapeError, match=r"transpose01: x must be \[A, B, D\], got \(3, 70\)"):
        wg.ops.transpose01(dev.tensor(x[:, :, 0]))


def test_sdpa_errors_before_gpu_work(dev):
    f32 = lambda *s: dev.tensor(np.ones(s, np.float32))  # noqa: E731
    q, k = f32(1, 4, 5, 8), f32(1, 2, 7, 8)
    before = dev.stats.snapshot()
    with pytest.raises(wg.WgraphError,
                       match=r"pass either attn_mask or is_causal=True, not both \(torch's documented rule"):
        wg.ops.sdpa(q, q, q, attn_mask=np.ones((5, 5), bool), is_causal=True)
    with pytest.raises(wg.ShapeError, match=r"query has 4 heads and key 2; pass enable_gqa=True"):
        wg.ops.sdpa(q, k, k)
    with pytest.raises(wg.ShapeError, match=r"query heads 4 is not a multiple of key/value heads 3"):
        wg.ops.sdpa(q, f32(1, 3, 7, 8), f32(1, 3, 7, 8), enable_gqa=True)
    with pytest.raises(wg.ShapeError, match=r"attn_mask \(5, 6\) does not broadcast to the scores \(1, 4, 5, 7\)"):
        wg.ops.sdpa(q, k, k, attn_mask=np.ones((5, 6), bool), enable_gqa=True)
    with pytest.raises(wg.DtypeError, match=r"sdpa: attn_mask: got float64 data"):
        wg.ops.sdpa(q, k, k, attn_mask=np.zeros((5, 7)), enable_gqa=True)
    # an integer host mask, whatever its width, is named as one (int64 / uint8 got host_array's offer of u32 / i32
    # storage or byte packing, which sdpa then refused)
    for dt in (np.int64, np.uint8, np.int8, np.int32, np.uint32):
        with pytest.raises(wg.DtypeError, match=r"^sdpa: attn_mask is bool \(True takes part\) or float \(added\), "
                                                rf"got {np.dtype(dt)}; a 0 / 1 mask is mask.astype\(bool\)$"):
            wg.ops.sdpa(q, k, k, attn_mask=np.ones((5, 7), dt), enable_gqa=True)
    if dev.caps.has_f16:   # an f16 tensor needs shader-f16
        with pytest.raises(wg.DtypeError, match=r"share one dtype, f32 or f16; got f32, f16, f16"):
            f16 = np.ones((1, 4, 7, 8), np.float16)
            wg.ops.sdpa(q, dev.tensor(f16), dev.tensor(f16))
    with pytest.raises(wg.ShapeError, match=r"same batch axes"):
        wg.ops.sdpa(q, f32(2, 4, 7, 8), f32(2, 4, 7, 8))
    with pytest.raises(wg.ShapeError, match=r"sdpa: query must be a Tensor \(or a graph value\), got numpy.ndarray"):
        wg.ops.sdpa(np.ones((1, 4, 5, 8), np.float32), q, q)
    d = dev.stats.since(before)
    assert (d.submits, d.dispatches) == (0, 0)


def test_sdpa_mask_over_lavapipes_loop_limit_raises(dev):
    if not dev.caps.is_cpu:
        pytest.skip("the loop limit is lavapipe's (a CPU adapter)")
    q, k = dev.tensor(np.ones((1, 1, 256), np.float32)), dev.tensor(np.ones((1, 8192, 256), np.float32))
    with pytest.raises(wg.LimitError, match=r"attn_mask over 8192 keys at head_dim 256 takes \d+ loop iterations "
                                            r"per invocation on .* stops an invocation's loops at 65535"):
        wg.ops.sdpa(q, k, k, attn_mask=np.ones((1, 8192), bool))


def _nan_rows(x):
    return np.isnan(x).any(axis=-1)


@pytest.mark.parametrize("case", ["nan-in-mask", "inf-in-mask", "nan-in-q", "nan-in-visible-k", "nan-in-masked-k",
                                  "nan-in-v", "row-all-minus-inf", "scores-below-minus-3e38"])
def test_sdpa_masked_nan_and_inf_as_torch(dev, rng, case):
    """The attn_mask kernel wrote 0 where torch and the float64 reference give NaN (`if (l > 0.0)` is false for a
    NaN sum): NaN in a float mask, +inf in a float mask, NaN in q. Checked against the float64 reference (whose
    NaN rows were checked against torch 2.13's CPU SDPA: the same rows, for these cases) over 70 keys (two key
    tiles), NaN positions exactly and every other value by the tolerance rule. A masked key's NaN k does not
    spread (torch's matmul spreads it; wgraph keeps its attention rule that masked keys never count)."""
    q = rng.standard_normal((2, 3, 16)).astype(np.float32)
    k, v = (rng.standard_normal((2, 70, 16)).astype(np.float32) for _ in range(2))
    mask = np.zeros((3, 70), np.float32)
    if case == "nan-in-mask":
        mask[0, 66] = np.nan
    elif case == "inf-in-mask":
        mask[1, 2] = np.inf
    elif case == "nan-in-q":
        q[1, 2, 5] = np.nan
    elif case == "nan-in-visible-k":
        k[0, 40, 3] = np.nan
    elif case == "nan-in-masked-k":
        k[0, 40, 3] = np.nan
        mask = np.ones((3, 70), bool)
        mask[:, 40] = False
    elif case == "nan-in-v":
        v[1, 69, 7] = np.nan
    elif case == "row-all-minus-inf":
        mask[2] = -np.inf
    else:   # finite scores below the kernel's old -3e38 sentinel still get their softmax weights
        mask[:] = -3.3e38
        mask[:, 5] = -3.2e38
    got = wg.ops.sdpa(dev.tensor(q), dev.tensor(k), dev.tensor(v), attn_mask=mask).numpy()
    want = sdpa_reference(q, k, v, attn_mask=mask)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    expect_nan_rows = {"nan-in-mask": [(0, 0), (1, 0)], "inf-in-mask": [(0, 1), (1, 1)], "nan-in-q": [(1, 2)],
                       "nan-in-visible-k": [(0, 0), (0, 1), (0, 2)], "nan-in-v": [(1, 0), (1, 1), (1, 2)]}
    assert sorted(map(tuple, np.argwhere(_nan_rows(got)).tolist())) == expect_nan_rows.get(case, [])
    clean = ~np.isnan(want)   # FlashAttention's rule on every other value: the f32 math's error, twice, + atol
    base = sdpa_reference(q, k, v, attn_mask=mask, compute_dtype=np.float32)
    err = np.max(np.abs(got[clean] - want[clean]))
    bound = 2 * np.max(np.abs(base[clean] - want[clean])) + 2e-5
    assert err <= bound, (case, err, bound)
    if case == "row-all-minus-inf":
        assert not got[:, 2].any()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("kind", ["bool", "-inf", "causal"])
def test_sdpa_masked_keys_v_reaches_no_row(dev, rng, bad, kind):
    """A NaN or inf in the v row of a key the mask hides reached every row of its head in the attn_mask kernel
    (0 * NaN in P.V), against docs/errors.md's nan-propagates rule (masked keys never count) and against
    is_causal=True, whose kernel skips such keys: a padding mask over garbage k/v rows gave NaN everywhere. Now
    only the rows that see the key get it (output dim 3), the same with a bool mask, a -inf float mask and
    is_causal, over 70 keys (two key tiles); every other value by the float64 reference's tolerance rule."""
    q = rng.standard_normal((2, 3, 16)).astype(np.float32)
    k, v = (rng.standard_normal((2, 70, 16)).astype(np.float32) for _ in range(2))
    j = 2 if kind == "causal" else 66             # the key rows 0 and 1 do not see (causal: only row 2 sees key 2)
    v[0, j, 3] = bad
    keep = np.ones((3, 70), bool)
    keep[:2, j] = False
    mask = {"bool": keep, "-inf": np.where(keep, 0.0, -np.inf).astype(np.float32), "causal": None}[kind]
    options = {"is_causal": True} if kind == "causal" else {"attn_mask": mask}
    got = wg.ops.sdpa(dev.tensor(q), dev.tensor(k), dev.tensor(v), **options).numpy()
    want = sdpa_reference(q, k, v, **options)
    seen = np.zeros(got.shape, bool)
    seen[0, 2, 3] = True                          # head 0, query 2 sees key j; only output dim 3 holds its v
    np.testing.assert_array_equal(~np.isfinite(want), seen)   # the reference's own rule, as the kernels'
    np.testing.assert_array_equal(~np.isfinite(got), seen)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    base = sdpa_reference(q, k, v, compute_dtype=np.float32, **options)
    err = np.max(np.abs(got[~seen] - want[~seen]))
    assert err <= 2 * np.max(np.abs(base[~seen] - want[~seen])) + 2e-5, err


def test_sdpa_scale_and_flags_are_checked(dev):
    """The attn_mask path never checked scale (NaN / inf gave zeros) and took scale="0.5"; is_causal and
    enable_gqa are bools. Each raises naming the argument, before any GPU work."""
    x = dev.tensor(np.ones((2, 3, 8), np.float32))
    m = np.ones((3, 3), bool)
    before = dev.stats.snapshot()
    for kwargs, match in ((dict(attn_mask=m, scale=float("nan")), "scale=nan"),
                          (dict(attn_mask=m, scale=float("inf")), "scale=inf"),
                          (dict(attn_mask=m, scale="0.5"), "scale='0.5'"),
                          (dict(scale="0.5"), "scale='0.5'"),
                          (dict(is_causal="yes"), "is_causal='yes' must be True or False"),
                          (dict(enable_gqa=1), "enable_gqa=1 must be True or False")):
        with pytest.raises(wg.ArgumentError, match=match):
            wg.ops.sdpa(x, x, x, **kwargs)
    assert dev.stats.since(before).dispatches == 0


def test_sdpa_takes_torchs_arguments_in_torchs_order(dev, rng):
    """torch's signature is (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa): dropout_p=0.0
    (keyword or positional) is taken, any other refused by name (it raised TypeError, and a positional torch call
    read 0.0 as is_causal); an empty batch gives an empty output and a head_dim of 0 a ShapeError (a
    ZeroDivisionError before)."""
    q = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 7, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 7, 8)).astype(np.float32)
    want = wg.ops.sdpa(dev.tensor(q), dev.tensor(k), dev.tensor(v), is_causal=True).numpy()
    got = wg.ops.sdpa(dev.tensor(q), dev.tensor(k), dev.tensor(v), None, 0.0, True).numpy()
    np.testing.assert_array_equal(got, want)
    assert sdpa_tolerance_check(got, q, k, v, is_causal=True)[0]
    with pytest.raises(wg.UnsupportedError, match=r"sdpa: dropout_p=0.1: wgraph's attention has no dropout"):
        wg.ops.sdpa(dev.tensor(q), dev.tensor(k), dev.tensor(v), dropout_p=0.1)
    empty = wg.ops.sdpa(*(dev.tensor(np.zeros((0, 2, 5, 8), np.float32)) for _ in range(3)))
    assert empty.shape == (0, 2, 5, 8)
    with pytest.raises(wg.ShapeError, match="sdpa: heads and head_dim must be at least 1"):
        wg.ops.sdpa(*(dev.tensor(np.zeros((1, 2, 5, 0), np.float32)) for _ in range(3)))
    # 0 kv heads was told to pass enable_gqa=True (the GQA rule came first), which then raised this
    with pytest.raises(wg.ShapeError, match=r"sdpa: heads and head_dim must be at least 1; got query \(1, 2, 5, 8\) "
                                            r"and key \(1, 0, 7, 8\)"):
        wg.ops.sdpa(dev.tensor(q), *(dev.tensor(np.zeros((1, 0, 7, 8), np.float32)) for _ in range(2)))
    # key and value of different key counts: the message named only head_dim
    with pytest.raises(wg.ShapeError, match=r"sdpa: key \(1, 2, 7, 8\) and value \(1, 2, 6, 8\) differ; they must "
                                            r"have one shape \(the same keys and heads"):
        wg.ops.sdpa(dev.tensor(q), dev.tensor(k), dev.tensor(v[:, :, :6].copy()))


def test_sdpa_empty_batch_checks_the_mask(dev):
    """An empty batch returned its empty output before attn_mask was looked at: a (3, 3) mask for scores
    (0, 2, 5, 7) and a float64 mask were taken silently (torch refuses both). Now they raise as with a batch, and
    a mask that fits still gives the empty output."""
    q, k = (dev.tensor(np.zeros(s, np.float32)) for s in ((0, 2, 5, 8), (0, 2, 7, 8)))
    with pytest.raises(wg.ShapeError, match=r"attn_mask \(3, 3\) does not broadcast to the scores \(0, 2, 5, 7\)"):
        wg.ops.sdpa(q, k, k, attn_mask=np.ones((3, 3), bool))
    with pytest.raises(wg.DtypeError, match=r"sdpa: attn_mask: got float64 data"):
        wg.ops.sdpa(q, k, k, attn_mask=np.zeros((5, 7)))
    if dev.caps.has_f16:   # an f16 tensor needs shader-f16
        with pytest.raises(wg.DtypeError, match=r"a GPU attn_mask is f32 .* got f16"):
            wg.ops.sdpa(q, k, k, attn_mask=dev.tensor(np.zeros((5, 7), np.float16)))
    for mask in (np.ones((5, 7), bool), np.zeros((0, 1, 5, 7), np.float32)):
        assert wg.ops.sdpa(q, k, k, attn_mask=mask).shape == (0, 2, 5, 8)


def test_sdpa_empty_batch_in_a_graph(dev):
    """An empty batch gives an empty output eagerly (as torch), but in a graph sdpa without attn_mask passed the
    attention op 0 folded heads, which raised ShapeError ("attention: heads and head_dim must be >= 1") at
    g.output time; with attn_mask it already worked. Now both give the empty output, through to_json too."""
    for qs, ks, options in (((0, 2, 5, 8), (0, 2, 7, 8), {}), ((0, 2, 1, 8), (0, 2, 7, 8), {"is_causal": True}),
                            ((2, 0, 4, 3, 8), (2, 0, 2, 6, 8), {"enable_gqa": True})):
        g = wg.Graph("empty")
        Q, K, V = g.input("q", qs, "f32"), g.input("k", ks, "f32"), g.input("v", ks, "f32")
        g.output("o", wg.ops.sdpa(Q, K, V, **options))
        feeds = {"q": np.zeros(qs, np.float32), "k": np.zeros(ks, np.float32), "v": np.zeros(ks, np.float32)}
        for graph in (g, wg.Graph.from_json(g.to_json())):
            got = graph.compile(dev).run(**feeds)["o"].numpy()
            assert got.shape == qs and got.dtype == np.float32


def test_sdpa_mixed_inputs_refused_before_gpu_work(dev):
    """Inputs of two devices, or Tensors mixed with graph values, were refused only by the op after the transposes
    (attention / sdpa_masked): the other inputs' transposes had run on their devices (1 to 3 dispatches on each)
    or been added to the graph as nodes nothing reads, and the error named `attention`. Now sdpa refuses them
    first, naming itself and the inputs."""
    other = wg.Device()
    x = dev.tensor(np.ones((2, 3, 8), np.float32))
    y = other.tensor(np.ones((2, 3, 8), np.float32))
    g = wg.Graph("mixed")
    q, m = g.input("q", (2, 3, 8), "f32"), g.input("m", (3, 3), "f32")
    nodes = len(g.nx)
    foreign_mask = other.tensor(np.ones((3, 3), np.float32))
    cases = ((wg.DeviceError, r"sdpa: inputs live on different devices \(Device\(.*\) and Device\(.*\)\)",
              (x, y, y), None),
             (wg.DeviceError, r"sdpa: inputs live on different devices", (x, x, x), foreign_mask),
             (wg.GraphError, r"sdpa: attn_mask is a value of graph 'mixed' but query is a Tensor; in a graph every "
                             r"input must be a value", (x, x, x), m),
             (wg.GraphError, r"sdpa: query is a value of graph 'mixed' but key is a Tensor", (q, x, x), None),
             (wg.GraphError, r"sdpa: value belongs to graph 'other' and query to graph 'mixed'",
              (q, q, wg.Graph("other").input("v", (2, 3, 8), "f32")), None))
    for error, match, qkv, mask in cases:
        before, before_other = dev.stats.snapshot(), other.stats.snapshot()
        with pytest.raises(error, match=match):
            wg.ops.sdpa(*qkv, attn_mask=mask)
        x.numpy(), y.numpy()   # anything left pending is submitted here
        assert dev.stats.since(before).dispatches == 0 and other.stats.since(before_other).dispatches == 0
    assert len(g.nx) == nodes


def test_sdpa_two_d_query_mask_axes(dev, rng):
    """A 2-D query [L, D] has scores [L, S], but the mask was checked against [1, L, S] (the head axis sdpa adds):
    a (1, L, S) mask was taken (torch refuses it: its in-place add cannot grow the scores to 3 axes) and the
    errors named the scores (1, L, S). Now a mask of more than 2 axes is refused, naming (L, S); a mask of 2 axes
    or fewer still runs, checked against the float64 reference."""
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((5, 8), (7, 8), (7, 8)))
    Q, K, V = dev.tensor(q), dev.tensor(k), dev.tensor(v)
    before = dev.stats.snapshot()
    with pytest.raises(wg.ShapeError, match=r"sdpa: attn_mask \(1, 5, 7\) has more axes than the scores \(5, 7\)"):
        wg.ops.sdpa(Q, K, V, attn_mask=np.ones((1, 5, 7), bool))
    with pytest.raises(wg.ShapeError, match=r"sdpa: attn_mask \(2, 7\) does not broadcast to the scores \(5, 7\)"):
        wg.ops.sdpa(Q, K, V, attn_mask=np.ones((2, 7), bool))
    assert dev.stats.since(before).dispatches == 0
    for mask in (_mask(rng, (5, 7), "bool"), _mask(rng, (7,), "float")):
        _check(wg.ops.sdpa(Q, K, V, attn_mask=mask).numpy(), q, k, v, attn_mask=mask)


def test_sdpa_masked_node_of_a_graph_file_is_checked(dev, rng):
    """sdpa() makes the sdpa_masked node's inputs fit, but a graph file's node comes as written: its infer never
    checked v against k, head_dims, dtypes or the mask's dtype against mask_bool, so an edited file ran silently
    wrong (a u32 mask read as f32 biases: every key took part; a v of 3 keys for k's 7 read past its end). Now
    each raises naming what differs; the file as written still runs, checked against the float64 reference."""
    import json
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 5, 8), (2, 7, 8), (2, 7, 8)))
    keep = _mask(rng, (5, 7), "bool")
    g = wg.Graph("file")
    Q, K, V, M = g.input("q", q.shape, "f32"), g.input("k", k.shape, "f32"), g.input("v", v.shape, "f32"), \
        g.input("m", keep.shape, "u32")
    g.output("o", wg.ops.sdpa(Q, K, V, attn_mask=M))
    text = g.to_json()
    out = wg.Graph.from_json(text).compile(dev).run(q=q, k=k, v=v, m=keep.astype(np.uint32))["o"].numpy()
    _check(out, q, k, v, attn_mask=keep)

    def edited(change):
        doc = json.loads(text)
        for node in doc["nodes"]:
            change(node)
        return json.dumps(doc)

    def mask_as_f32(node):
        if node["op"] == "sdpa_masked":
            node["params"]["fields"]["mask_bool"] = False

    def short_v(node):   # v and its reshape of 3 keys, k's of 7
        if node["name"] == "v":
            node["shape"] = [2, 3, 8]
        if node["op"] == "reshape" and node["inputs"] == ["v"]:
            node["params"]["fields"]["shape"]["__tuple__"] = [2, 3, 8]

    with pytest.raises(wg.DtypeError, match=r"sdpa: mask_bool=False reads attn_mask as f32, got u32"):
        wg.Graph.from_json(edited(mask_as_f32)).compile(dev)
    with pytest.raises(wg.ShapeError, match=r"sdpa: sdpa_masked's key \(7, 2, 8\) and value \(3, 2, 8\) must have "
                                            r"one shape"):
        wg.Graph.from_json(edited(short_v)).compile(dev)
