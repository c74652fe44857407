"""Op templates: an op's encoded dispatches with every tensor replaced by a slot (input i, output j, scratch k
with its spec, or a fixed device tensor such as a fallback). Every op call and every Program node is an
instantiated template (ops/core.py `capture` makes them); the device caches them per (op, params, input
shapes and dtypes), so a repeated call of the same op on same-shaped tensors skips validation and planning.

Valid because `infer` and `encode` are pure functions of (params, specs, caps): they never read tensor
contents, and the tensors they bind are the call's own, its scratch, or the device's fallbacks. And because
params hold checked plain values: equal params must mean the same call (6.0 == 6 and True == 1 in Python, so
an op converts or rejects such values as it makes its params, not only in `infer`)."""

from __future__ import annotations

import operator

import attrs

from wgraph.errors import PlanError
from wgraph.scheduler.dispatch import Dispatch

CAPACITY = 4096  # templates kept per device


def _picker(indices: tuple):
    """flat -> the tuple of flat[i] for i in `indices` (itemgetter returns a bare item for one index)."""
    if len(indices) == 1:
        (i,) = indices
        return lambda flat: (flat[i],)
    return operator.itemgetter(*indices) if indices else (lambda flat: ())


@attrs.frozen(eq=False)
class DispatchTemplate:
    kernel: object
    uniforms: bytes
    pick: object  # flat tensors of a call (OpTemplate.instantiate) -> this dispatch's tensors, in binding order
    workgroups: tuple | None
    indirect: tuple | None  # (index in the flat tensors, byte offset)
    label: str


@attrs.frozen(eq=False)
class OpTemplate:
    """An op call captured once: what every call of it (and every Program node running it) is made from.
    `reusable`: no tensor sits in two slots, so the template serves other calls than the one captured."""

    out_specs: tuple
    scratch: tuple  # (TensorSpec, label) per scratch tensor, in the order encode asked for them
    fixed: tuple  # device tensors bound as they are (fallbacks, the error flag)
    dispatches: tuple[DispatchTemplate, ...]
    plan: object = None  # the kernel plan the encode chose (ctx.chose), for explain()
    reusable: bool = True

    def instantiate(self, inputs, outputs, scratch) -> list[Dispatch]:
        """The dispatches of a call whose tensors fill the slots."""
        # Slots are indices into one flat tuple: inputs, outputs, scratch, fixed (a C-level pick per dispatch).
        flat = (*inputs, *outputs, *scratch, *self.fixed)
        made = []
        for d in self.dispatches:
            indirect = d.indirect
            if indirect is not None:
                indirect = (flat[indirect[0]], indirect[1])
            made.append(Dispatch(d.kernel, d.uniforms, d.pick(flat), d.workgroups, indirect, d.label))
        return made


def template_of(dispatches, inputs, outputs, scratch, fixed, plan=None) -> OpTemplate:
    """The template of one encoded call: every tensor its dispatches bind replaced by its slot. A tensor in two
    places (an input given twice) takes its first slot and makes the template this call's only."""
    slots = {}  # id(tensor) -> its index in instantiate's flat tuple
    fixed = tuple({id(t): t for t in fixed}.values())
    flat = (*inputs, *outputs, *[t for t, _ in scratch])
    reusable = True
    for i, t in enumerate(flat):
        if t is not None:
            if id(t) in slots:
                reusable = False
            else:
                slots[id(t)] = i
    for i, t in enumerate(fixed, len(flat)):
        slots.setdefault(id(t), i)

    made = []
    for d in dispatches:
        if not isinstance(d, Dispatch):
            raise PlanError(f"an op's encode returned {d!r}; it returns Dispatches (ctx.dispatch) only")
        bound = tuple(slots.get(id(t)) for t in d.tensors)
        indirect = None if d.indirect is None else (slots.get(id(d.indirect[0])), d.indirect[1])
        if None in bound or (indirect is not None and indirect[0] is None):
            raise PlanError(f"{d.label}: the encode bound a tensor that is none of the call's inputs, outputs or "
                            f"scratch (ctx.scratch) or the device's fallbacks (ctx.fallback); an encode binds only those")
        made.append(DispatchTemplate(d.kernel, d.uniforms, _picker(bound), d.workgroups, indirect, d.label))
    return OpTemplate(tuple(t.spec for t in outputs), tuple((t.spec, label) for t, label in scratch), fixed,
                      tuple(made), plan, reusable)


class TemplateCache:
    """Templates of one device epoch by key; emptied when it passes CAPACITY (a workload repeats few keys)."""

    def __init__(self, epoch: int):
        self.epoch = epoch
        self._templates: dict = {}

    def get(self, key):
        return self._templates.get(key)

    def put(self, key, template: OpTemplate, epoch: int) -> None:
        """Cache `template`, captured from tensors checked in `epoch`: dropped unless that is this cache's (a
        call captured while another thread re-created the device holds the old device's buffers)."""
        if epoch != self.epoch:
            return
        if len(self._templates) >= CAPACITY:
            self._templates.clear()
        self._templates[key] = template

    def clear(self) -> None:
        self._templates.clear()

    def __len__(self) -> int:
        return len(self._templates)
