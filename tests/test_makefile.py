"""The Makefile's setup stamp belongs to one interpreter: after `make setup` with one Python, the same Python skips
the install and another (a second virtual environment) installs. PIP_INSTALL is replaced by an echo: no pip runs."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _setup(tmp_path: Path, python: Path) -> str:
    env = {**os.environ, "VK_DRIVER_FILES": "set"}   # a Vulkan driver "present": the apt-get branch stays out
    run = subprocess.run(["make", "--no-print-directory", "setup", f"PYTHON={python}",
                          f"PIP_INSTALL=echo installing for {python}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_setup_stamp_is_per_interpreter(tmp_path):
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    a, b = tmp_path / "venv_a" / "python3", tmp_path / "venv_b" / "python3"
    for link in (a, b):   # two interpreters as two virtual environments look: two paths, two sys.executable
        link.parent.mkdir()
        link.symlink_to(sys.executable)
    assert f"installing for {a}" in _setup(tmp_path, a)
    assert "installing" not in _setup(tmp_path, a)            # the same interpreter: set up already
    assert f"installing for {b}" in _setup(tmp_path, b)       # another one installs, although a's stamp is there
    assert "installing" not in _setup(tmp_path, b)
    assert len(list(tmp_path.glob(".setup-*.stamp"))) == 2
