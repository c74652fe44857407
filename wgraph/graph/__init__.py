"""Graphs of ops: build with symbols, compile once, replay with new inputs."""

from wgraph.graph.graph import Graph, GraphError, Node, StateSpec, Value
from wgraph.graph.program import MemoryPlan, PlanRow, Program

__all__ = ["Graph", "GraphError", "MemoryPlan", "Node", "PlanRow", "Program", "StateSpec", "Value"]
