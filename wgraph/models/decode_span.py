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

from wgraph.graph import Graph
from wgraph.ops import attention_batched
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


def _batched_attention_variants(graph: Graph, caps: Any, rows: int | None) -> list[str]:
    """The kernel each batched attention node of `graph` plans with every sequence's keys cut to `rows` positions
    of a paged pool (None: as the graph holds them)."""
    out = []
    for name in graph.topological_order():
        node = graph.node(name)
        if node.op != "attention_batched":
            continue
        p = node.params
        geo = attention_batched._geometry(p, tuple(None if n is None else graph.values[n] for n in node.inputs))
        if rows is not None:
            p, geo = attrs.evolve(p, max_k=rows), dict(geo, layout=2)
        out.append(attention_batched.batched_plan(p, geo, caps).variant)
    return out


def _short_rows(variants: Callable[[int | None], list[str]], cache_rows: int) -> int | None:
    """The largest `max_kv_span` of the registry's attention kernels below `cache_rows` at which `variants(rows)`
    (the kernels a decode step's attention plans over `rows` keys; None: over the whole cache) differ from the
    whole cache's; None where none does."""
    whole = variants(None)
    spans = sorted({int(k.facts["max_kv_span"]) for k in attention_kernels() if "max_kv_span" in k.facts},
                   reverse=True)
    return next((rows for rows in spans if rows < cache_rows and variants(rows) != whole), None)


def short_cache_rows(graph: Graph, caps: Any, cache_rows: int) -> int | None:
    """The cache rows of a decode program for the first positions, or None where none would plan differently:
    the largest `max_kv_span` of the registry's attention kernels below `cache_rows` at which some attention node
    of `graph` (the decode step over caches of `cache_rows` positions) plans another kernel than it does now."""
    return _short_rows(lambda rows: _attention_variants(graph, caps, rows), cache_rows)


def short_batch_rows(graph: Graph, caps: Any, cache_rows: int) -> int | None:
    """short_cache_rows for a batched decode step (`attention_batched` nodes over [B, cache_rows, Hkv, D]
    caches, read by the short program as pages of the first rows; a batch of one plans single-sequence
    `attention` nodes over its cache's view)."""
    return _short_rows(lambda rows: _batched_attention_variants(graph, caps, rows)
                       + _attention_variants(graph, caps, rows), cache_rows)


def split_steps(position: int | None, steps: int, short_rows: int | None) -> tuple[int, int]:
    """(steps on the short program, steps on the whole cache's) for `steps` decode steps from `position` (the
    position the next step consumes: its K/V row; None: unknown, so every step takes the whole cache's program).
    A step at position p appends row p and attends p + 1 keys: the short program serves p < short_rows."""
    if position is None or short_rows is None:
        return 0, steps
    short = min(steps, max(0, short_rows - position))
    return short, steps - short
