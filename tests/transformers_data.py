"""Reading the checkpoints transformers saved for the golden tests (tests/data/arch/, tests/data/arch_variants/):
each case directory holds model.safetensors, its config in both formats and the golden outputs (golden.npz)."""

import shutil
from pathlib import Path

import numpy as np

FORMATS = {"v5": "config.json", "v4": "config_v4.json"}   # transformers 5's config.json, and 4's
ARCH = Path(__file__).parent / "data" / "arch"              # one case per architecture (make_arch_checkpoints.py)


def checkpoint(case_dir: Path, tmp_path: Path, fmt: str) -> Path:
    """A checkpoint directory of the case in `case_dir` whose config.json is the file of format `fmt`."""
    out = tmp_path / f"{case_dir.name}_{fmt}"
    out.mkdir()
    shutil.copy(case_dir / "model.safetensors", out)
    shutil.copy(case_dir / FORMATS[fmt], out / "config.json")
    return out


def golden(case_dir: Path) -> dict:
    """The case's golden arrays (transformers' logits and ids), by name."""
    with np.load(case_dir / "golden.npz") as g:
        return {k: g[k] for k in g.files}
