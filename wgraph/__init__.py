"""wgraph: GPU compute ops (attention first) on WebGPU, run now, recorded into one submit, or compiled
into a graph that replays."""

from wgraph import process_setup

process_setup.private_runtime_dir()  # before anything starts the Vulkan loader
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
from wgraph.tensor import Tensor, TensorSpec

__version__ = "0.1.0"

__all__ = [
    "AliasingError", "ArgumentError", "Caps", "ChatTemplateError", "CheckpointError", "Device", "DeviceError", "DtypeError", "GpuValueError", "Graph", "GraphError", "KernelPath",
    "KernelPlan", "LimitError", "NoTokenizerError", "PlanError", "Program", "RecordingError", "RegistryError", "ShapeError", "Stats",
    "Tensor", "TensorSpec", "UnsupportedError", "Value", "WgraphError", "default_device", "kernel_path", "ops",
]
