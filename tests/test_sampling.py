"""argmax and sample on the GPU against numpy: argmax's ties, NaNs, -inf rows and a 128256-wide row; sample's
reproducibility by (seed, step), a GPU step tensor, top_k=1 == argmax, and its empirical distribution over
10k draws against the float64 top-k/top-p reference (a chi-square test at a fixed seed), also for f16 logits, a
[B, T, V] batch, top_k at V and V - 1 and a 5000-wide row; out=, graphs, argument checks and lavapipe's loop cap."""

import numpy as np
import pytest

import wgraph as wg


# ---- argmax ----

def test_argmax_ties_nan_and_inf_as_numpy(dev, rng):
    x = rng.standard_normal((8, 300)).astype(np.float32)
    x[1, [7, 200]] = 50.0             # a tie: the lowest index
    x[2, [3, 250]] = np.nan           # NaN beats numbers: the first NaN
    x[2, 100] = np.inf
    x[3, :] = -np.inf                 # every value -inf: index 0
    x[4, :] = 0.0
    x[4, 5] = -0.0                    # -0 == 0: still index 0
    x[5, 299] = 1e30                  # the last index
    x[6, 255:] = 40.0                 # equal maxima that different threads hold
    got = wg.ops.argmax(dev.tensor(x)).numpy()
    assert got.dtype == np.uint32 and got.tolist() == np.argmax(x, -1).tolist()
    assert got[1:4].tolist() == [7, 3, 0]
    short = -np.abs(rng.standard_normal((50, 3))).astype(np.float32)  # rows shorter than the workgroup, all < 0
    assert wg.ops.argmax(dev.tensor(short)).numpy().tolist() == np.argmax(short, -1).tolist()


def test_argmax_f16_batch_dims_and_long_rows(dev, rng):
    if not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    x = rng.standard_normal((2, 3, 50)).astype(np.float16)
    x[0, 1, [10, 40]] = 9.0
    assert wg.ops.argmax(dev.tensor(x)).numpy().tolist() == np.argmax(x, -1).tolist()
    vocab = rng.standard_normal((2, 128256)).astype(np.float32)  # a Llama 3 vocab: 501 values per thread
    vocab[1, 128255] = 10.0
    assert wg.ops.argmax(dev.tensor(vocab)).numpy().tolist() == np.argmax(vocab, -1).tolist()


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_argmax_rows_of_several_chunks(dev, rng, dtype):
    """Rows longer than the kernel's chunk_len take one workgroup per chunk and a merge pass (two dispatches):
    ties across chunks go to the lowest index, a NaN in a later chunk still wins, -inf rows give 0."""
    from wgraph.kernels.registry import kernel

    if dtype == "f16" and not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    chunk = kernel(f"argmax_{dtype}").facts["chunk_len"]
    x = rng.standard_normal((6, 2 * chunk + 37)).astype(np.float16 if dtype == "f16" else np.float32)
    x[0, [chunk + 5, 5, 2 * chunk + 1]] = 40.0      # equal maxima in three chunks: the lowest index
    x[1, [2 * chunk + 30]] = np.nan                 # a NaN in the last chunk beats the numbers before it
    x[1, 3] = np.inf
    x[2, :] = -np.inf                               # every value -inf: index 0
    x[3, chunk - 1] = 30.0                          # the last value of the first chunk
    x[4, chunk] = 30.0                              # the first value of the second chunk
    x[5, -1] = 30.0                                 # the row's last value
    before = dev.stats.snapshot()
    got = wg.ops.argmax(dev.tensor(x)).numpy()
    assert dev.stats.since(before).dispatches == 2
    assert got.tolist() == np.argmax(x, -1).tolist()
    assert got[:5].tolist() == [5, 2 * chunk + 30, 0, chunk - 1, chunk]


def test_argmax_out_recorded_and_graph(dev, rng):
    x = rng.standard_normal((1, 64)).astype(np.float32)
    ids = dev.tensor(np.array([123], np.uint32))
    with dev.record():
        assert wg.ops.argmax(dev.tensor(x), out=ids) is ids
    assert ids.numpy().tolist() == [int(np.argmax(x))]
    g = wg.Graph("pick")
    g.output("id", wg.ops.argmax(g.input("logits", (1, 64), "f32")))
    prog = g.compile(dev)
    for _ in range(2):
        x = rng.standard_normal((1, 64)).astype(np.float32)
        assert prog.run(logits=x)["id"].numpy().tolist() == [int(np.argmax(x))]
    with pytest.raises(wg.DtypeError, match="out= has dtype f32, the op makes u32"):
        wg.ops.argmax(dev.tensor(x), out=dev.empty((1,), "f32"))


