"""wgraph: GPU compute ops (attention first) on WebGPU, run now, recorded into one submit, or compiled
into a graph that replays."""

import logging

from wgraph import process_setup

# A library's logger: what wgraph does behind the caller's back (the adapter it chose, a runtime directory it made,
# a CPU fallback) is logged under "wgraph"; the application decides what shows (logging.basicConfig(level="INFO")).
logging.getLogger("wgraph").addHandler(logging.NullHandler())
process_setup.quiet_intended_destroy()

from wgraph import ops
from wgraph.device import Caps, Device, Stats, default_device
from wgraph.errors import (
    AliasingError,
    ArgumentError,
    ChatTemplateError,
    CheckpointError,
    DeviceError,
    DtypeError,
    GpuValueError,
    LimitError,
    NoTokenizerError,
    PlanError,
    RecordingError,
    RegistryError,
    ShapeError,
    UnsupportedError,
    WgraphError,
)
from wgraph.graph import Graph, GraphError, Program, Value
from wgraph.ops.attention import KernelPath, kernel_path
from wgraph.ops.attention_planner import KernelPlan
from wgraph.progress import set_quiet
from wgraph.tensor import Tensor, TensorSpec

from wgraph.version import __version__

__all__ = [
    "AliasingError", "ArgumentError", "Caps", "ChatTemplateError", "CheckpointError", "Device", "DeviceError", "DtypeError", "GpuValueError", "Graph", "GraphError", "KernelPath",
    "KernelPlan", "LimitError", "NoTokenizerError", "PlanError", "Program", "RecordingError", "RegistryError", "ShapeError", "Stats",
    "Tensor", "TensorSpec", "UnsupportedError", "Value", "WgraphError", "default_device", "kernel_path", "ops",
    "set_quiet",
]
