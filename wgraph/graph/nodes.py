"""The parts a graph is made of: `Node`, `Value` (a symbolic tensor), `StateSpec` and `GraphError`. The builder
(graph.py), the compiler (program.py) and export (export.py) all build on these, so none of them imports the
others' module back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import attrs

from wgraph.errors import WgraphError
from wgraph.tensor import TensorSpec

SOURCE_OPS = ("input", "state")  # nodes that make a program-owned buffer instead of running a kernel


class GraphError(WgraphError):
    """A graph is malformed: an unknown input, a cycle, a duplicate name, an unknown op."""


@attrs.frozen
class Node:
    """One node: a registered op (or "input" / "state") with its params and the names of the values it takes
    (None for an absent optional input) and makes."""

    name: str
    op: str
    params: Any
    inputs: tuple = attrs.field(converter=tuple)
    outputs: tuple = attrs.field(converter=tuple)
    writes: tuple = attrs.field(converter=tuple, default=())  # values written in place (`out=` a state)

    @property
    def results(self) -> tuple:
        """The values the op's encode writes its outputs into: its own outputs, or the `out=` values."""
        return self.writes or self.outputs


@attrs.frozen(eq=False)
class Value(TensorSpec):
    """A symbolic tensor of a graph: shape and dtype, no storage. Op functions given a Value add a node."""

    graph: Any = attrs.field(kw_only=True, repr=False)  # the Graph it belongs to
    name: str = attrs.field(kw_only=True)
    _wgraph_symbol_ = True
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    @property
    def spec(self) -> TensorSpec:
        """Its shape and dtype as a plain TensorSpec (no graph)."""
        return TensorSpec(self.shape, self.dtype)

    @property
    def ndim(self) -> int:
        """The number of dimensions (len(shape))."""
        return len(self.shape)

    def reshape(self, *shape) -> Value:
        """A view of this value with another shape, as wg.ops.reshape: `shape` as integers or one tuple, one of
        them may be -1 (inferred)."""
        from wgraph.ops.dense import reshape

        return reshape(self, *shape)

    def __repr__(self) -> str:
        return f"Value({self.name!r}, shape={self.shape}, dtype={self.dtype})"

    def _no_data(self, use: str = "", instead: str = "") -> GraphError:
        """The error of a use that needs data: `use` goes before it, `instead` after its way to read an output."""
        return GraphError(f"{use}{self!r} is a value of graph {self.graph.name!r}: it has no data until a program "
                          f"runs; make it an output (g.output('y', value)), then prog = g.compile(dev) and read "
                          f"prog.run(...)['y'].numpy(){instead}")

    def __array__(self, dtype: Any = None, copy: Any = None) -> NoReturn:
        """np.asarray(value) was an array of one object: a Value holds no data."""
        raise self._no_data()

    # hidden from a type checker: it still reports value.numpy() (a Value is no Tensor), and a __bool__ typed NoReturn
    # would make it skip the code after `if value:` as unreachable; at run time, say why
    if not TYPE_CHECKING:
        def numpy(self):
            """Raises GraphError: a graph value has no data; a program's outputs do (prog.run(...)[name].numpy())."""
            raise self._no_data()

        def __bool__(self):
            """Raises GraphError: `if value:` was object's default, True; a Value holds no data to test."""
            raise self._no_data("the truth value (bool, if, assert, and/or) of ",
                                "; test that a value was given with value is not None")


@attrs.frozen
class StateSpec:
    """A program-owned persistent buffer: kept across runs; `init` (raw bytes) fills it at compile, else zeros."""

    name: str
    spec: TensorSpec
    init: bytes | None = None
