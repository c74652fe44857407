"""`from_pretrained(path)`: a model from a Hugging Face checkpoint directory or a GGUF file, with the tokenizer the
files hold (tokenizer.json, or the GGUF vocabulary) attached as `model.tokenizer` for the text API."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import os

from wgraph import args
from wgraph.errors import CheckpointError
from wgraph.models.gguf_checkpoint import GGUFCheckpoint
from wgraph.models.tokenizer import Tokenizer

if TYPE_CHECKING:
    from wgraph.api_types import DTypeLike
    from wgraph.device import Device
    from wgraph.models.llama import Llama


def build_model(config: dict, device, get_weight, *, dtype: str, max_seq: int | None):
    """The model a config.json-style dict describes, its weights read through `get_weight(hf_name, shape)`."""
    from wgraph.models.config import LlamaConfig
    from wgraph.models.llama import Llama

    return Llama(LlamaConfig.from_dict(config), device, get_weight, dtype=dtype, max_seq=max_seq)


def _directory_tokenizer(root: Path) -> Tokenizer | None:
    return Tokenizer.from_directory(root) if (root / "tokenizer.json").is_file() else None


def _gguf_tokenizer(ckpt: GGUFCheckpoint) -> Tokenizer | None:
    return Tokenizer.from_gguf(ckpt.file) if "tokenizer.ggml.model" in ckpt.file.metadata else None


def read_config_and_tokenizer(path: str | os.PathLike[str], *, tokenizer: bool = True):
    """(config, tokenizer or None) of a checkpoint directory or GGUF file, its weights left unread: what a caller
    needs to size a model before loading it (the generate CLI's KV cache). tokenizer=False: None in its place,
    not built. None where the path is neither a directory nor a file."""
    from wgraph.models.config import DecoderConfig

    root = Path(path)
    if root.is_dir():
        return DecoderConfig.from_file(root / "config.json"), _directory_tokenizer(root) if tokenizer else None
    if not root.is_file():
        return None
    ckpt = GGUFCheckpoint(root)
    return DecoderConfig.from_dict(ckpt.config), _gguf_tokenizer(ckpt) if tokenizer else None


def keeps_blocks(ckpt, dtype: str | None) -> bool:
    """Whether from_pretrained keeps a GGUF file's quantized matrices as blocks on the GPU (a QuantizedLlama):
    with no dtype asked for, for a `llama` file with a matrix in a block format wgraph computes on."""
    return dtype is None and ckpt.arch == "llama" and ckpt.has_blocks()


def from_pretrained(path: str | os.PathLike[str], device: Device | None = None, *, dtype: DTypeLike | None = None,
                    max_seq: int | None = None) -> Llama:
    """Load a Hugging Face directory (config.json + *.safetensors) or a .gguf file. A `llama` GGUF file loaded
    without a dtype keeps its Q8_0 / Q4_0 / Q4_1 / Q4_K matrices as their raw blocks on the GPU, read by the
    quantized GEMV (a QuantizedLlama; every other tensor dequantized to f32); with a dtype, or another
    architecture, every tensor is dequantized to the weights' dtype.

    path: the directory or the .gguf file.
    device: the Device to run on; None: the default device.
    dtype: the weights' storage: "f16", "f32" or "bf16" (numpy's and torch's spellings too); None: f16 where the
        device has shader-f16, else f32 (a llama GGUF file: its blocks as they are, the rest f32).
    max_seq: the KV cache's positions, in [2, MAX_SEQ]; None: the config's, up to DEFAULT_MAX_SEQ.
    """
    from wgraph.device import Device, default_device
    from wgraph.models.config import MAX_SEQ
    from wgraph.models.llama import DTYPES, Llama

    fn = "from_pretrained"
    if not isinstance(path, (str, os.PathLike)):
        raise args.fail(fn, "path", path, "a directory or .gguf file path (str or os.PathLike)")
    if device is not None and not isinstance(device, Device):
        raise args.fail(fn, "device", device, "None (the default device) or a wgraph Device")
    dtype = args.optional_dtype_name(fn, "dtype", dtype, DTYPES)
    args.optional_integer(fn, "max_seq", max_seq, 2, MAX_SEQ)   # before any file is read
    root = Path(path)
    dev = device or default_device()
    if root.is_dir():
        model = Llama.from_pretrained(root, dev, dtype=dtype or ("f16" if dev.caps.has_f16 else "f32"),
                                      max_seq=max_seq)
        model.tokenizer = _directory_tokenizer(root)
        return model
    if not root.is_file():
        raise CheckpointError(f"from_pretrained: {root} is neither a checkpoint directory (config.json, "
                              f"*.safetensors) nor a .gguf file")
    ckpt = GGUFCheckpoint(root)
    if keeps_blocks(ckpt, dtype):
        from wgraph.models.config import LlamaConfig
        from wgraph.models.quantized import QuantizedLlama

        weights = {hf: ckpt.get_blocks(hf, ckpt.file.tensors[ckpt.gguf_name(hf)].shape) for hf in ckpt.hf_names()}
        model = QuantizedLlama(LlamaConfig.from_dict(ckpt.config), dev, weights, max_seq=max_seq)
    else:
        model = build_model(ckpt.config, dev, ckpt.get, dtype=dtype or ("f16" if dev.caps.has_f16 else "f32"),
                            max_seq=max_seq)
    unused = ckpt.unused()
    if unused:  # a tensor the config did not ask for is math the model would silently leave out
        raise CheckpointError(f"GGUF file {root.name}: tensors {unused[:5]} ({len(unused)} in all) are not used by "
                              f"the {ckpt.arch} model its metadata describes")
    model.tokenizer = _gguf_tokenizer(ckpt)
    return model
