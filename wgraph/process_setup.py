"""What wgraph sets up for the process: before it first asks wgpu for an adapter (which starts the Vulkan loader), a
private XDG_RUNTIME_DIR when none is set (Mesa's lavapipe prints "XDG_RUNTIME_DIR is invalid" twice otherwise;
logged at INFO); at import, a filter on wgpu's logger that drops the lines an intended `destroy()` or release makes
("DEVICE LOST!", "device was lost (destroyed)")."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import stat
import sys
import tempfile

log = logging.getLogger(__name__)

def private_runtime_dir() -> None:
    """Set XDG_RUNTIME_DIR to a 0700 directory of this user under the temp dir, on Linux, when it is unset."""
    if not sys.platform.startswith("linux") or os.environ.get("XDG_RUNTIME_DIR"):
        return
    path = os.path.join(tempfile.gettempdir(), f"wgraph-runtime-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return  # an unwritable temp dir: the loader only warns
    if not _own_private_dir(path):
        # someone else's, a symlink or not a directory: a fresh 0700 dir for this process, removed at its exit
        # (one was made, and left behind, by every process while the shared name was unusable)
        try:
            path = tempfile.mkdtemp(prefix="wgraph-runtime-")
        except OSError:
            return
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    os.environ["XDG_RUNTIME_DIR"] = path
    log.info("XDG_RUNTIME_DIR was not set: set it to %s (a 0700 directory of this user) for the Vulkan loader", path)


def _own_private_dir(path: str) -> bool:
    """Whether `path` is a directory (not a symlink) of this user, made 0700 where its mode was looser (it is
    ours to change: a 0755 one, made by hand or under another umask, was refused at each start for a new one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False
        if info.st_mode & 0o077:
            os.fchmod(fd, stat.S_IMODE(info.st_mode) & 0o700)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


# wgpu's device-lost callback reasons that are not a loss: destroy() was called, or the device was released
# (wgpu-native cancels its callbacks when a dropped device is freed).
_NOT_A_LOSS = ("the wgpu device was lost (destroyed)", "the wgpu device was lost (callbackcancelled)")


class IntendedDestroyFilter(logging.Filter):
    """Drops wgpu's device-lost lines whose reason is an intended destroy or release, and the bare banner before
    them; a real loss still logs "The WGPU device was lost (unknown): ..." with its message."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return msg != "DEVICE LOST!" and not msg.lower().startswith(_NOT_A_LOSS)


def quiet_intended_destroy() -> None:
    import wgpu  # noqa: F401  (wgpu installs its own Logger class for "wgpu"; let it make the logger first)

    logger = logging.getLogger("wgpu")
    if not any(isinstance(f, IntendedDestroyFilter) for f in logger.filters):
        logger.addFilter(IntendedDestroyFilter())
