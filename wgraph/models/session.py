"""A decoder's one-generation-at-a-time lock (Llama, BatchedDecoder and the text functions over them): the KV
caches, positions and history rows belong to the generation in progress."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from wgraph.errors import RecordingError


class SessionLock:
    """Another thread's call waits for the generation in progress (two threads' generate calls overwrote each
    other's prompts); a call from inside a generate's `progress` callback, on the same thread, which a re-entrant
    lock lets in, is refused: it reset the caches and positions under the generation, which then returned ids of
    neither call without an error. Use: `with self._lock("generate"):`, and the callback inside
    `with self._lock.callback():`."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._lock = threading.RLock()
        self._callback_thread: int | None = None

    def __call__(self, where: str) -> threading.RLock:
        if self._callback_thread == threading.get_ident():
            raise RecordingError(f"{where}: called from inside {self.owner}.generate's progress callback; the "
                                 f"generation in progress owns the caches and positions (call it after generate "
                                 f"returns)")
        return self._lock

    @contextlib.contextmanager
    def callback(self) -> Iterator[None]:
        """Marks the running progress callback's thread while it runs (the lock is held: no other thread's)."""
        self._callback_thread = threading.get_ident()
        try:
            yield
        finally:
            self._callback_thread = None
