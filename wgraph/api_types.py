"""The type aliases of the public API's annotations (PEP 561: wgraph ships py.typed). They are for readers and type
checkers; the arguments themselves are checked at run time by wgraph/args.py's rules, whatever their annotation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, Union

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from wgraph.graph.nodes import Value
    from wgraph.tensor import Tensor

# An op's tensor argument and result: a Tensor (run now or recorded) or a graph Value (a node is added); an op
# returns the kind it was given.
TensorT = TypeVar("TensorT", "Tensor", "Value")

# A dtype argument: wgraph's name ("f32"), numpy's spelling (np.float32, np.dtype("float32"), "float32") or a torch
# dtype (read by its name; torch is no dependency of wgraph, so it is Any here). wgraph/dtypes.py maps them.
DTypeLike = Union[str, "np.dtype[Any]", "type[Any]", Any]

# Host data for an upload: anything numpy can view (an ndarray, a memoryview, a CPU torch tensor, a list).
HostData = ArrayLike

# A shape: a tuple (or list) of integers.
Shape = Union[tuple[int, ...], list[int]]

# Positions, lengths and token ids given on the host (an int, a list or numpy array of them) or, where the
# docstring says so, a u32 GPU tensor read at dispatch time.
Ids = Union[int, "list[int]", "np.ndarray", "Tensor", "Value"]

__all__ = ["DTypeLike", "HostData", "Ids", "Shape", "TensorT"]
