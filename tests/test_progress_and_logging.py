"""What wgraph says while it works: tqdm bars only on a terminal and never when quiet, plain lines (no carriage
return) for the CLI's logs, and the "wgraph" logger's records of what the library does behind the caller's back
(the adapter chosen, a runtime directory made, a model loaded)."""

import io
import logging
import os
import stat
import sys

import pytest

import wgraph as wg
from wgraph import process_setup, progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def loud(monkeypatch):
    """Progress as a user's session has it: not quiet, WGRAPH_QUIET unset; the switch restored after."""
    monkeypatch.delenv("WGRAPH_QUIET", raising=False)
    monkeypatch.setattr(progress, "_quiet", None)


def test_a_bar_shows_only_on_a_terminal_and_never_when_quiet(loud, monkeypatch):
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    from tqdm import tqdm

    with progress.bar(4, "loading weights", "tensors") as b:
        b.update(4)
    assert isinstance(b, tqdm) and b.n == 4   # a tqdm bar on the terminal, cleared when done (leave=False)
    assert term.getvalue().startswith("\rloading weights:   0%|") and "0/4" in term.getvalue()
    for quiet in ("env", "switch"):
        term.seek(0), term.truncate()
        if quiet == "env":
            monkeypatch.setenv("WGRAPH_QUIET", "1")
        else:
            monkeypatch.delenv("WGRAPH_QUIET")
            wg.set_quiet(True)
        with progress.bar(4, "loading weights", "tensors", lines=True) as b:
            b.update(4)
        assert term.getvalue() == "", quiet
    wg.set_quiet(False)
    monkeypatch.setenv("WGRAPH_QUIET", "1")
    assert not progress.is_quiet()   # the switch wins over the environment


def test_off_a_terminal_lines_without_carriage_returns(loud, monkeypatch):
    log = io.StringIO()   # a file: isatty() is False
    monkeypatch.setattr(sys, "stderr", log)
    with progress.bar(20, "soak replay", "steps") as b:   # a library bar: silent off a terminal
        b.update(20)
    assert log.getvalue() == ""
    with progress.bar(20, "soak replay", "steps", lines=True) as b:   # the CLI's: a line per tenth
        for _ in range(20):
            b.update()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and len(lines) == 10
    assert lines[0].startswith("soak replay: 2/20 steps") and lines[-1].startswith("soak replay: 20/20 steps")


def test_set_quiet_checks_its_argument():
    with pytest.raises(wg.ArgumentError, match=r"set_quiet: quiet=1 must be True or False"):
        wg.set_quiet(1)


def test_the_wgraph_logger_has_a_null_handler():
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("wgraph").handlers)


def test_device_logs_the_adapter_it_chose(caplog, monkeypatch, dev):
    monkeypatch.delenv("WGRAPH_ADAPTER", raising=False)
    with caplog.at_level(logging.INFO, logger="wgraph"):
        d = wg.Device()
    d.destroy()
    (rec,) = [r for r in caplog.records if r.name == "wgraph.device"]
    assert d.caps.adapter_name in rec.getMessage()
    # a CPU adapter nobody asked for is a warning: correct but far slower, and usually a missing GPU driver
    assert rec.levelno == (logging.WARNING if d.caps.is_cpu else logging.INFO)
    caplog.clear()
    monkeypatch.setenv("WGRAPH_ADAPTER", d.caps.adapter_name.split()[0])   # asked for by name: INFO
    with caplog.at_level(logging.INFO, logger="wgraph"):
        d = wg.Device()
    d.destroy()
    assert [(r.name, r.levelno) for r in caplog.records] == [("wgraph.device", logging.INFO)]


def test_runtime_dir_made_is_logged(caplog, monkeypatch, tmp_path):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(process_setup.tempfile, "gettempdir", lambda: str(tmp_path))
    with caplog.at_level(logging.INFO, logger="wgraph"):
        process_setup.private_runtime_dir()
    path = os.environ["XDG_RUNTIME_DIR"]
    assert path == str(tmp_path / f"wgraph-runtime-{os.getuid()}")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    assert [(r.levelno, path in r.getMessage()) for r in caplog.records] == [(logging.INFO, True)]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="wgraph"):
        process_setup.private_runtime_dir()   # set now: nothing to do, nothing said
    assert caplog.records == []


