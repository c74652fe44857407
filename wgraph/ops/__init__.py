"""Op functions. Each takes tensors (immediate or recorded) or graph values (a node) the same way."""

from wgraph.ops.elementwise import add, scale

__all__ = ["add", "scale"]
