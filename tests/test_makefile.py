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


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_a_driver_in_either_icd_folder_is_found(tmp_path):
    """A Vulkan driver's manifest in either folder the loader reads keeps the lavapipe install out, the other folder
    empty or missing; none in either installs it (LAVAPIPE_INSTALL is replaced by an echo)."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    usr, etc = tmp_path / "usr_icd", tmp_path / "etc_icd"
    usr.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VK_DRIVER_FILES", "VK_ICD_FILENAMES")}

    def setup() -> str:
        for stamp in tmp_path.glob(".setup-*.stamp"):
            stamp.unlink()
        run = subprocess.run(["make", "--no-print-directory", "setup", f"PYTHON={sys.executable}",
                              "PIP_INSTALL=true", "LAVAPIPE_INSTALL=echo lavapipe-install",
                              f"VULKAN_ICD_DIRS={usr} {etc}"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        return run.stdout

    assert "lavapipe-install" in setup()                       # both empty (etc missing): no driver
    (usr / "lvp_icd.x86_64.json").write_text("{}")
    assert "lavapipe-install" not in setup()                   # in the first folder, the second missing
    etc.mkdir()
    assert "lavapipe-install" not in setup()                   # in the first folder, the second empty
    (usr / "lvp_icd.x86_64.json").unlink()
    (etc / "nvidia_icd.json").write_text("{}")
    assert "lavapipe-install" not in setup()                   # in the second folder only
