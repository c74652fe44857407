"""Soak, CI size: 300 replays of a compiled decode step and 300 immediate attention calls; after warm-up the
live GPU buffers do not grow and RSS stays within a small margin. The 10,000-step run is `python -m wgraph
soak` (figures in docs/benchmarks.md, "Soak")."""

import re

import pytest

from wgraph.soak import RSS_MARGIN_BYTES, growth_after, main, soak_immediate, soak_replay, verdict


def test_compiled_decode_replay_does_not_grow(dev):
    samples = soak_replay(dev, 300, every=50)
    buffers, rss = growth_after(samples, warmup=100)
    assert buffers == 0, samples
    assert rss <= RSS_MARGIN_BYTES, samples
    assert verdict({"replay": samples}, warmup=100)[0]


def test_immediate_attention_does_not_grow(dev):
    # kv_len cycles over 300 values: every length's template and the pool's buffers are made in the first 300
    samples = soak_immediate(dev, 600, every=50)
    buffers, rss = growth_after(samples, warmup=300)
    assert buffers == 0, samples
    assert rss <= RSS_MARGIN_BYTES, samples
    assert verdict({"immediate": samples}, warmup=300)[0]


def test_verdict_fails_on_growth():
    flat = [(0, 10, 100 << 20), (100, 12, 101 << 20), (200, 12, 101 << 20)]
    assert verdict({"a": flat}, warmup=100) == (True, "PASS: flat after warm-up (a: live buffers +0, RSS "
                                                      "+0.00 MiB; RSS allowed +4 MiB)")
    leak = flat[:2] + [(200, 13, 101 << 20)]
    fat = flat[:2] + [(200, 12, (101 << 20) + RSS_MARGIN_BYTES + 1)]
    assert verdict({"a": flat, "b": leak}, warmup=100) == (
        False, "FAIL: b holds 1 more live GPU buffers after warm-up (allowed: 0)")
    assert verdict({"c": fat}, warmup=100) == (False, "FAIL: c grew RSS by 4.00 MiB after warm-up (allowed: 4 MiB)")


def test_soak_cli_ends_with_its_verdict(dev, capsys):
    rc = main(["--steps", "40", "--calls", "40", "--every", "10", "--warmup", "20"])
    out, err = capsys.readouterr()
    last = out.strip().splitlines()[-1]
    # progress while it runs: plain lines on a stderr that is not a terminal, up to each run's count
    assert "\r" not in err and "soak: compiled decode step: 40/40 steps" in err
    assert "soak: immediate attention: 40/40 calls" in err
    assert re.match(r"(PASS|FAIL): ", last), last
    assert rc == (0 if last.startswith("PASS") else 1)


def test_the_last_step_is_sampled_and_a_run_without_two_samples_is_refused(dev, capsys):
    """Samples came every `every` steps only: a run of 20 steps sampling every 1000 compared the first sample
    with itself and printed PASS having measured nothing. The last step is sampled too, and a run whose warm-up
    leaves no sample before the last is refused before it starts."""
    import pytest

    assert [s[0] for s in soak_replay(dev, 23, every=10)] == [1, 10, 20, 23]
    with pytest.raises(SystemExit) as info:
        main(["--steps", "12", "--calls", "12", "--warmup", "10", "--every", "7"])
    assert info.value.code == 2
    assert "--steps 12 leaves no sample after the warm-up of 10" in capsys.readouterr().err


@pytest.mark.parametrize("name, value", [("--steps", -5), ("--steps", 1), ("--calls", 0)])
def test_a_count_below_two_is_refused_by_name(capsys, name, value):
    """--steps -5 said it 'leaves no sample after the warm-up of 1000', blaming the warm-up; it names the count,
    the value and the minimum (two samples: after the first step and the last)."""
    argv = ["--steps", "100", "--calls", "100", "--warmup", "0", "--every", "10", name, str(value)]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert f"{name} {value} must be at least 2 (growth is measured between two samples" in capsys.readouterr().err


def test_a_doc_path_that_cannot_be_written_is_refused_before_the_run(capsys, monkeypatch, tmp_path):
    """--write-doc under a file ran the whole soak, then raised NotADirectoryError before the verdict was printed
    (a traceback, exit code 1 whatever the verdict); --write-doc "" was falsy and ignored. Both are now usage
    errors before the device opens."""
    import wgraph

    monkeypatch.setattr(wgraph, "default_device", lambda *a, **k: pytest.fail("the run started"))
    (tmp_path / "f").write_text("")
    for path, said in ((str(tmp_path / "f" / "b.md"), f"{tmp_path / 'f'} is not a directory"),
                       ("", "--write-doc '': is empty; give a file path")):
        with pytest.raises(SystemExit) as info:
            main(["--steps", "2", "--calls", "2", "--warmup", "0", "--write-doc", path])
        assert info.value.code == 2 and said in capsys.readouterr().err


def test_rss_without_proc_is_in_bytes_on_macos_and_linux(monkeypatch):
    """Without /proc, RSS is getrusage's peak: ru_maxrss is bytes on macOS and KiB on Linux; it was multiplied by
    1024 on both, so a macOS soak saw 4 KiB of growth as 4 MiB and failed."""
    import resource
    import sys
    import types

    import wgraph.soak as soak

    def no_proc(*a, **k):
        raise FileNotFoundError("/proc/self/statm")

    monkeypatch.setattr(soak, "open", no_proc, raising=False)   # found before the builtin
    monkeypatch.setattr(resource, "getrusage", lambda who: types.SimpleNamespace(ru_maxrss=5 << 20))
    monkeypatch.setattr(sys, "platform", "darwin")
    assert soak.rss_bytes() == 5 << 20
    monkeypatch.setattr(sys, "platform", "linux")
    assert soak.rss_bytes() == 5 << 30


def test_the_decode_step_attends_over_the_rings_keys(dev):
    """The soak's decode step past its ring (CAPACITY + 3 steps) attends over the newest CAPACITY keys, as float64
    does; it attended with no window, so a GPU kv_len past the ring is now reported (docs/errors.md)."""
    import numpy as np

    from wgraph.dtypes import dtype_info
    from wgraph.soak import CAPACITY, HKV, HQ, D, decode_step_graph, kv_dtype

    rng = np.random.default_rng(1)
    kv_type = kv_dtype(dev)
    prog = decode_step_graph(kv_type).compile(dev)
    steps = CAPACITY + 3
    q = rng.standard_normal((1, HQ, D)).astype(np.float32)
    k, v = (rng.standard_normal((steps, 1, HKV, D)).astype(dtype_info(kv_type).numpy) for _ in range(2))
    for t in range(steps):
        out = prog.run(q=q, k_new=k[t], v_new=v[t], pos=t, kv_len=t + 1)["out"]
    got = out.numpy()
    keys, vals = k[-CAPACITY:, 0].astype(np.float64), v[-CAPACITY:, 0].astype(np.float64)   # [CAPACITY, HKV, D]
    for h in range(HQ):
        s = keys[:, h // (HQ // HKV)] @ q[0, h].astype(np.float64) / np.sqrt(D)
        p = np.exp(s - s.max())
        want = (p / p.sum()) @ vals[:, h // (HQ // HKV)]
        np.testing.assert_allclose(got[0, h], want, atol=2e-3, rtol=2e-3)
