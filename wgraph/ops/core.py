"""The one path every op call takes: validate (infer), allocate, capture the op's dispatches as a template
(encode, once per op, params and input shapes), then hand the filled template to the device's scheduler,
which appends it to the open recording or the pending list of immediate ops; given graph symbols, add a node
to their graph instead. A compiled Program captures its nodes with the same `capture`."""

from __future__ import annotations

import logging
from typing import Any, Callable

import attrs

from wgraph.device import alloc
from wgraph.device_errors import BINDING as ERROR_BINDING
from wgraph.errors import AliasingError, DeviceError, DtypeError, LimitError, PlanError, ShapeError, UnsupportedError
from wgraph.scheduler.dispatch import Dispatch
from wgraph.kernels.pipelines import storage_binding_size
from wgraph.kernels.registry import kernel as lookup_kernel
from wgraph.kernels.uniforms import pack_uniforms
from wgraph.ops.cpu_limits import CPU_DEVICE
from wgraph.scheduler.templates import OpTemplate, template_of
from wgraph.tensor import Tensor, TensorSpec

log = logging.getLogger(__name__)
_CPU_CHOICES_SAID: set[tuple[str, str]] = set()   # (adapter, variant) whose CPU fallback was logged


@attrs.frozen
class OpDef:
    """An op: `infer(params, input specs) -> output specs` validates; `encode(ctx, params, inputs, outputs)`
    returns the dispatches (and may tell `ctx.chose(plan)` which kernel plan it used, for explain()).
    Neither does GPU work. `is_view`: the output aliases the first input's buffer (no dispatch).
    `writes_inputs`: indices of inputs an op with outputs also writes in place (an op without outputs writes
    every input it takes), so a graph orders their other readers and writers around it. `inputs`: the inputs'
    names as the op function's caller knows them, an optional one ending in "?" (errors name them)."""

    name: str
    infer: Callable[[Any, tuple], tuple[TensorSpec, ...]]
    encode: Callable[..., list]
    is_view: bool = False
    writes_inputs: tuple[int, ...] = ()
    inputs: tuple[str, ...] = ()

    def input_name(self, i: int) -> str:
        return self.inputs[i].rstrip("?") if i < len(self.inputs) else f"input {i}"


OPS: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    """Make an op known by name (graphs serialise ops by name)."""
    if op.name in OPS and OPS[op.name] is not op:
        raise ValueError(f"op {op.name!r} is registered twice")
    OPS[op.name] = op
    return op


