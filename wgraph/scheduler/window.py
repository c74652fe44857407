"""`InFlightWindow`: submit work back to back while at most `depth` submissions are unfinished on the GPU.

The host waits (a fence, not a readback) only for the oldest submission once `depth` are in flight, so it
encodes the next replay while the GPU runs the previous ones, and never gets further ahead than `depth`.
Any replay uses it: `Program.run_many`, a decode loop (`Llama.run_steps`), a captured list given to `dev.run`."""

from __future__ import annotations

import collections

from wgraph import args


class InFlightWindow:
    """At most `depth` of the submissions made through `submit` unfinished on the GPU at once."""

    def __init__(self, scheduler, depth: int):
        self._scheduler = scheduler
        self.depth = args.integer("InFlightWindow", "depth", depth, 1)
        self._fences: collections.deque[int] = collections.deque()

    def submit(self, run):
        """Call `run()` (which submits work) once fewer than `depth` earlier calls are unfinished; returns
        what it returns."""
        scheduler = self._scheduler
        while len(self._fences) >= self.depth:
            scheduler.wait(self._fences.popleft())
        before = scheduler.last_index
        result = run()
        fence = scheduler.fence()
        # a call that submitted nothing (a program without dispatches) has no work to wait for: its fence would be
        # older work's, and the window waited for it (a GPU wait counted) as if it were in flight
        if fence != before:
            self._fences.append(fence)
        return result
