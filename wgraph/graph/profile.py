"""`ProgramProfile`: GPU time per node of one Program replay (timestamp queries around every dispatch), and
the same time grouped by op and by layer (the graph scope a node was added in: `with g.scope("layer3"):`)."""

from __future__ import annotations

import attrs

from wgraph.scheduler.profiling import dispatch_times_us


def layer_of(node_name: str) -> str:
    """The scope a node was added in ("layer3" for "layer3/linear_12"; "" for a node outside any scope)."""
    return node_name.rpartition("/")[0]


@attrs.frozen
class NodeTime:
    """One node's GPU time in the replay: the sum of its dispatches' (end - begin)."""

    node: str
    op: str
    layer: str
    dispatches: int
    gpu_us: float


@attrs.frozen
class GroupTime:
    """Nodes of one op, or of one layer, added up."""

    name: str
    nodes: int
    dispatches: int
    gpu_us: float


@attrs.frozen
class ProgramProfile:
    """Rows in program order, one per node that dispatches. `span_us` is the replay's GPU time, from its first
    dispatch's start to its last one's end; what the rows do not cover of it is time between dispatches
    (barriers, launch gaps)."""

    program: str
    adapter: str
    rows: tuple[NodeTime, ...]
    span_us: float
    inside_passes: bool  # one pass, stamps around each dispatch; else a pass per dispatch (slower replay)

    @classmethod
    def from_ticks(cls, program: str, adapter: str, owners, ops: dict, ticks, inside_passes: bool) -> ProgramProfile:
        """`owners`: the node of each dispatch, in order; `ops`: node -> op name; `ticks`: (begin, end) each."""
        times, span = dispatch_times_us(ticks)
        totals: dict[str, list] = {}
        for node, us in zip(owners, times):
            entry = totals.setdefault(node, [0, 0.0])
            entry[0] += 1
            entry[1] += us
        rows = tuple(NodeTime(n, ops[n], layer_of(n), count, us) for n, (count, us) in totals.items())
        return cls(program, adapter, rows, span, inside_passes)

    @property
    def total_us(self) -> float:
        """The rows' sum: GPU time spent inside dispatches."""
        return sum(r.gpu_us for r in self.rows)

    def _grouped(self, key) -> tuple[GroupTime, ...]:
        groups: dict[str, list] = {}
        for r in self.rows:
            entry = groups.setdefault(key(r), [0, 0, 0.0])
            entry[0] += 1
            entry[1] += r.dispatches
            entry[2] += r.gpu_us
        return tuple(GroupTime(name, n, d, us) for name, (n, d, us) in groups.items())

    def by_op(self) -> tuple[GroupTime, ...]:
        """GPU time per op, the most expensive first."""
        return tuple(sorted(self._grouped(lambda r: r.op), key=lambda g: -g.gpu_us))

    def by_layer(self) -> tuple[GroupTime, ...]:
        """GPU time per layer (graph scope), in program order; nodes outside any scope under ""."""
        return self._grouped(lambda r: r.layer)

    def table(self, nodes: bool = False) -> str:
        """The profile as text: by op, by layer, and (with `nodes`) every node."""
        total = self.total_us or 1.0

        def block(title: str, groups) -> list[str]:
            out = [f"{title:40} {'nodes':>6} {'disp':>6} {'GPU us':>10} {'share':>7}"]
            out += [f"{g.name or '(no scope)':40} {g.nodes:6d} {g.dispatches:6d} {g.gpu_us:10.1f} "
                    f"{g.gpu_us / total:7.1%}" for g in groups]
            return out

        lines = [f"profile of program {self.program!r} on {self.adapter!r}: {len(self.rows)} nodes, "
                 f"{sum(r.dispatches for r in self.rows)} dispatches, {self.total_us:.1f} us in dispatches of a "
                 f"{self.span_us:.1f} us replay"
                 + ("" if self.inside_passes else " (a compute pass per dispatch: no timestamps inside passes)")]
        lines += block("by op", self.by_op())
        lines += block("by layer", self.by_layer())
        if nodes:
            lines.append(f"{'node':40} {'op':>14} {'disp':>6} {'GPU us':>10}")
            lines += [f"{r.node:40} {r.op:>14} {r.dispatches:6d} {r.gpu_us:10.1f}" for r in self.rows]
        return "\n".join(lines)