def ceil_div(n: int, d: int) -> int:
    return -(-int(n) // int(d))


# Caches of facts that depend only on (kernel, caps) or on the uniform values: an op call in a recording
# re-derives them on every call otherwise (measured by `python -m wgraph bench --only host`). Keys hold ids;
# values hold the objects themselves, so an id cannot be reused while its entry lives.
_FITS: dict[tuple[int, int], tuple] = {}
_DECLARED: dict[int, tuple] = {}
_PACKED: dict[tuple, tuple] = {}
_PACKED_CAPACITY = 4096


def storage_refusal(k, caps) -> str | None:
    """Why the device cannot bind kernel `k`'s storage buffers (more than its per-stage limit: wgpu's validation
    would fail at pipeline creation), or None: the one text the planners and the dispatch check give."""
    n = len(k.storage_bindings)
    if n > caps.max_storage_buffers_per_stage:
        return f"binds {n} storage buffers; the device allows {caps.max_storage_buffers_per_stage} per shader stage"
    return None


def device_refusal(k, caps) -> tuple[type, str] | None:
    """Why the device of `caps` cannot run kernel `k` whatever the call (a feature it lacks: UnsupportedError;
    more workgroup memory, threads per workgroup or storage buffers than it allows: LimitError), as (error class,
    text after the kernel's name), or None. The one check the dispatch, the attention planner and the GEMV / GEMM
    planners make, so a kernel is refused in the same words wherever it is met."""
    missing = sorted(set(k.features) - caps.features)
    if missing:
        return UnsupportedError, f"needs features {missing}, which {caps.adapter_name!r} lacks"
    if k.workgroup_memory > caps.max_workgroup_storage:
        return LimitError, (f"needs {k.workgroup_memory} bytes of workgroup memory; the device has "
                            f"{caps.max_workgroup_storage}")
    if k.threads > caps.max_invocations_per_workgroup:
        return LimitError, (f"needs {k.threads} threads per workgroup; the device allows "
                            f"{caps.max_invocations_per_workgroup}")
    no = storage_refusal(k, caps)
    return (LimitError, no) if no else None


# The GEMV planners' size rules (registry facts): a side of W below the fact's value plans another kernel (a forced
# call still runs this one). side -> (fact, the argument it names)
_SIZE_RULES = {"n": ("min_n", "out_features"), "k": ("min_k", "in_features")}


def size_refusal(k, sizes: dict[str, int]) -> str | None:
    """Why the planner passes over GEMV kernel `k` for a W of `sizes` ({"n": out_features, "k": in_features},
    checked in that dict's order), or None: the first side below the kernel's min_n / min_k."""
    for side, size in sizes.items():
        fact, name = _SIZE_RULES[side]
        if size < k.facts.get(fact, 0):
            return f"is for {name} >= {k.facts[fact]}"
    return None


def speed_rules(k, sides: str) -> str:
    """The speed rules a GEMV plan reason names for kernel `k`, as its parenthesis (" (k >= 256, a CPU adapter)";
    "" without any): the size rules of `sides` ("kn" or "nk", in that order), then the adapter class."""
    rules = [f"{side} >= {k.facts[_SIZE_RULES[side][0]]}" for side in sides if k.facts.get(_SIZE_RULES[side][0])]
    rules += ["a CPU adapter"] if k.facts.get("cpu_only") else []
    return f" ({', '.join(rules)})" if rules else ""


def adapter_refusal(k, caps) -> str | None:
    """Why the planner passes over kernel `k` for the adapter class of `caps` (a speed rule: a forced call still runs
    it), or None: a `cpu_only` kernel (a CPU adapter's own GEMV shapes) is for CPU adapters; caps None plans as for a
    GPU. The one rule of the GEMV planners (plain, quantized, fused QKV + RoPE)."""
    if k.facts.get("cpu_only") and not (caps is not None and caps.is_cpu):
        return "is for CPU adapters"
    return None


def _check_kernel_fits(k, caps) -> None:
    """UnsupportedError / LimitError unless `caps` can run kernel `k` (device_refusal); a pass is remembered per
    (k, caps)."""
    key = (id(k), id(caps))
    hit = _FITS.get(key)
    if hit is not None and hit[0] is k and hit[1] is caps:
        return
    refused = device_refusal(k, caps)
    if refused:
        cls, why = refused
        raise cls(f"kernel {k.name} {why}")
    if len(_FITS) > 1024:
        _FITS.clear()
    _FITS[key] = (k, caps)


def _declared_storage(k) -> tuple[dict, Any]:
    """The kernel's storage bindings by name, and their names as a dict keys view (compares with a set)."""
    hit = _DECLARED.get(id(k))
    if hit is not None and hit[0] is k:
        return hit[1], hit[2]
    declared = {b.name: b for b in k.storage_bindings}
    if len(_DECLARED) > 1024:
        _DECLARED.clear()
    _DECLARED[id(k)] = (k, declared, declared.keys())
    return declared, declared.keys()


def _pack_cached(layout, values: dict) -> bytes:
    """pack_uniforms, remembered for values that are plain ints and non-zero, non-NaN floats (equal keys then
    mean equal bytes; 0.0 == -0.0 and NaN != NaN would not). An int and the float equal to it (2, 2.0) are one key
    on purpose: the packer gives them one byte string in every field (a whole float is an integer field's int, a
    fraction equals no int and raises; an f32 field packs the int as that float), so no type names in the key,
    which every op call would pay for (tests/test_uniforms.py::test_pack_cache_serves_an_int_key_...)."""
    items = tuple(values.items())
    for _name, v in items:
        t = type(v)
        if t is int:
            continue
        if t is not float or v == 0.0 or v != v:
            return pack_uniforms(layout, values)
    key = (id(layout), items)
    hit = _PACKED.get(key)
    if hit is not None and hit[0] is layout:
        return hit[1]
    packed = pack_uniforms(layout, values)
    if len(_PACKED) >= _PACKED_CAPACITY:
        _PACKED.clear()
    _PACKED[key] = (layout, packed)
    return packed


class EncodeContext:
    """What `encode` functions build dispatches with. Scratch comes from the device's pool for the capture
    only: the template's calls place theirs in their command list's (or Program's) ScratchSpace."""

    def __init__(self, device):
        self.device = device
        self.caps = device.caps
        self.plan = None  # the kernel plan the op chose, if it has one (KernelPlan: variant, reason, ...)
        self.scratch_made: list[tuple[Tensor, str]] = []  # (tensor, label) in the order asked for
        self.fallbacks_used: list[Tensor] = []

    def chose(self, plan) -> None:
        """Record the plan an op's encode used, so explain() reports it without planning again. On a CPU adapter,
        say (INFO) when the planner passed over kernels for being GPU-tuned or past lavapipe's loop cap."""
        self.plan = plan
        if self.caps.is_cpu:
            # the planners' reasons for a kernel passed over on a CPU adapter name CPU_DEVICE (cpu_limits.py)
            passed = [variant for variant, why in getattr(plan, "rejected", ()) if CPU_DEVICE in why]
            if passed and (self.caps.adapter_name, plan.variant) not in _CPU_CHOICES_SAID:   # once per kernel
                _CPU_CHOICES_SAID.add((self.caps.adapter_name, plan.variant))
                log.info("on the CPU adapter %s: %s instead of %s (GPU-tuned, or past lavapipe's loop cap)",
                         self.caps.adapter_name, plan.variant, ", ".join(passed))
        log.debug("planned %s: %s", plan.variant, plan.reason)

    def scratch(self, shape, dtype: str, label: str = "scratch") -> Tensor:
        """A temporary tensor that lives as long as the dispatches that bind it."""
        t = alloc(self.device, TensorSpec(shape, dtype), label)
        self.scratch_made.append((t, label))
        return t

    def fallback(self, name: str, nbytes: int = 4) -> Tensor:
        """A zero-filled dummy for an optional binding that is not used."""
        t = self.device.fallback(name, nbytes)
        self.fallbacks_used.append(t)
        return t

    def error_flag(self) -> Tensor:
        """The device error flag (wgraph/device_errors.py); `dispatch` binds it to a kernel that declares it."""
        t = self.device.error_flag()
        self.fallbacks_used.append(t)
        return t

    def grid(self, groups: int) -> tuple[int, int, int]:
        """`groups` workgroups as (x, y, 1) with x within the device limit (kernels rebuild the flat index)."""
        limit = self.caps.max_workgroups_per_dim
        if groups <= limit:
            return (max(1, groups), 1, 1)
        y = ceil_div(groups, limit)
        return (ceil_div(groups, y), y, 1)

    def dispatch(self, variant: str, *, uniforms: dict | None = None, bindings: dict, workgroups=None,
                 indirect=None, label: str = "", constants: dict | None = None) -> Dispatch:
        """A checked Dispatch of registry `variant`; errors name the variant, binding and limit. `constants`:
        the values of the shader's overridable constants (Kernel.specialized), every one of them."""
        k = lookup_kernel(variant)
        if k.overrides or constants:
            k = k.specialized(constants or {})
        _check_kernel_fits(k, self.caps)
        if k.uniform is not None:
            packed = _pack_cached(k.uniform, uniforms or {})
        elif uniforms:
            raise PlanError(f"kernel {variant} has no uniform struct but got uniforms {sorted(uniforms)}")
        else:
            packed = b""
        declared, declared_names = _declared_storage(k)
        if ERROR_BINDING in declared and ERROR_BINDING not in bindings:
            bindings = {**bindings, ERROR_BINDING: self.error_flag()}
        if bindings.keys() != declared_names:
            raise PlanError(f"kernel {variant}: bindings {sorted(bindings)} do not match the shader's {sorted(declared)}")
        for name, t in bindings.items():
            if not isinstance(t, Tensor):
                raise PlanError(f"kernel {variant}: binding {name} must be a Tensor, got {type(t).__name__}")
            self.device.check_tensor(t)
            if storage_binding_size(t.nbytes) > self.caps.max_storage_binding_size:
                raise LimitError(f"kernel {variant}: binding {name} is {t.nbytes} bytes; the device binds at most "
                                 f"{self.caps.max_storage_binding_size}")
        for name, b in declared.items():
            if not b.writes:
                continue
            for other, t in bindings.items():
                if other != name and t.buffer is bindings[name].buffer:
                    raise AliasingError(f"kernel {variant}: one buffer is bound to {name} (read_write) and to {other}")
        if (workgroups is None) == (indirect is None):
            raise PlanError(f"kernel {variant}: give exactly one of workgroups= and indirect=")
        if workgroups is not None:
            workgroups = tuple(map(int, workgroups)) + (1,) * (3 - len(workgroups))
            limit = self.caps.max_workgroups_per_dim
            if min(workgroups) < 0 or max(workgroups) > limit:
                raise LimitError(f"kernel {variant}: workgroups {workgroups} exceed the device limit of {limit} per dimension")
        else:
            args, offset = indirect
            self.device.check_tensor(args)
            if args.dtype != "u32" or offset % 4 or offset + 12 > args.nbytes:
                raise PlanError(f"kernel {variant}: indirect args need a u32 tensor with 3 values at a 4-byte aligned "
                                f"offset; got {args!r} at offset {offset}")
        ordered = tuple([bindings[b.name] for b in k.storage_bindings])
        return Dispatch(k, packed, ordered, workgroups, indirect, label or variant)


def _check_required(op: OpDef, inputs) -> None:
    """ShapeError naming an input the op requires that is None."""
    for i, x in enumerate(inputs):
        if x is None and i < len(op.inputs) and not op.inputs[i].endswith("?"):
            raise ShapeError(f"{op.name}: {op.input_name(i)} is required, got None")


def tensor_arg(fn: str, name: str, x):
    """`x` if it is a Tensor or a graph value; else ShapeError naming the argument and what it got."""
    if isinstance(x, Tensor) or getattr(x, "_wgraph_symbol_", False):
        return x
    raise ShapeError(f"{fn}: {name} must be a Tensor (or a graph value), got {type_name(x)}; upload host data "
                     f"with dev.tensor(...) (in a graph: g.const(name, data), or g.input)")


def type_name(x) -> str:
    """x's type with its package (numpy.ndarray, torch.Tensor): a torch.Tensor is not a wgraph Tensor."""
    kind = type(x)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__.split('.')[0]}.{kind.__name__}"


