"""Graphs of ops: build with symbols, compile once, replay with new inputs."""

from wgraph.graph.graph import Graph
from wgraph.graph.nodes import GraphError, Node, StateSpec, Value
from wgraph.graph.profile import GroupTime, NodeTime, ProgramProfile
from wgraph.graph.program import MemoryPlan, PlanRow, Program

__all__ = ["Graph", "GraphError", "GroupTime", "MemoryPlan", "Node", "NodeTime", "PlanRow", "Program",
           "ProgramProfile", "StateSpec", "Value"]
