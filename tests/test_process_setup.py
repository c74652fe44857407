"""A normal script prints nothing to stderr: no "XDG_RUNTIME_DIR is invalid" from the Vulkan loader (wgraph sets a
private runtime dir when none is set) and no "DEVICE LOST!" banner for an intended destroy. The same script checks
that networkx is imported only when a Graph is built (one fresh process for both: each costs ~3.5 s, the
registry's load and a device)."""

import os
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