def capture(device, op: OpDef, params, inputs: tuple, outputs: tuple) -> OpTemplate:
    """The one capture function: `op.encode` on these tensors (its scratch provisional, from the pool), made
    into a template whose slots this call's tensors, or another's, fill (scheduler/templates.py). Every op call
    and every Program node is an instance of a template made here."""
    ctx = EncodeContext(device)
    try:
        dispatches = op.encode(ctx, params, tuple(inputs), outputs)
    except AliasingError as e:
        raise _aliasing_error(op, inputs, outputs, e) from None
    if len(dispatches) > 1:
        _check_written_then_bound(op, inputs, outputs, dispatches)
    return template_of(dispatches, inputs, outputs, ctx.scratch_made, ctx.fallbacks_used, ctx.plan)


def _check_written_then_bound(op: OpDef, inputs, outputs, dispatches) -> None:
    """AliasingError where one dispatch binds a buffer that an earlier dispatch of the call wrote through another
    argument (a view of it, or one tensor given as two arguments). ctx.dispatch sees one dispatch at a time: kv_append
    ((kc, vc), k_new, kc.prefix(1), 0) wrote k_new into kc's row 0, then copied that row, not the v_new given, into
    vc. A buffer written and bound again through the same argument (an op's own output read by its next pass) is
    the op's business; scratch, fallbacks and the error flag are no argument."""
    places: dict[int, list[str]] = {}   # id(tensor) -> the arguments it is
    named = [(op.input_name(i), x) for i, x in enumerate(inputs) if x is not None]
    named += [("out=" if len(outputs) == 1 else f"out[{j}]", t) for j, t in enumerate(outputs)]
    for name, t in named:
        places.setdefault(id(t), []).append(name)
    written: dict[int, tuple] = {}   # id(buffer) -> (the argument tensor that wrote it, the dispatch's index)
    for k, d in enumerate(dispatches):
        bound = list(zip(d.kernel.storage_bindings, d.tensors))
        if d.indirect is not None:
            bound.append((None, d.indirect[0]))
        for _b, t in bound:
            first = written.get(id(t.buffer)) if id(t) in places else None
            if first is not None and (first[0] is not t or len(places[id(t)]) > 1):
                names = [name for name, x in named if x.buffer is t.buffer]
                raise AliasingError(
                    f"{op.name}: {' and '.join(names)} are one buffer (views of one tensor count), which dispatch "
                    f"{first[1]} ({dispatches[first[1]].label}) writes and dispatch {k} ({d.label}) binds again, so it "
                    f"would see the values just written, not the ones given: give each written argument a tensor of "
                    f"its own")
        for b, t in bound:
            if b is not None and b.writes and id(t) in places:
                written.setdefault(id(t.buffer), (t, k))