# ---- sample ----

def reference_probs(logits, temperature, top_k=0, top_p=1.0):
    """Hugging Face's order in float64: temperature, top-k (ties at the k-th value kept), softmax, top-p (the
    fewest largest whose mass reaches top_p, the crossing one included, ties kept), renormalised."""
    z = logits.astype(np.float64) / temperature
    if 0 < top_k < z.size:
        z = np.where(z >= np.sort(z)[-top_k], z, -np.inf)
    p = np.exp(z - z.max())
    p /= p.sum()
    if top_p < 1:
        desc = np.sort(p)[::-1]
        cum = np.cumsum(desc)
        assert np.min(np.abs(cum - top_p)) > 1e-4  # no f32 rounding can move the cut
        p = np.where(p >= desc[np.searchsorted(cum, top_p)], p, 0.0)
        p /= p.sum()
    return p


def _chi_square_critical(df, z=3.0902):
    """Wilson-Hilferty's chi-square quantile; z = 3.09 is the normal's 0.999 quantile."""
    return df * (1 - 2 / (9 * df) + z * np.sqrt(2 / (9 * df))) ** 3


@pytest.mark.parametrize("temperature,top_k,top_p", [(0.8, 10, 0.95), (1.3, 0, 0.7)])
def test_sample_distribution_matches_reference(dev, rng, temperature, top_k, top_p):
    """10k draws in one dispatch (10k rows of the same logits, row is part of the hashed counter)."""
    logits = rng.standard_normal(32).astype(np.float32)  # supports of 9 (both filters cut) and 13 tokens
    n = 10000
    ids = wg.ops.sample(dev.tensor(np.tile(logits, (n, 1))), temperature=temperature, top_k=top_k, top_p=top_p,
                        seed=2024).numpy()
    p = reference_probs(logits, temperature, top_k, top_p)
    counts = np.bincount(ids, minlength=32)
    assert counts.sum() == n and np.all(counts[p == 0] == 0)  # nothing outside the top-k / nucleus support
    support = p > 0
    expected = n * p[support]
    assert expected.min() > 5
    chi2 = float(np.sum((counts[support] - expected) ** 2 / expected))
    assert chi2 < _chi_square_critical(support.sum() - 1), (chi2, counts[support], expected)


TIES = [3, 2, 2, 2, 1, 1, 0, 0, -1, 5, 2, 1]           # a tie of four at the 3rd largest value (2)
SOME_INF = [0.3, -np.inf, 1.2, -0.4, 0.9, -np.inf, 0.0, 1.1, -1.3, -np.inf, 0.5, 0.2, -0.8, 0.7, 1.6, -0.1]


@pytest.mark.parametrize("logits,temperature,top_k,top_p", [
    (TIES, 1.0, 3, 1.0),          # ties at the k-th value all kept: 6 ids, not 3
    (TIES, 1.0, 0, 0.8),          # the nucleus cut inside a tie: the whole tie kept
    (TIES, 0.7, 4, 0.9),
    (SOME_INF, 1.0, 14, 1.0),     # top_k past the finite logits: the -inf ones still never drawn
    (SOME_INF, 0.9, 0, 0.9),
    (SOME_INF, 1.0, 100, 1.0),    # top_k larger than the vocabulary: off
    ([0.0] * 16, 1.0, 3, 0.3),    # all equal: one tie, every id kept
])
def test_sample_ties_and_inf_match_the_documented_support(dev, logits, temperature, top_k, top_p):
    """The float64 reference's support and frequencies (ties at the top-k and top-p boundaries kept, -inf never
    drawn) over 3000 draws, one dispatch."""
    logits = np.array(logits, np.float32)
    n = 3000
    ids = wg.ops.sample(dev.tensor(np.tile(logits, (n, 1))), temperature=temperature, top_k=top_k, top_p=top_p,
                        seed=17).numpy()
    dev.check_errors()
    p = reference_probs(logits, temperature, top_k, top_p)
    counts = np.bincount(ids, minlength=logits.size)
    assert counts.size == logits.size and np.all(counts[p == 0] == 0), (counts, p)
    support = p > 0
    expected = n * p[support]
    chi2 = float(np.sum((counts[support] - expected) ** 2 / expected))
    assert chi2 < _chi_square_critical(support.sum() - 1), (chi2, counts[support], expected)


