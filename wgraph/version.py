"""wgraph's version: the installed distribution's (pyproject.toml is the one source), or pyproject's own line when
the package runs from a checkout that was never installed."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path


def _version() -> str:
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.is_file():   # a checkout: its pyproject.toml, even where another wgraph is installed
        found = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M)
        if found:
            return found.group(1)
    try:
        return metadata.version("wgraph")
    except metadata.PackageNotFoundError:
        return "unknown"


__version__ = _version()
