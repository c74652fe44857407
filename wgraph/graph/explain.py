"""`Program.explain()`: the plan table as text. By default at most WIDTH columns and in a user's words: one row
per dispatch (node, kernel, workgroups, the graph's values it reads and writes), the planner's reason wrapped under
its row, memory in KiB. `full=True`: every column (op, uniform bytes) and binding (fallbacks for unused optional
inputs, the device error flag, scratch), unwrapped, and the memory plan's raw counts."""

from __future__ import annotations

import textwrap

WIDTH = 100


def _kib(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB"


def _table(head: tuple[str, ...], body: list[tuple[str, ...]]) -> list[str]:
    """Columns padded to their widest cell; the last column left as it is."""
    widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head) - 1)]
    fmt = lambda row: ("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1]).rstrip()  # noqa: E731
    return [fmt(head), fmt(tuple("-" * len(h) for h in head))] + [fmt(r) for r in body]


def full_text(prog) -> str:
    """Every column and binding of every dispatch, and the memory plan's counts (lines may be long)."""
    head = ("node", "op", "variant", "workgroups", "uniform B", "reads", "writes", "reason")
    body = [(r.node, r.op, r.variant, r.workgroups, str(r.uniform_bytes), ", ".join(r.reads), ", ".join(r.writes),
             r.reason) for r in prog.rows]
    m = prog.memory
    lines = [f"program {prog.graph.name!r} on {prog.device.caps.adapter_name!r}: {len(prog.rows)} dispatches, "
             f"{len(prog.order)} nodes", *_table(head, body)]
    lines.append(f"intermediates: {m.intermediate_values} values in {m.intermediate_buffers} buffers, peak "
                 f"{m.intermediate_bytes} B vs naive {m.naive_bytes} B; persistent {m.persistent_bytes} B; "
                 f"uniform arena {m.uniform_bytes} B")
    lines.append(f"scratch: {m.scratch_requests} requests in {m.scratch_buffers} shared buffers, "
                 f"{m.scratch_bytes} B vs naive {m.scratch_naive_bytes} B")
    return "\n".join(lines)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _flow(reads: str, writes: str, room: int) -> str:
    """"reads -> writes" in `room` columns: the reads shortened first, the writes kept where they fit."""
    tail = f" -> {writes}"
    if len(reads) + len(tail) <= room:
        return reads + tail
    return _cut(reads, max(8, room - len(tail))) + _cut(tail, room - 8)


def short_text(prog) -> str:
    """At most WIDTH columns: the graph's own names only, reasons wrapped under their rows."""
    values = prog.graph.values
    named = lambda names: ", ".join(n for n in names if n in values)  # noqa: E731  (no fallbacks, flags, scratch)
    head = ("node", "kernel", "workgroups", "reads -> writes")
    cells = [(r.node, r.variant, r.workgroups) for r in prog.rows]
    lead = sum(max(len(row[i]) for row in [head] + cells) + 2 for i in range(3))   # where the last column starts
    room = max(20, WIDTH - lead)
    body = [c + (_flow(named(r.reads), named(r.writes), room),) for c, r in zip(cells, prog.rows)]
    table = [_cut(line, WIDTH) for line in _table(head, body)]
    m = prog.memory
    caps = prog.device.caps
    lines = textwrap.wrap(f"program {prog.graph.name!r}: {len(prog.rows)} dispatches from {len(prog.order)} nodes "
                          f"on {caps.adapter_name}", WIDTH, subsequent_indent="    ")
    lines += table[:2]
    indent = " " * min(lead, 8)
    for row, line in zip(prog.rows, table[2:]):
        lines.append(line)
        if row.reason:
            lines += textwrap.wrap(f"why: {row.reason}", WIDTH, initial_indent=indent, subsequent_indent=indent + "  ")
    # persistent_bytes: every buffer of the program's own besides the slots, the outputs' among them
    memory = (f"memory: {m.intermediate_values} intermediate values share {m.intermediate_buffers} buffers "
              f"({_kib(m.intermediate_bytes)} at peak, {_kib(m.naive_bytes)} with one buffer each); inputs, "
              f"outputs, weights and state {_kib(m.persistent_bytes)}; uniforms {_kib(m.uniform_bytes)}")
    if m.scratch_requests:   # temporary buffers of multi-pass kernels (split-K partial results)
        memory += (f"; {m.scratch_requests} temporary buffers of split passes share {m.scratch_buffers} "
                   f"({_kib(m.scratch_bytes)}, {_kib(m.scratch_naive_bytes)} unshared)")
    lines += textwrap.wrap(memory, WIDTH, subsequent_indent="    ")
    lines.append("explain(full=True): every binding, uniform bytes and the op of each row")
    return "\n".join(lines)
