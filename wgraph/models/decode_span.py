"""A decoder's second decode program, for the first positions of a long KV cache. A compiled decode step plans
its attention for the cache it holds (the position is on the GPU), so a 2048-position cache plans split-K's two
passes for every step, where the first hundreds of positions would take the one-pass kernel (the registry's
`max_kv_span`: it is faster over a storage of that many keys, slower over more). A decoder whose attention plans
another kernel over fewer rows compiles a second program whose caches are views of the first rows of the same
caches (`Tensor.prefix`), every other state shared, and runs it while the position stays below those rows. A
batch's caches [B, capacity, Hkv, D] have no prefix view of every sequence's first rows; its short program reads
them as a paged pool instead, each sequence's first rows its one page (models/batched.py)."""

from __future__ import annotations

from typing import Any, Callable

import attrs

from wgraph import args
from wgraph.errors import LimitError, RecordingError
from wgraph.graph import Graph
from wgraph.graph.program import MAX_PER_SUBMIT
from wgraph.models.config import MAX_SEQ, submits_in_flight
from wgraph.ops import attention_batched
from wgraph.ops.attention import plan_facts
from wgraph.ops.attention_planner import attention_kernels, plan
from wgraph.tensor import TensorSpec


def _attention_variants(graph: Graph, caps: Any, rows: int | None) -> list[str]:
    """The kernel each attention node of `graph` plans with its keys cut to `rows` positions (None: as the graph
    holds them): a single-sequence node's K/V storage to its first rows, a batched node's caches to a paged pool of
    each sequence's first rows."""
    out = []
    for name in graph.topological_order():
        node = graph.node(name)
        specs = tuple(None if n is None else graph.values[n] for n in node.inputs)
        if node.op == "attention":
            q, k, v, kv_len, table = specs
            if rows is not None:
                k, v = (TensorSpec((rows, *t.shape[1:]), t.dtype) for t in (k, v))
            out.append(plan(plan_facts(node.params, (q, k, v, kv_len, table)), caps).variant)
        elif node.op == "attention_batched":
            p, geo = node.params, attention_batched._geometry(node.params, specs)
            if rows is not None:
                p, geo = attrs.evolve(p, max_k=rows), dict(geo, layout=2)
            out.append(attention_batched.batched_plan(p, geo, caps).variant)
    return out


def short_cache_rows(graph: Graph, caps: Any, cache_rows: int) -> int | None:
    """The cache rows of a decode program for the first positions, or None where none would plan differently:
    the largest `max_kv_span` of the registry's attention kernels below `cache_rows` at which some attention node
    of `graph` (the decode step over caches of `cache_rows` positions; a batched step's too) plans another kernel
    than it does now."""
    whole = _attention_variants(graph, caps, None)
    spans = sorted({int(k.facts["max_kv_span"]) for k in attention_kernels() if "max_kv_span" in k.facts},
                   reverse=True)
    return next((rows for rows in spans if rows < cache_rows and _attention_variants(graph, caps, rows) != whole),
                None)


def split_steps(position: int | None, steps: int, short_rows: int | None) -> tuple[int, int]:
    """(steps on the short program, steps on the whole cache's) for `steps` decode steps from `position` (the
    position the next step consumes: its K/V row; None: unknown, so every step takes the whole cache's program).
    A step at position p appends row p and attends p + 1 keys: the short program serves p < short_rows."""
    if position is None or short_rows is None:
        return 0, steps
    short = min(steps, max(0, short_rows - position))
    return short, steps - short


def check_room(fn: str, position: int | None, steps: int, cache_rows: int) -> None:
    """LimitError unless `steps` decode steps from `position` (the position the next step consumes; None: unknown,
    not checked) stay within a KV cache of `cache_rows` positions: the last one appends row position + steps - 1.
    Past it the GPU flags the step (a GpuValueError at the next readback, some later call's)."""
    if position is not None and position + steps > cache_rows:
        raise LimitError(f"{fn}: {steps} decode steps from position {position} pass the KV cache of {cache_rows} "
                         f"positions (max_seq): at most {max(0, cache_rows - position)} fit; prefill again to start "
                         f"over")


def schedule(position: int | None, steps: int, short_rows: int | None, short_program: Callable[[], Any],
             whole_program: Any) -> tuple[list[tuple[Any, int]], int | None]:
    """(program, steps) for the next `steps` decode steps, in order: the short program (`short_program()`,
    compiled on first use) while the position stays below short_rows, the whole cache's after it (and for every
    step when the position is unknown); and the position after them."""
    short, rest = split_steps(position, steps, short_rows)
    programs = [(p, n) for p, n in ((short_program() if short else None, short), (whole_program, rest)) if n]
    return programs, None if position is None else position + steps


def decode_steps(fn: str, position: int | None, steps: int, cache_rows: int, short_rows: int | None,
                 short_program: Callable[[], Any], whole_program: Any,
                 unprefilled: str) -> tuple[list[tuple[Any, int]], int | None]:
    """`schedule`'s (program, steps) list and position after them for a decoder's next `steps` steps, checked:
    RecordingError `fn: unprefilled` where steps are asked before any prefill (position None: the programs'
    token, position and kv_len are zeros, so a step would attend no key and make an id of no sequence);
    `check_room`'s LimitError where they would pass the cache."""
    if steps and position is None:
        raise RecordingError(f"{fn}: {unprefilled}")
    check_room(fn, position, steps, cache_rows)
    return schedule(position, steps, short_rows, short_program, whole_program)


def run_steps_args(fn: str, n: int, in_flight: int, per_submit: int) -> tuple[int, int, int]:
    """A decoder's run_steps arguments (n, in_flight, per_submit), each checked by its rule (args.py): n steps
    from 0 to MAX_SEQ, in_flight steps from 1 to MAX_SEQ, per_submit steps from 1 to MAX_PER_SUBMIT."""
    return (args.integer(fn, "n", n, 0, MAX_SEQ), args.integer(fn, "in_flight", in_flight, 1, MAX_SEQ),
            args.integer(fn, "per_submit", per_submit, 1, MAX_PER_SUBMIT))


def run_scheduled(programs: list[tuple[Any, int]], in_flight: int, per_submit: int) -> float:
    """Each (program, steps) of `schedule` submitted in order with Program.run_many, at most `in_flight` steps
    unfinished on the GPU; the host seconds spent encoding and submitting them."""
    window = submits_in_flight(in_flight, per_submit)
    return sum((p.run_many(n, in_flight=window, per_submit=per_submit) for p, n in programs), 0.0)
