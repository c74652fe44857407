"""What wgraph's commands share: the help formatter (every option's default in its help, said once) and the
check of an output path before a run."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" to an option's help unless its help already says its default, or there is none to
    say (None, False: an absent option or an off switch)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default is None or action.default is False:
            return text
        return super()._get_help_string(action)


def unwritable(path: str) -> str | None:
    """Why a file cannot be written at `path` (its missing folders made first, as report.write_json and
    plot_result do), or None: a directory there, a file where a folder goes, a folder or file this user may not
    write."""
    if not path:   # Path("") is the working folder: refused as one, not taken for "no file"
        return "is empty; give a file path"
    if "\0" in path:   # Path.is_dir() / exists() take it for nothing there: the write after the run raised
        return "holds a NUL byte, which no file name can"
    try:
        return _unwritable(Path(path))
    except OSError as e:   # a name past the file system's limit: is_dir()'s raw OSError (File name too long)
        return f"cannot be a file path ({e.strerror})"


def _unwritable(p: Path) -> str | None:
    if p.is_dir():
        return "is a directory; give a file path"
    if p.exists():
        return None if os.access(p, os.W_OK) else "is not writable"
    folder = p.parent
    while not folder.exists() and folder != folder.parent:   # the folders write_json would make
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a directory, so no file can be made under it"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"the folder {folder} is not writable"
    return None