def _chunk_edge_logits(rng):
    """5000 logits (the 256-thread variant: 20 values a thread in the draw's scan) with 14 live ids at the first
    and last values of threads' chunks and of the row; the rest weigh e^-40 at most."""
    x = np.full(5000, -60.0)
    live = [0, 19, 20, 39, 40, 2519, 2520, 4979, 4980, 4998, 4999, 1234, 3000, 3001]
    x[live] = rng.standard_normal(len(live))
    return x


@pytest.mark.parametrize("case,temperature,top_k,top_p", [
    ("f16", 0.9, 6, 0.95),         # f16 logits: the reference takes the f16 values
    ("f16_extremes", 5000.0, 0, 1.0),   # +-65504 and -inf in f16 at a large temperature
    ("batch", 1.1, 0, 0.8),        # [B, T, V]: every row of a 3-D batch draws from its own logits
    ("top_k_V", 1.0, 24, 1.0),     # top_k == V: off
    ("top_k_V-1", 1.0, 23, 1.0),   # top_k == V - 1 with a tie of two at the bottom: both kept, off in effect
    ("wide", 1.0, 0, 1.0),         # V = 5000, live ids at the edges of the threads' chunks
    ("wide", 0.8, 9, 0.9),
])
def test_sample_distribution_edges(dev, rng, case, temperature, top_k, top_p):
    """Empirical frequencies against the float64 reference (chi-square, 0.999 quantile) and no id outside its
    support, for f16 logits, a 3-D batch, top_k at V and V - 1, and a 5000-wide row."""
    if case.startswith("f16") and not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    if case == "f16":
        logits = (rng.standard_normal(37) * 2).astype(np.float16)
    elif case == "f16_extremes":
        logits = np.array([65504, -65504, 60000, 0, -np.inf, 65504, 30000], np.float16)
    elif case == "batch":
        logits = rng.standard_normal(30).astype(np.float32)
    elif case.startswith("top_k"):
        logits = np.round(rng.standard_normal(24), 1).astype(np.float32)
        logits[[3, 17]] = logits.min() - 1.0   # the two smallest tie
    else:
        logits = _chunk_edge_logits(rng).astype(np.float32)
    n = 1200 if case == "wide" else 6000
    rows = np.tile(logits, (n, 1))
    if case == "batch":
        rows = rows.reshape(6, n // 6, logits.size)    # [B, T, V]
    ids = wg.ops.sample(dev.tensor(rows), temperature=temperature, top_k=top_k, top_p=top_p, seed=31).numpy()
    dev.check_errors()
    assert ids.shape == rows.shape[:-1] and ids.dtype == np.uint32
    p = reference_probs(logits.astype(np.float64), temperature, top_k, top_p)
    counts = np.bincount(ids.ravel(), minlength=logits.size)
    assert counts.size == logits.size and np.all(counts[p == 0] == 0), (counts, p)
    support = p > 1e-9    # ids the reference gives less than this (e^-40) are not expected in n draws
    expected = n * p[support]
    chi2 = float(np.sum((counts[support] - expected) ** 2 / expected)) + float(counts[~support].sum())
    assert chi2 < _chi_square_critical(max(support.sum() - 1, 1)), (chi2, counts[support], expected)


def test_sample_reproducible_by_seed_and_step(dev, rng):
    x = dev.tensor(rng.standard_normal((64, 200)).astype(np.float32))

    def draw(**kw):
        return wg.ops.sample(x, temperature=1.0, top_p=0.95, **kw).numpy()

    a = draw(seed=7, step=3)
    assert a.tobytes() == draw(seed=7, step=3).tobytes()
    assert np.mean(a != draw(seed=8, step=3)) > 0.5
    assert np.mean(a != draw(seed=7, step=4)) > 0.5
    assert np.mean(a != draw(seed=7 + (1 << 32), step=3)) > 0.5  # the seed's high word counts too
    step = dev.tensor(np.array([3], np.uint32))
    assert draw(seed=7, step=step).tobytes() == a.tobytes()  # a GPU step reads the same counter


def test_sample_top_k_1_is_argmax(dev, rng):
    x = rng.standard_normal((16, 500)).astype(np.float32)
    got = wg.ops.sample(dev.tensor(x), temperature=2.0, top_k=1, seed=5).numpy()
    assert got.tolist() == np.argmax(x, -1).tolist()
    assert wg.ops.sample(dev.tensor(x), temperature=0).numpy().tolist() == np.argmax(x, -1).tolist()
    if dev.caps.has_f16:
        h = x.astype(np.float16)
        assert wg.ops.sample(dev.tensor(h), temperature=1.0, top_k=1).numpy().tolist() == np.argmax(h, -1).tolist()


@pytest.mark.parametrize("top_p", [1e-30, 1e-40, 1e-300])
def test_sample_a_tiny_top_p_keeps_the_top_id(dev, rng, top_p):
    """top_p below f32's smallest normal was 0 (or a subnormal) in the uniform: no id was kept, and the draw
    reported 'nothing to draw' on the device error flag. It keeps the most likely id, as any top_p that small."""
    x = rng.standard_normal((4, 50)).astype(np.float32)
    ids = wg.ops.sample(dev.tensor(x), temperature=1.0, top_p=top_p, seed=7).numpy()
    dev.check_errors()
    np.testing.assert_array_equal(ids, x.argmax(-1))


def test_sample_long_row_stays_in_the_support(dev, rng):
    """A 128256-wide row (the 256-thread variant): every draw is one of the reference's top-k/top-p tokens."""
    logits = (rng.standard_normal(128256) * 3).astype(np.float32)
    ids = wg.ops.sample(dev.tensor(np.tile(logits, (4, 1))), temperature=0.9, top_k=40, top_p=0.8, seed=1).numpy()
    p = reference_probs(logits, 0.9, 40, 0.8)
    assert np.all(p[ids] > 0), (ids, np.flatnonzero(p))


def test_sample_in_a_replayed_graph_draws_anew(dev, rng):
    """The step is a graph input (a u32 GPU value): each replay draws with its step, as immediate calls do."""
    logits = rng.standard_normal((8, 100)).astype(np.float32)
    g = wg.Graph("sampler")
    g.output("ids", wg.ops.sample(g.input("logits", (8, 100), "f32"), temperature=1.0, top_k=20, seed=11,
                                  step=g.input("step", (1,), "u32")))
    prog = g.compile(dev)
    draws = [prog.run(logits=logits, step=np.array([s], np.uint32))["ids"].numpy() for s in (0, 1)]
    t = dev.tensor(logits)
    for s, got in enumerate(draws):
        assert got.tobytes() == wg.ops.sample(t, temperature=1.0, top_k=20, seed=11, step=s).numpy().tobytes()
    assert draws[0].tobytes() != draws[1].tobytes()
    out = dev.empty((8,), "u32")
    assert wg.ops.sample(t, temperature=1.0, top_k=20, seed=11, step=1, out=out) is out
    assert out.numpy().tobytes() == draws[1].tobytes()


def test_sample_row_with_nothing_to_draw_sets_the_flag(dev, rng):
    x = rng.standard_normal((3, 40)).astype(np.float32)
    x[1] = -np.inf
    x[2, :39] = -np.inf  # one finite logit: always drawn
    ids = wg.ops.sample(dev.tensor(x), temperature=1.0, top_k=5, seed=3)
    with pytest.raises(wg.GpuValueError, match=r"sample: the count of tokens a row could draw .* was 0; "
                                                r"it must be >= 1"):
        dev.check_errors()
    got = ids.numpy()
    assert got[1] == 0xFFFFFFFF and got[2] == 39 and 0 <= got[0] < 40


def _pcg(v):
    """sample.wgsl's hash (PCG's output permutation) on a Python int as a u32."""
    state = (v * 747796405 + 2891336453) & 0xFFFFFFFF
    word = (((state >> ((state >> 28) + 4)) ^ state) * 277803737) & 0xFFFFFFFF
    return (word >> 22) ^ word


def reference_draws(logits, temperature, seed, step):
    """The id each row of `logits` draws (no top-k / top-p) in float64: u = the 24-bit hash of (seed, step, row),
    the first id whose cumulative weight passes u * total."""
    ids = []
    for row, z in enumerate(logits.astype(np.float64)):
        u = (_pcg(row ^ _pcg(step ^ _pcg((seed >> 32) ^ _pcg(seed & 0xFFFFFFFF)))) >> 8) * 2.0**-24
        with np.errstate(over="ignore"):   # a gap over a temperature of 5e-324 is -inf: weight 0
            cum = np.cumsum(np.exp((z - z.max()) / temperature))
        ids.append(int(np.searchsorted(cum, u * cum[-1], side="right")))
    return ids


def test_sample_draws_the_hashed_id(dev, rng):
    x = rng.standard_normal((64, 50)).astype(np.float32)
    for seed, step in ((7, 3), (2**64 - 1, 2**32 - 1)):
        got = wg.ops.sample(dev.tensor(x), temperature=0.8, seed=seed, step=step).numpy().tolist()
        assert got == reference_draws(x, 0.8, seed, step), (seed, step)


def test_program_update_with_numpy_scalars(dev):
    """Program.update keeps the params it is given: a seed np.int32(7) raised numpy's 'OverflowError: Python
    integer 4294967295 out of bounds for int32' (seed & 0xFFFFFFFF), and temperature np.float16(1e-5) gave
    1 / temperature = f16's inf, which min(., 1e30) kept (1e30 is inf in f16): 0 * inf made the top weight NaN and
    no row drew anything (GpuValueError) where logits 1e-5 apart have weights e^-k. Both now draw the float64
    reference's ids."""
    import attrs

    x = np.tile(np.arange(8, dtype=np.float32)[::-1] * np.float32(1e-5), (64, 1))
    g = wg.Graph("sampler")
    g.output("ids", wg.ops.sample(g.input("x", x.shape, "f32"), temperature=1.0, seed=1))
    prog = g.compile(dev)
    node = next(n for n in prog.order if prog.graph.node(n).op == "sample")
    for temperature, seed in ((0.8, np.int32(7)), (np.float16(1e-5), 7)):
        prog.update(node, attrs.evolve(prog.params[node], temperature=temperature, seed=seed))
        got = prog.run(x=x)["ids"].numpy().tolist()
        assert got == reference_draws(x, float(temperature), 7, 0), temperature


def test_sample_rows_past_the_cpu_loop_cap_raise(dev):
    if not dev.caps.is_cpu:
        pytest.skip("the 65,535-iteration loop cap is lavapipe's")
    x = dev.tensor(np.zeros((1, 650000), np.float32))
    before = dev.stats.snapshot()
    with pytest.raises(wg.LimitError, match=r"sample: a row of 650000 values takes \d+ loop iterations"):
        wg.ops.sample(x, top_k=50, top_p=0.9)
    assert dev.stats.since(before).dispatches == 0
    assert wg.ops.sample(x, top_k=50).numpy()[0] < 650000  # one search fits (zeros: any id is a candidate)


@pytest.mark.parametrize("top_k,top_p,dim", [(5, 1.0, 1193727), (0, 1.0, 5588986)])
def test_sample_rows_at_the_cpu_loop_cap_draw_or_raise(dev, top_k, top_p, dim):
    """A row the loop count let through on lavapipe drew nothing: its output kept the value it had (12345), no
    error (top_k alone at 1193727 values, no filter at 5588986; lavapipe also runs the loops of the filter that is
    off). A row is refused or draws the float64 answer: the one id whose weight is not 0, the row's last (the
    longest walk of the draw); a row 20 x 256 values shorter draws."""
    if not dev.caps.is_cpu:
        pytest.skip("the 65,535-iteration loop cap is lavapipe's")
    for n in (dim, dim - 20 * 256):   # 20 fewer trips of each loop over the row
        x = np.full((1, n), -200.0, np.float32)
        x[0, -1] = 10.0
        out = dev.tensor(np.array([12345], np.uint32))
        try:
            wg.ops.sample(dev.tensor(x), temperature=1.0, top_k=top_k, top_p=top_p, seed=1, out=out)
        except wg.LimitError:
            assert n == dim, n   # only the row at the old edge may be refused
            continue
        assert out.numpy().tolist() == [n - 1], n
        del x


def test_sample_errors(dev):
    x = dev.tensor(np.zeros((2, 10), np.float32))
    with pytest.raises(wg.ArgumentError, match=r"sample: temperature=-1.0 must be a finite real in \[0, "):
        wg.ops.sample(x, temperature=-1.0)
    with pytest.raises(wg.ArgumentError, match=r"sample: temperature='0' must be a finite real"):
        wg.ops.sample(x, temperature="0")   # not argmax: a string is no number
    with pytest.raises(wg.ArgumentError, match=r"top_p=1.5 must be a finite real in \(0, 1\]"):
        wg.ops.sample(x, top_p=1.5)
    with pytest.raises(wg.ArgumentError, match=r"sample: temperature=np.float16\(inf\) must be a finite real"):
        wg.ops.sample(x, temperature=np.float16(np.inf))   # numpy compares an f16 with F32_MAX in f16: inf
    with pytest.raises(wg.ArgumentError, match=r"top_k=-3 must be an integer in \[0, 4294967295\]"):
        wg.ops.sample(x, top_k=-3)
    for temperature in (1.0, 0):   # temperature 0 is argmax, which reads no step: a bad one was never seen
        with pytest.raises(wg.DtypeError, match=r"GPU step must be a u32 tensor with one value, got \(1,\) f32"):
            wg.ops.sample(x, temperature=temperature, step=dev.tensor(np.zeros(1, np.float32)))
        with pytest.raises(wg.ShapeError, match=r"GPU step must be a u32 tensor with one value, got \(2,\) u32"):
            wg.ops.sample(x, temperature=temperature, step=dev.tensor(np.zeros(2, np.uint32)))
    with pytest.raises(wg.ArgumentError, match=r"seed=-1 must be an integer in \[0, 18446744073709551615\]"):
        wg.ops.sample(x, seed=-1)
    for bad, match in [(dict(temperature=float("nan")), r"temperature=nan must be a finite real"),
                       (dict(temperature=True), r"temperature=True must be a finite real"),
                       (dict(top_k=True), r"top_k=True must be an integer"),
                       (dict(top_k=2.0), r"top_k=2.0 must be an integer"),
                       (dict(top_p=0), r"top_p=0 must be a finite real in \(0, 1\]"),
                       (dict(top_p=np.float64(1.0000001)), r"top_p=np.float64\(1.0000001\) must be"),
                       (dict(seed=2**64), r"seed=18446744073709551616 must be an integer in \[0, 1844674407370955161"),
                       (dict(seed=np.int64(-1)), r"seed=np.int64\(-1\) must be an integer"),
                       (dict(step=2**32), r"step=4294967296 must be an integer in \[0, 4294967295\]"),
                       (dict(step=1.0), r"step=1.0 must be an integer")]:
        with pytest.raises(wg.ArgumentError, match="^sample: " + match):
            wg.ops.sample(x, **bad)
    with pytest.raises(wg.ShapeError, match=r"sample: out= has shape \(2, 1\), the op makes \(2,\)"):
        wg.ops.sample(x, out=dev.empty((2, 1), "u32"))
    with pytest.raises(wg.DtypeError, match=r"sample: out= has dtype i32, the op makes u32"):
        wg.ops.sample(x, out=dev.empty((2,), "i32"))
    # temperature 0 runs argmax: its refusals name sample, the call made, and say why argmax is there
    with pytest.raises(wg.ShapeError, match=r"^sample \(temperature 0 is argmax\): argmax: out= has shape \(2, 1\)"):
        wg.ops.sample(x, temperature=0, out=dev.empty((2, 1), "u32"))
    with pytest.raises(wg.ShapeError, match=r"^sample \(temperature 0 is argmax\): argmax: x must be \[\.\.\., dim\]"):
        wg.ops.sample(dev.empty((0,), "f32"), temperature=0)
    # numpy scalars are the numbers they hold: the same draws as Python's
    y = dev.tensor(np.random.default_rng(0).standard_normal((64, 30)).astype(np.float32))
    want = wg.ops.sample(y, temperature=0.5, top_k=7, top_p=0.75, seed=2**64 - 1, step=9).numpy()
    got = wg.ops.sample(y, temperature=np.float64(0.5), top_k=np.int8(7), top_p=np.float32(0.75),
                        seed=np.uint64(2**64 - 1), step=np.uint32(9)).numpy()
    assert got.tobytes() == want.tobytes()
    with pytest.raises(wg.ShapeError, match=r"argmax: x must be \[\.\.\., dim\] with dim >= 1, got \(3, 0\)"):
        wg.ops.argmax(dev.empty((3, 0), "f32"))
    with pytest.raises(wg.ShapeError, match=r"sample: logits must be \[\.\.\., dim\] with dim >= 1, got \(0,\)"):
        wg.ops.sample(dev.empty((0,), "f32"))   # named as sample names it (it said x)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_sample_row_with_a_nan_or_inf_draws_nothing(dev, rng, dtype):
    """A row of NaN drew a token with no error (`d < -104` is false for NaN in sample.wgsl's weight()). Where
    torch's softmax is NaN (a NaN or a +inf logit in the row) its multinomial raises: wgraph draws nothing there,
    writes 4294967295 and raises GpuValueError at the next check; the other rows draw as they do without them."""
    if dtype == np.float16 and not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    x = rng.standard_normal((5, 300)).astype(dtype)
    clean = x.copy()
    x[0] = np.nan                 # every logit NaN
    x[1, 250] = np.nan            # one NaN among numbers
    x[2, 7] = np.inf              # one +inf
    x[3, :] = -np.inf
    x[3, 9] = 0.0                 # one finite logit among -inf: always drawn
    for kwargs in (dict(), dict(top_k=20), dict(top_p=0.8)):
        options = dict(temperature=0.7, seed=5, step=2, **kwargs)
        want = wg.ops.sample(dev.tensor(clean), **options).numpy()   # the draw is a hash of (seed, step, row)
        ids = wg.ops.sample(dev.tensor(x), **options)
        with pytest.raises(wg.GpuValueError, match=r"sample: the count of tokens a row could draw .* was 0"):
            dev.check_errors()
        got = ids.numpy()
        assert got[:3].tolist() == [0xFFFFFFFF] * 3 and got[3] == 9 and got[4] == want[4], (kwargs, got, want)


F32_MAX = float(np.finfo(np.float32).max)


@pytest.mark.parametrize("logits,temperature", [
    ("normal", 1e30), ("normal", 3e38), ("normal", F32_MAX),     # softmax(logits / t) is uniform to f32's precision
    ("normal", 1e-30), ("normal", 1e-45), ("normal", 5e-324),    # argmax
    ([3e38, -3e38, 0.0, 1e38], 3e38), ([F32_MAX, -F32_MAX], F32_MAX),   # a row spanning more than f32's max
    ([0.0, -1e-35, -2e-35], 1e-35), ([0.0, -1e-35, -2e-35], 1e-40), ([1e-30, 0.0], 1e-45),   # gaps below 1e-28
])
def test_sample_extreme_temperatures_draw_the_float64_softmax(dev, rng, logits, temperature):
    """sample weighed (v - max) * min(1 / temperature, 1e30), one f32: at temperature 1e-35 logits 1e-35 apart
    weighed e^-1e-5 each (near uniform; the float64 softmax is e^0, e^-1, e^-2), at 1e-40 or below they never
    reached argmax, and in a row spanning more than f32's max v - max overflowed to -inf (weight 0: at temperature
    3e38 only the max was drawn, where softmax gives the others 9% and more). The overflow, taken by a test of that
    -inf, still drew none but the max on the H100 (Vulkan lets its compiler assume no infinities): the halved gap is
    now chosen from the logits alone. Each draw is the float64 reference's."""
    x = (rng.standard_normal(16) * 3).astype(np.float32) if logits == "normal" else np.array(logits, np.float32)
    rows = np.tile(x, (256, 1))
    got = wg.ops.sample(dev.tensor(rows), temperature=temperature, seed=9).numpy()
    dev.check_errors()
    assert got.tolist() == reference_draws(rows, temperature, 9, 0)


def test_sample_top_p_at_a_tiny_temperature_keeps_the_float64_nucleus(dev):
    """softmax([0, -1, -2, -3]) is 0.64, 0.24, 0.09, 0.03: top_p=0.8 keeps the first two. At temperature 1e-35 with
    logits 1e-35 apart the weights were all ~1 and the nucleus held all four."""
    x = np.tile(np.array([0.0, -1e-35, -2e-35, -3e-35], np.float32), (512, 1))
    got = wg.ops.sample(dev.tensor(x), temperature=1e-35, top_p=0.8, seed=4).numpy()
    assert set(got.tolist()) == {0, 1}
