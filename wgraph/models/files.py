"""Reading a checkpoint's text and JSON files (config.json, the safetensors index, tokenizer files, chat templates): regular
files only (after symlinks: a device or a FIFO reports 0 bytes and reads forever), at most `limit` bytes read
whatever the file system says, UTF-8. Every failure is a CheckpointError naming the file."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from wgraph.errors import CheckpointError


def kind(path: Path) -> str | None:
    """What is at `path` (symlinks followed): "dir", "file" (a regular one), "other" (a device, a FIFO), or None
    where nothing is; a CheckpointError naming the path where the system refuses to look it up. Path.is_dir() and
    is_file() raised a name past the file system's limit raw (OSError: File name too long) and took a symlink loop
    for nothing there."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as e:   # ValueError: a NUL byte in the name
        raise CheckpointError(f"cannot read {path}: {e}") from None
    return "dir" if stat.S_ISDIR(st.st_mode) else "file" if stat.S_ISREG(st.st_mode) else "other"


def regular_file(path: Path) -> os.stat_result:
    """The stat of `path` (symlinks followed), which must be a regular file."""
    try:
        st = os.stat(path)
    except (OSError, ValueError) as e:   # ValueError: a NUL byte in the name (os.stat's raw 'embedded null byte')
        raise CheckpointError(f"cannot read {path}: {e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(f"{path} is not a regular file (a directory, a device or a FIFO): refused")
    return st


def read_text(path: Path, limit: int) -> str:
    """The UTF-8 text of the regular file `path`, refused past `limit` bytes."""
    regular_file(path)
    try:
        # non-blocking, so a file swapped for a FIFO after the check does not block the open; checked again
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise CheckpointError(f"{path} is not a regular file: refused")
            data = f.read(limit + 1)
    except OSError as e:
        raise CheckpointError(f"cannot read {path}: {e}") from None
    if len(data) > limit:
        raise CheckpointError(f"{path} is larger than {limit} bytes: refused")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path} is not UTF-8 text: {e}") from None


def read_json(path: Path, limit: int):
    """The JSON value of the regular file `path` (read_text's rules); text that is not JSON, or nests deeper than
    the parser goes (RecursionError), is a CheckpointError naming the file and the parser's reason."""
    text = read_text(path, limit)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise CheckpointError(f"{path} is not valid JSON: {type(e).__name__}: {e}") from None