def _aliasing_error(op: OpDef, inputs, outputs, error: AliasingError) -> AliasingError:
    """ctx.dispatch's AliasingError (which names the kernel's bindings) said in the caller's words: the op and the
    arguments (inputs by name, out=) that are one buffer."""
    written = set(op.writes_inputs) if outputs else set(range(len(inputs)))  # an op without outputs writes them all
    named = [(op.input_name(i), x, i in written) for i, x in enumerate(inputs) if x is not None]
    named += [("out=" if len(outputs) == 1 else f"out[{j}]", t, True) for j, t in enumerate(outputs)]
    groups: dict[int, list[tuple[str, bool]]] = {}
    for name, t, writes in named:
        groups.setdefault(id(t.buffer), []).append((name, writes))
    shared = [" and ".join(name for name, _ in g) for g in groups.values() if len(g) > 1 and any(w for _, w in g)]
    if not shared:
        return error
    return AliasingError(f"{op.name}: {'; '.join(shared)} are one buffer (views of one tensor count), which one "
                         f"dispatch would write and bind again ({error}): give each written argument a tensor of its "
                         f"own")


def apply(op: OpDef, params, inputs: tuple, out=None):
    """Run `op` on `inputs`: immediate, recorded or (for graph symbols) a graph node. Returns the output(s)."""
    # One pass over the inputs gathers the template key (shape, dtype per input) and, inline, the checks a
    # repeated call needs (device, epoch, poisoned, distinct buffers): this is the cost of every recorded op.
    # Any failed check takes the slow path below, which raises with the full message.
    signature = []
    tensors = []
    buffers = set()
    device = None
    usable = True
    for x in inputs:
        if x is None:
            signature.append(None)
        elif type(x) is Tensor:
            signature.append((x.shape, x.dtype))
            tensors.append(x)
            if device is None:
                device = x.device
                epoch = device.epoch
                usable = not device.lost
            elif x.device is not device:
                raise DeviceError(f"{op.name}: inputs live on different devices ({device!r} and {x.device!r})")
            buf = x.buffer
            if getattr(buf, "_wgraph_epoch", None) != epoch or x.poisoned is not None or id(buf) in buffers:
                usable = False
            buffers.add(id(buf))
        elif getattr(x, "_wgraph_symbol_", False):
            return x.graph.add_op(op, params, inputs, out=out)
        else:
            raise ShapeError(f"{op.name}: {op.input_name(len(signature))} must be a Tensor (or a graph value), got "
                             f"{type_name(x)}; upload host data with dev.tensor(...) (in a graph: g.const(name, data), "
                             f"or g.input)")
    if not tensors:
        _check_required(op, inputs)
        raise ShapeError(f"{op.name}: no tensor inputs")
    key = (op.name, params, tuple(signature), out is None)
    try:
        tpl = device.templates.get(key)
    except TypeError:  # unhashable params: no template
        tpl = key = None
    if tpl is not None and usable:
        outputs = _outputs(op, device, tpl.out_specs, out)
        for t in outputs:
            if id(t.buffer) in buffers:
                break  # an output aliases an input or another output: the slow path finds it and says so
            # outputs too: add_rmsnorm(..., out=(o, o)) was refused on its first call and, once a call with two
            # tensors had cached the template, ran with both results written into o (which one won was a race)
            buffers.add(id(t.buffer))
        else:
            device.scheduler.launch(tpl, inputs, outputs, outputs if out is None else ())
            return outputs[0] if len(outputs) == 1 else outputs
    _check_required(op, inputs)   # here, not above: a template never holds a None where one is required
    specs = tuple(None if x is None else x.spec for x in inputs)
    out_specs = tuple(op.infer(params, specs))
    outputs = _outputs(op, device, out_specs, out)
    for t in tensors:
        device.check_tensor(t)
    tpl = capture(device, op, params, inputs, outputs)
    if key is not None and tpl.reusable and _distinct_buffers(tensors, outputs):
        device.templates.put(key, tpl, epoch)   # the epoch its inputs were checked in
    device.scheduler.launch(tpl, inputs, outputs, outputs if out is None else ())
    return outputs[0] if len(outputs) == 1 else outputs


