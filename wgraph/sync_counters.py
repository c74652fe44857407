"""Device counters for kernels whose last workgroup finishes a call (the fused split-K decode's merge of its chunks,
shaders/attention_fused_last_merge.wgsl): one zero-filled u32 buffer per device and epoch, which such a kernel binds
as `sync_counters` (ctx.dispatch fills the binding). A kernel's workgroups count themselves on the counters of
their call with atomicAdd; the one that finds itself last resets its counter to 0 before it goes on, so every
counter is 0 between dispatches. Two dispatches that bind the buffer both write it, so the queue runs them one
after the other, never at once: no two calls share a counter at the same time."""

from __future__ import annotations

import weakref

import numpy as np

from wgraph.tensor import Tensor

BINDING = "sync_counters"  # the binding's name in the kernels
WORDS = 1 << 16  # counters a device holds: a call counts on at most this many (the planner checks)

_counters: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # device -> (epoch, tensor)


def counters(device) -> Tensor:
    """The device's counters in its current epoch, made (zeroed) on first use."""
    got = _counters.get(device)
    if got is not None and got[0] == device.epoch:
        return got[1]
    from wgraph.device import owned

    with device.lock:
        got = _counters.get(device)
        if got is None or got[0] != device.epoch:
            got = _counters[device] = (device.epoch, owned(device, np.zeros(WORDS, np.uint32), "sync_counters"))
    return got[1]
