"""wgraph: GPU compute ops (attention first) on WebGPU, run now or recorded into one submit."""

from wgraph import ops
from wgraph.device import Caps, Device, Stats, default_device
from wgraph.errors import (
    AliasingError,
    DeviceError,
    DtypeError,
    LimitError,
    PlanError,
    RecordingError,
    RegistryError,
    ShapeError,
    UnsupportedError,
    WgraphError,
)
from wgraph.tensor import Tensor, TensorSpec
from wgraph.graph import Graph, GraphError, Program, Value
from wgraph.ops.attention import KernelPath, kernel_path  # noqa: E402
from wgraph.ops.attention_planner import KernelPlan  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "AliasingError", "Caps", "Device", "DeviceError", "DtypeError", "LimitError", "PlanError", "RecordingError",
    "RegistryError", "ShapeError", "Stats", "Tensor", "TensorSpec", "UnsupportedError", "WgraphError",
    "default_device", "ops",
]
__all__ += ["Graph", "GraphError", "Program", "Value"]
__all__ += ["KernelPath", "KernelPlan", "kernel_path"]
