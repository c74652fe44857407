"""Op templates: an op's encoded dispatches with every tensor replaced by a slot (input i, output j, scratch k
with its spec, or a fixed device tensor such as a fallback), cached per (op, params, input shapes and dtypes).
A repeated call of the same op on same-shaped tensors skips validation and planning: it fills the slots.

Valid because `infer` and `encode` are pure functions of (params, specs, caps): they never read tensor
contents, and the tensors they bind are the call's own, its scratch, or the device's fallbacks."""

from __future__ import annotations

import attrs

from wgraph.runtime.dispatch import Dispatch

CAPACITY = 4096  # templates kept per device

IN, OUT, SCRATCH, FIXED = range(4)


@attrs.frozen(eq=False)
class DispatchTemplate:
    kernel: object
    uniforms: bytes
    slots: tuple  # (kind, index or tensor) per storage binding, in binding order
    workgroups: tuple | None
    indirect: tuple | None  # ((kind, index or tensor), byte offset)
    label: str


@attrs.frozen(eq=False)
class OpTemplate:
    out_specs: tuple
    scratch: tuple  # (TensorSpec, label) per scratch tensor, in the order encode asked for them
    dispatches: tuple[DispatchTemplate, ...]

    def instantiate(self, inputs, outputs, scratch) -> list[Dispatch]:
        """The dispatches of a call whose tensors fill the slots."""
        sources = (inputs, outputs, scratch)
        made = []
        for d in self.dispatches:
            tensors = tuple([where if kind == FIXED else sources[kind][where] for kind, where in d.slots])
            indirect = d.indirect
            if indirect is not None:
                (kind, where), offset = indirect
                indirect = (where if kind == FIXED else sources[kind][where], offset)
            made.append(Dispatch(d.kernel, d.uniforms, tensors, d.workgroups, indirect, d.label))
        return made


def capture(out_specs, dispatches, inputs, outputs, scratch, fixed) -> OpTemplate | None:
    """A template of `dispatches`, or None where a bound tensor is none of the call's (then nothing is cached)."""
    slots = {}
    for kind, tensors in ((IN, inputs), (OUT, outputs), (SCRATCH, [t for t, _ in scratch])):
        for i, t in enumerate(tensors):
            if t is not None:
                if id(t) in slots:
                    return None  # one tensor in two places: the slots would be ambiguous
                slots[id(t)] = (kind, i)
    for t in fixed:
        slots.setdefault(id(t), (FIXED, t))

    def slot(t):
        return slots.get(id(t))

    made = []
    for d in dispatches:
        if not isinstance(d, Dispatch):
            return None
        bound = tuple(slot(t) for t in d.tensors)
        indirect = None if d.indirect is None else (slot(d.indirect[0]), d.indirect[1])
        if any(s is None for s in bound) or (indirect is not None and indirect[0] is None):
            return None
        made.append(DispatchTemplate(d.kernel, d.uniforms, bound, d.workgroups, indirect, d.label))
    return OpTemplate(tuple(out_specs), tuple((t.spec, label) for t, label in scratch), tuple(made))


class TemplateCache:
    """Templates of one device epoch by key; emptied when it passes CAPACITY (a workload repeats few keys)."""

    def __init__(self):
        self._templates: dict = {}

    def get(self, key):
        return self._templates.get(key)

    def put(self, key, template: OpTemplate) -> None:
        if len(self._templates) >= CAPACITY:
            self._templates.clear()
        self._templates[key] = template

    def clear(self) -> None:
        self._templates.clear()

    def __len__(self) -> int:
        return len(self._templates)
