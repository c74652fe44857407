"""Progress bars for long work (model loading; the CLI's soak, bench and generate): a tqdm bar on stderr when
stderr is a terminal and wgraph is not quiet, else nothing (the CLI asks for plain lines instead, for logs).
Quiet: `wgraph.set_quiet(True)`, or WGRAPH_QUIET=1 in the environment (read at each bar)."""

from __future__ import annotations

import os
import sys
import time

from wgraph import args

_quiet: bool | None = None   # None: WGRAPH_QUIET decides


def set_quiet(quiet: bool = True) -> None:
    """quiet: True turns wgraph's progress bars off, False back on where stderr is a terminal, whatever
    WGRAPH_QUIET says."""
    global _quiet
    _quiet = args.flag("set_quiet", "quiet", quiet)


def is_quiet() -> bool:
    """set_quiet's choice, else whether WGRAPH_QUIET is set to something other than "" or "0"."""
    if _quiet is not None:
        return _quiet
    return os.environ.get("WGRAPH_QUIET", "").strip() not in ("", "0")


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):   # replaced by an object without isatty, or closed
        return False


class _Silent:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Lines(_Silent):
    """Plain lines on stderr ("desc: 3/10 unit, 1.2 s") at every tenth of the total: a log gets no carriage
    returns."""

    def __init__(self, total: int, desc: str, unit: str):
        self.total, self.desc, self.unit = total, desc, unit
        self.done, self.shown, self.t0 = 0, 0, time.perf_counter()

    def update(self, n: int = 1) -> None:
        self.done += n
        tenth = self.done * 10 // max(1, self.total)
        if tenth > self.shown or self.done == self.total:
            self.shown = tenth
            print(f"{self.desc}: {self.done}/{self.total} {self.unit}, {time.perf_counter() - self.t0:.1f} s",
                  file=sys.stderr, flush=True)


def bar(total: int, desc: str, unit: str = "it", *, lines: bool = False):
    """A counter with update(n) and close() (and `with`): a tqdm bar on a terminal unless quiet; plain lines on
    a stderr that is not a terminal when `lines` (the CLI's); otherwise it shows nothing."""
    if is_quiet():
        return _Silent()
    if stderr_is_terminal():
        from tqdm import tqdm   # here: tqdm's import is only paid where a bar shows

        return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)
    return _Lines(total, desc, unit) if lines else _Silent()
