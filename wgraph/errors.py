"""Exceptions raised by wgraph. Every one names the bad value and the limit, and is raised before GPU work,
except GpuValueError, which a kernel reports (wgraph/device_errors.py)."""


class WgraphError(Exception):
    """Base class of every error wgraph raises on purpose."""


class ArgumentError(WgraphError, ValueError):
    """A scalar argument breaks its rule (wgraph/args.py): the wrong type (a float or a string where an integer
    goes, None where a bool goes) or a value out of range. The message names the function, the argument, the
    value and the rule."""


class ShapeError(WgraphError, ValueError):
    """A tensor's shape does not fit the op."""


class DtypeError(WgraphError, TypeError):
    """A tensor's dtype is not one the op or kernel accepts; or a Tensor used as host data (given to numpy, asked its
    truth value or len, indexed, in a Python operator), which its data, on the GPU, cannot be."""


class UnsupportedError(WgraphError):
    """The device lacks a feature the request needs (for example shader-f16)."""


class LimitError(WgraphError, ValueError):
    """A size is above a device or kernel limit."""


class GpuValueError(LimitError):
    """A kernel found a value it read from a GPU buffer (a kv_len, a position) out of range. It stayed in bounds
    and reported it on the device error flag; raised by dev.check_errors() and by the next readback."""


class PlanError(WgraphError):
    """No kernel fits the request, or a forced kernel does not fit it."""


class DeviceError(WgraphError):
    """A tensor from another device, or a device that is lost or destroyed."""


class RecordingError(WgraphError):
    """A recording used after it was submitted or discarded, or nested wrongly; a tensor its discard (or a failed
    submit) left unwritten; a model's text stream resumed after another generation replaced the state it reads; a
    model's decode step before any prefill."""


class AliasingError(WgraphError, ValueError):
    """One buffer bound for writing and for another binding in the same dispatch."""


class RegistryError(WgraphError):
    """The shader registry or a WGSL file is inconsistent."""


class CheckpointError(WgraphError, ValueError):
    """A model checkpoint (config.json, *.safetensors) is malformed, incomplete or unsupported."""


class NoTokenizerError(WgraphError):
    """Text generation asked of a model loaded without a tokenizer (no tokenizer.json, no GGUF vocabulary)."""


class ChatTemplateError(WgraphError, ValueError):
    """A chat template refused the conversation (its raise_exception, a sandbox violation) or cannot be rendered."""
