"""Op functions. Each takes tensors (immediate or recorded) or graph values (a node) the same way."""

from wgraph.ops.attention import AttentionParams, KernelPath, attention, attention_plan, kernel_path
from wgraph.ops.attention_planner import KernelPlan
from wgraph.ops.elementwise import add, scale
from wgraph.ops.dense import linear, reshape, rmsnorm, rope, rope_tables

__all__ = ["add", "scale"]
__all__ += ["linear", "reshape", "rmsnorm", "rope", "rope_tables"]
__all__ += ["AttentionParams", "KernelPath", "KernelPlan", "attention", "attention_plan", "kernel_path"]