def test_model_loading_shows_a_bar_on_a_terminal_and_logs(loud, caplog, monkeypatch, tmp_path, dev):
    from wgraph.models import Llama
    from wgraph.models.llama import _program_weights
    from wgraph.models.random_checkpoint import write_random_checkpoint

    path = write_random_checkpoint(tmp_path)
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    with caplog.at_level(logging.INFO, logger="wgraph"):
        model = Llama.from_pretrained(path, dev, dtype="f32")
    n = len(_program_weights(model.config, "f32"))
    assert term.getvalue().startswith("\rloading weights:   0%|") and f"0/{n}" in term.getvalue()
    (rec,) = [r for r in caplog.records if r.name == "wgraph.models.llama"]
    assert rec.levelno == logging.INFO and "2 layers" in rec.getMessage()
    assert f"{model.weight_bytes / 2**20:.1f} MiB" in rec.getMessage()


def test_a_large_attention_on_a_cpu_adapter_is_said_before_it_runs(caplog, dev):
    """Compiling plans (and encodes) every node without running it: a 2048 x 2048 x 8 x 64 attention on a CPU
    adapter logs its GFLOP at INFO; a small one says nothing."""
    from wgraph.ops.cpu_limits import CPU_SLOW_FLOPS

    def compile_attention(s: int):
        g = wg.Graph("attn")
        q, k, v = (g.input(n, (s, 8, 64), "f32") for n in "qkv")
        g.output("o", wg.ops.attention(q, k, v, causal=True))
        with caplog.at_level(logging.INFO, logger="wgraph"):
            g.compile(dev)
        return [r for r in caplog.records if r.name == "wgraph.ops.cpu_limits"]

    flops = 4.0 * 2048 * 2048 * 8 * 64   # q.k and p.v, a multiply-add each, every (query, key) pair
    assert flops >= CPU_SLOW_FLOPS
    records = compile_attention(2048)
    if not dev.caps.is_cpu:
        assert records == []
        return
    (rec,) = records
    assert rec.levelno == logging.INFO and f"{flops / 1e9:.1f} GFLOP" in rec.getMessage()
    assert "2048 queries over 2048 keys" in rec.getMessage()
    caplog.clear()
    assert compile_attention(16) == []   # 4 * 16 * 16 * 8 * 64 flops: nothing to say


def test_a_kernel_taken_for_a_cpu_adapter_is_said_once(caplog, monkeypatch, dev):
    """On a CPU adapter the planner passes over GPU-tuned kernels and those past lavapipe's loop cap: the first
    plan that does so names the kernel taken and those passed over (from the plan's own rejected list)."""
    from wgraph.ops import core

    monkeypatch.setattr(core, "_CPU_CHOICES_SAID", set())
    specs = [wg.TensorSpec((64, 8, 64), "f32"), wg.TensorSpec((4096, 2, 64), "f32"), wg.TensorSpec((4096, 2, 64), "f32")]
    plan = wg.ops.attention_plan(*specs, causal=True, caps=dev.caps)
    passed = [v for v, why in plan.rejected if "a CPU device" in why]

    def compile_it():
        g = wg.Graph("attn")
        q, k, v = (g.input(n, s.shape, s.dtype) for n, s in zip("qkv", specs))
        g.output("o", wg.ops.attention(q, k, v, causal=True))
        with caplog.at_level(logging.INFO, logger="wgraph"):
            g.compile(dev)
        return [r.getMessage() for r in caplog.records if r.name == "wgraph.ops.core"]

    said = compile_it()
    if not dev.caps.is_cpu:
        assert said == [] and passed == []
        return
    assert passed and len(said) == 1
    assert plan.variant in said[0] and all(v in said[0] for v in passed)
    caplog.clear()
    assert compile_it() == []   # said once
