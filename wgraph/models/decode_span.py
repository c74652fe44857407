"""A decoder's second decode program, for the first positions of a long KV cache. A compiled decode step plans
its attention for the cache it holds (the position is on the GPU), so a 2048-position cache plans split-K's two
passes for every step, where the first hundreds of positions would take the one-pass kernel (the registry's
`max_kv_span`: it is faster over a storage of that many keys, slower over more). A decoder whose attention plans
another kernel over fewer rows compiles a second program whose caches are views of the first rows of the same
caches (`Tensor.prefix`), every other state shared, and runs it while the position stays below those rows."""

from __future__ import annotations

from typing import Any

from wgraph.graph import Graph
from wgraph.ops.attention import plan_facts
from wgraph.ops.attention_planner import attention_kernels, plan
from wgraph.tensor import TensorSpec


def _attention_variants(graph: Graph, caps: Any, rows: int | None) -> list[str]:
    """The kernel each attention node of `graph` plans with its K/V storage cut to `rows` positions (None: as
    the graph holds them)."""
    out = []
    for name in graph.topological_order():
        node = graph.node(name)
        if node.op != "attention":
            continue
        q, k, v, kv_len, table = (None if n is None else graph.values[n] for n in node.inputs)
        if rows is not None:
            k, v = (TensorSpec((rows, *t.shape[1:]), t.dtype) for t in (k, v))
        out.append(plan(plan_facts(node.params, (q, k, v, kv_len, table)), caps).variant)
    return out


def short_cache_rows(graph: Graph, caps: Any, cache_rows: int) -> int | None:
    """The cache rows of a decode program for the first positions, or None where none would plan differently:
    the largest `max_kv_span` of the registry's attention kernels below `cache_rows` at which some attention node
    of `graph` (the decode step over caches of `cache_rows` positions) plans another kernel than it does now."""
    whole = _attention_variants(graph, caps, None)
    spans = sorted({int(k.facts["max_kv_span"]) for k in attention_kernels() if "max_kv_span" in k.facts},
                   reverse=True)
    for rows in spans:
        if rows < cache_rows and _attention_variants(graph, caps, rows) != whole:
            return rows
    return None


def split_steps(position: int | None, steps: int, short_rows: int | None) -> tuple[int, int]:
    """(steps on the short program, steps on the whole cache's) for `steps` decode steps from `position` (the
    position the next step consumes: its K/V row; None: unknown, so every step takes the whole cache's program).
    A step at position p appends row p and attends p + 1 keys: the short program serves p < short_rows."""
    if position is None or short_rows is None:
        return 0, steps
    short = min(steps, max(0, short_rows - position))
    return short, steps - short
