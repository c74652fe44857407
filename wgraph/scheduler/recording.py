"""`Recording`: a command list that op calls and `dev.write` on one thread append to, submitted once when
the `with dev.record():` block ends. An exception inside the block discards it, and the tensors its ops
returned become unusable (using one raises RecordingError naming the recording)."""

from __future__ import annotations

import itertools
import threading
import weakref

from wgraph.errors import DeviceError, RecordingError
from wgraph.scheduler.commands import CommandList
from wgraph.scheduler.dispatch import Dispatch
from wgraph.scheduler.profiling import ProfileTable, Timestamps

_names = itertools.count(1)


class Recording:
    """Items appended by op calls and writes, encoded into one command encoder and sent in one submit.

    Use `with dev.record() as rec:`; leaving the block submits, an exception inside it submits nothing.
    """

    def __init__(self, scheduler, caps, profile: bool = False, label: str | None = None):
        self.scheduler = scheduler
        self.caps = caps
        self.label = label or f"recording #{next(_names)}"
        self.commands = CommandList(scheduler, label=f"wgraph.{self.label}")
        self.state = "open"
        self._want_profile = profile
        self._timestamps: Timestamps | None = None
        self._ticks: tuple[int, ...] | None = None
        self._labels: list[str] = []
        self._outputs: list[weakref.ref] = []  # tensors the recorded ops made: poisoned if it is discarded
        self._thread = threading.get_ident()  # a recording belongs to the thread that made it

    @property
    def items(self) -> list:
        """The recorded items (dispatches, copies, writes) so far, a copy, for a replay with dev.run(rec.items):
        take them inside the `with` block. RecordingError once it was submitted or discarded (its items went
        with that submit: an empty list then made dev.run replay nothing, silently). A copy: the recording's own
        list grows, and at its submit takes the immediate calls pending before it at its front, so a list taken
        as it was replayed those calls again (a seqlens_advance made lens 2 where one step made it 1)."""
        if self.state != "open":
            raise RecordingError(f"{self.label} was already {self.state}: its items went with it; take "
                                 f"rec.items inside the with block to replay them with dev.run")
        return list(self.commands.items)

    def _check_open(self):
        if self.state != "open":
            raise RecordingError(f"{self.label} was already {self.state}; start a new one with dev.record()")
        if threading.get_ident() != self._thread:
            raise RecordingError(f"{self.label} belongs to thread {self._thread}, not to thread "
                                 f"{threading.get_ident()}; each thread records with its own dev.record()")

    def append(self, item):
        self._check_open()
        self.commands.append(item)

    def extend(self, items):
        self._check_open()
        self.commands.extend(items)

    def call(self, template, inputs, outputs, made=()):
        """An op call joins the recording (CommandList.call); `made`: the outputs it returns (see made())."""
        self._check_open()
        self.commands.call(template, inputs, outputs)
        if made:
            self._outputs.extend(weakref.ref(t) for t in made)

    def made(self, tensors) -> None:
        """Remember tensors an op of this recording returned (they hold nothing until it submits)."""
        self._outputs.extend(weakref.ref(t) for t in tensors)

    def writes(self, tensor) -> bool:
        """Whether a pending item of this recording writes `tensor`'s buffer."""
        return self.commands.writes(tensor)

    def submit(self):
        """Encode every item into one encoder and submit it once, behind the immediate ops still pending
        (they go in the same submit, first, so the order of the calls holds)."""
        self._check_open()
        scheduler = self.scheduler
        with scheduler.lock:
            scheduler.check_open()
            if self._want_profile:
                try:
                    scheduler.flush()   # the pending ops (other threads' too) alone: not in its profile
                except BaseException as e:   # their failure (poisoned by the flush) is this recording's too: it never
                    self._never_ran(e)       # runs, and left open its outputs read back a recycled buffer's old bytes
                    raise
            pending = scheduler.take_pending()
            if pending:
                self.commands.items[:0] = pending
            dispatches = [i for i in self.commands.items if isinstance(i, Dispatch)]
            self._labels = [d.label or d.kernel.name for d in dispatches]
            try:
                # inside the try: a failure here (making the query sets) must discard the recording as a failed
                # submit does, or it stayed open with its outputs readable, holding a recycled buffer's old bytes
                if self._want_profile and self.caps.has_timestamps and dispatches:
                    self._timestamps = Timestamps(scheduler.gpu, len(dispatches),
                                                  self.caps.has_timestamps_inside_passes, scheduler.stats)
                self.commands.submit(self._timestamps)
            except BaseException as e:   # the recorded ops never ran
                # the pending ops put in front were other calls' (other threads' too): they wait again for the
                # next flush, which runs them or raises on the thread that needs them (poisoning them here made
                # another thread's valid op unusable for this recording's error)
                self.commands.items = self.commands.items[len(pending):]
                scheduler.restore_pending(pending)
                self._never_ran(e)
                raise
            self.state = "submitted"
            self.commands = CommandList(scheduler, label=self.commands.label)
            self._outputs = []

    def _never_ran(self, error: BaseException) -> None:
        """Its submit raised `error`: what its items write becomes unusable, and the recording is discarded."""
        self.commands.poison_writes(f"{self.label} never ran: its submit raised {type(error).__name__}: "
                                    f"{str(error)[:200]}", self.scheduler.owned)
        self.state = "discarded"

    def discard(self):
        """Drop every pending item without submitting; the tensors its ops returned become unusable."""
        self._check_open()
        self.commands = CommandList(self.scheduler, label=self.commands.label)
        self.state = "discarded"
        reason = (f"this tensor was made inside {self.label} (by an op or dev.tensor), which was discarded (an "
                  f"exception left its `with` block) before it ran: its contents were never written")
        for ref in self._outputs:
            t = ref()
            if t is not None:
                t.poison(reason)
        self._outputs = []

    def profile(self) -> ProfileTable:
        """Per-label GPU time of a submitted `record(profile=True)`."""
        if self.state != "submitted":
            raise RecordingError(f"profile() needs a submitted recording; {self.label} is {self.state}")
        if not self._want_profile:
            raise RecordingError(f"{self.label} was not made with record(profile=True)")
        if not self.caps.has_timestamps:
            raise RecordingError(f"device {self.caps.adapter_name!r} has no timestamp-query feature")
        if self._timestamps is None:   # it dispatched nothing (only writes, or empty): no time to report
            return ProfileTable((), self.caps.has_timestamps_inside_passes, 0.0)
        if self._ticks is None:
            scheduler = self.scheduler
            with scheduler.lock:   # as every call into wgpu: not beside another thread's dev.destroy() or submit
                if scheduler.closed:   # else the map was wgpu's raw GPUValidationError ("Parent device is lost")
                    raise DeviceError(f"{self.label}: its timestamps died with device {scheduler.name!r} (epoch "
                                      f"{scheduler.epoch}), lost or destroyed before rec.profile() read them; "
                                      f"profile() right after the recording, before a dev.destroy() or recreate()")
                self._ticks = self._timestamps.ticks_ns()
        return ProfileTable.from_ticks(self._labels, self._ticks, self._timestamps.inside_passes)

    def __enter__(self):
        self._check_open()
        self.scheduler.push_recording(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.scheduler.pop_recording(self)
        if self.state != "open":
            return False
        if exc_type is not None:
            self.discard()
        else:
            self.submit()
        return False

    def __repr__(self) -> str:
        return f"Recording({self.label!r}, {self.state}, items={len(self.commands.items)})"