def _distinct_buffers(tensors, outputs) -> bool:
    """No buffer twice among the inputs and outputs (two outputs one buffer included)."""
    return len({id(t.buffer) for t in (*tensors, *outputs)}) == len(tensors) + len(outputs)


def _outputs(op: OpDef, device, specs, out) -> tuple[Tensor, ...]:
    if type(out) is Tensor and len(specs) == 1 and out.device is device:  # the common out=: one check
        s = specs[0]
        if (out.shape == s.shape and out.dtype == s.dtype and out.poisoned is None
                and getattr(out.buffer, "_wgraph_epoch", None) == device.epoch):
            return (out,)
    if out is None:
        return tuple(alloc(device, s, f"{op.name}.out{i}") for i, s in enumerate(specs))
    if isinstance(out, Tensor):
        given = (out,)
    elif isinstance(out, (tuple, list)):
        given = tuple(out)
    else:
        raise ShapeError(f"{op.name}: out= must be a Tensor (or a tuple of them), got {type_name(out)}")
    if len(given) != len(specs):
        raise ShapeError(f"{op.name}: out= has {len(given)} tensors, the op makes {len(specs)}")
    for t, s in zip(given, specs):
        if not isinstance(t, Tensor):
            raise ShapeError(f"{op.name}: out= must be Tensor(s), got {type(t).__name__}")
        if t.device is not device:
            raise DeviceError(f"{op.name}: out= {t!r} belongs to another device")
        device.check_tensor(t)
        if t.dtype != s.dtype:
            raise DtypeError(f"{op.name}: out= has dtype {t.dtype}, the op makes {s.dtype}")
        if t.shape != s.shape:
            raise ShapeError(f"{op.name}: out= has shape {t.shape}, the op makes {s.shape}")
    return given
