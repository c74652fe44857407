"""A normal script prints nothing to stderr: no "XDG_RUNTIME_DIR is invalid" from the Vulkan loader (wgraph sets a
private runtime dir when none is set) and no "DEVICE LOST!" banner for an intended destroy. The same script checks
that networkx is imported only when a Graph is built (one fresh process for both: each costs ~3.5 s, the
registry's load and a device)."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r"""
import logging, os, stat, sys
import numpy as np
import wgraph as wg

assert "networkx" not in sys.modules, "import wgraph imported networkx"
dev = wg.Device()
assert wg.ops.scale(dev.tensor(np.ones(4, np.float32)), 2.0).numpy().tolist() == [2.0] * 4
assert "networkx" not in sys.modules, "an immediate op imported networkx"
wg.Graph("g")
assert "networkx" in sys.modules   # a Graph is a networkx DiGraph: built, it imports networkx
print("networkx: imported only by the Graph")
info = os.stat(os.environ["XDG_RUNTIME_DIR"])
assert info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700, oct(info.st_mode)
# What wgpu's device-lost callback logs for a destroy (lavapipe fires it only sometimes; log it as it would):
for line in ("DEVICE LOST!", "The WGPU device was lost (destroyed):\n", "The WGPU device was lost (CallbackCancelled):\n"):
    logging.getLogger("wgpu").error(line)
dev.destroy()
logging.getLogger("wgpu").error("The WGPU device was lost (unknown):\nreal loss")  # a real loss still shows
"""


@pytest.fixture(scope="module")
def run():
    """SCRIPT in a fresh process without XDG_RUNTIME_DIR."""
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    # this checkout first; keep the caller's path (wgpu may be installed on it, as on the GPU machine)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[1]),
                                                    os.environ.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)


def test_a_plain_script_prints_nothing_to_stderr(run):
    assert run.returncode == 0, run.stderr
    assert run.stderr.strip() == "The WGPU device was lost (unknown):\nreal loss", run.stderr


def test_networkx_is_imported_only_when_a_graph_is_built(run):
    assert run.returncode == 0, run.stderr
    assert run.stdout == "networkx: imported only by the Graph\n", run.stdout


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    """private_runtime_dir with the temp dir in tmp_path, XDG_RUNTIME_DIR unset, and the exit-time removals it
    registers collected rather than run."""
    from wgraph import process_setup

    if not sys.platform.startswith("linux"):
        pytest.skip("XDG_RUNTIME_DIR is set up on Linux only")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    at_exit = []
    monkeypatch.setattr("atexit.register", lambda f, *a, **k: at_exit.append((f, a, k)))

    def call():
        process_setup.private_runtime_dir()
        return os.environ["XDG_RUNTIME_DIR"]
    return tmp_path, tmp_path / f"wgraph-runtime-{os.getuid()}", call, at_exit


def test_a_loose_runtime_dir_of_this_user_is_made_private_and_used(runtime):
    tmp, shared, call, at_exit = runtime
    shared.mkdir()
    shared.chmod(0o755)   # made by hand, or under another umask
    assert call() == str(shared) and call() == str(shared)   # not a new temp dir at each start, left behind
    assert stat.S_IMODE(shared.stat().st_mode) == 0o700
    assert sorted(tmp.iterdir()) == [shared] and at_exit == []


def test_a_symlinked_runtime_dir_is_not_followed(runtime):
    tmp, shared, call, at_exit = runtime
    target = tmp / "elsewhere"
    target.mkdir(mode=0o755)
    shared.symlink_to(target)
    path = Path(call())
    assert path.parent == tmp and path not in (shared, target)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700 and stat.S_IMODE(target.stat().st_mode) == 0o755
    assert [(f.__name__, a) for f, a, _ in at_exit] == [("rmtree", (str(path),))]   # removed at the exit
