"""`from_pretrained(path)`: a model from a Hugging Face checkpoint directory or a GGUF file, with the tokenizer the
files hold (tokenizer.json, or the GGUF vocabulary) attached as `model.tokenizer` for the text API."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import functools
import os

from wgraph import args
from wgraph.errors import ArgumentError, CheckpointError
from wgraph.models.files import kind
from wgraph.models.gguf_checkpoint import GGUFCheckpoint
from wgraph.models.tokenizer import Tokenizer

if TYPE_CHECKING:
    from wgraph.api_types import DTypeLike
    from wgraph.device import Device
    from wgraph.models.llama import Llama


def _directory_tokenizer(root: Path) -> Tokenizer | None:
    return Tokenizer.from_directory(root) if (root / "tokenizer.json").is_file() else None


def _gguf_tokenizer(ckpt: GGUFCheckpoint) -> Tokenizer | None:
    return Tokenizer.from_gguf(ckpt.file) if "tokenizer.ggml.model" in ckpt.file.metadata else None


def keeps_blocks(ckpt, dtype: str | None) -> bool:
    """Whether from_pretrained keeps a GGUF file's quantized matrices as blocks on the GPU (a QuantizedLlama):
    with no dtype asked for, for a `llama` file with a matrix in a block format wgraph computes on."""
    return dtype is None and ckpt.arch == "llama" and ckpt.has_blocks()


class PretrainedFiles:
    """A checkpoint directory or .gguf file opened once (`open_pretrained`): its config now, its tokenizer on
    first use, its weights when `load` builds the model, which gets that same tokenizer. What a caller reads to
    size a model before loading it (the generate CLI sizes the KV cache from the prompt's tokens) is then not
    read again."""

    def __init__(self, root: Path):
        from wgraph.models.config import DecoderConfig

        self.path = root
        if root.is_dir():
            self._gguf = None
            self.config = DecoderConfig.from_file(root / "config.json")
        else:
            self._gguf = GGUFCheckpoint(root)
            try:
                self.config = DecoderConfig.from_dict(self._gguf.config)
            except CheckpointError as e:  # its messages name config.json's keys: say where they came from
                raise CheckpointError(f"GGUF file {root.name}: its metadata, read as a Hugging Face config: {e}") from None

    @functools.cached_property
    def tokenizer(self) -> Tokenizer | None:
        """The files' tokenizer (tokenizer.json, or the GGUF vocabulary), built once; None where there is none."""
        return _gguf_tokenizer(self._gguf) if self._gguf is not None else _directory_tokenizer(self.path)

    def load(self, device: Device | None = None, *, dtype: DTypeLike | None = None,
             max_seq: int | None = None, x_int8: bool = False) -> Llama:
        """The model, as `from_pretrained(path, device, dtype=, max_seq=, x_int8=)` builds it (the same arguments)."""
        dtype = _check_load_options("PretrainedFiles.load", device, dtype, max_seq)
        x_int8 = args.flag("PretrainedFiles.load", "x_int8", x_int8)
        from wgraph.device import default_device
        from wgraph.models.checkpoint import Checkpoint
        from wgraph.models.llama import Llama, tensors_read

        dev = device or default_device()
        float_dtype = dtype or ("f16" if dev.caps.has_f16 else "f32")
        ckpt = self._gguf
        if x_int8 and (ckpt is None or not keeps_blocks(ckpt, dtype)):
            raise ArgumentError(f"x_int8=True rounds x for the GEMVs of a GGUF file's block matrices; {self.path.name} "
                                f"loads as float weights (a directory, another architecture or a dtype given)")
        shapes = tensors_read(self.config, float_dtype)   # the tensors the model reads: checked before it allocates
        if ckpt is None:
            directory = Checkpoint(self.path)
            directory.check_shapes(shapes)
            model = Llama(self.config, dev, directory.get, dtype=float_dtype, max_seq=max_seq)
            directory.check_all_read(self.config)
        elif keeps_blocks(ckpt, dtype):
            from wgraph.models.quantized import QuantizedLlama

            ckpt.check_shapes(shapes)
            # only the tensors the model reads: any other one stays unread, and unused() below names it
            weights = {hf: ckpt.get_blocks(hf, shape) for hf, shape in shapes.items()}
            model = QuantizedLlama(self.config, dev, weights, max_seq=max_seq, x_int8=x_int8)
        else:
            ckpt.check_shapes(shapes)
            model = Llama(self.config, dev, ckpt.get, dtype=float_dtype, max_seq=max_seq)
        if ckpt is not None:
            unused = ckpt.unused()
            if unused:  # a tensor the config did not ask for is math the model would silently leave out
                raise CheckpointError(f"GGUF file {self.path.name}: tensors {unused[:5]} ({len(unused)} in all) are "
                                      f"not used by the {ckpt.arch} model its metadata describes")
        model.tokenizer = self.tokenizer
        return model


def _check_load_options(fn: str, device, dtype, max_seq) -> str | None:
    """The checked device, dtype (its name, or None) and max_seq of a load, before any file is read."""
    from wgraph.device import Device
    from wgraph.models.config import MAX_SEQ
    from wgraph.models.llama import DTYPES

    if device is not None and not isinstance(device, Device):
        raise args.fail(fn, "device", device, "None (the default device) or a wgraph Device")
    dtype = args.optional_dtype_name(fn, "dtype", dtype, DTYPES)
    args.optional_integer(fn, "max_seq", max_seq, 2, MAX_SEQ)
    return dtype


def open_pretrained(path: str | os.PathLike[str]) -> PretrainedFiles:
    """Open a Hugging Face directory (config.json + *.safetensors) or a .gguf file: its config read, its weights
    not yet (`.load(device, dtype=, max_seq=)` builds the model, as `from_pretrained` does).

    path: the directory or the .gguf file.
    """
    return _open("open_pretrained", path)


def checkpoint_path(fn: str, path) -> Path:
    """`path` as a Path to an existing directory or file, else the error `fn` raises; nothing read (the generate CLI
    checks its path before it opens the device)."""
    # "" is Path("."): the working directory was loaded; a PathLike of bytes made pathlib's TypeError
    if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str) or not os.fspath(path):
        raise args.fail(fn, "path", path, "a directory or .gguf file path (a non-empty str or os.PathLike of str)")
    root = Path(path)
    found = kind(root)
    if found not in ("dir", "file"):
        missing = " (no such file or directory)" if found is None else ""
        raise CheckpointError(f"{fn}: {root} is neither a checkpoint directory (config.json, *.safetensors) nor a "
                              f".gguf file{missing}")
    return root


def _open(fn: str, path) -> PretrainedFiles:
    return PretrainedFiles(checkpoint_path(fn, path))


def from_pretrained(path: str | os.PathLike[str], device: Device | None = None, *, dtype: DTypeLike | None = None,
                    max_seq: int | None = None, x_int8: bool = False) -> Llama:
    """Load a Hugging Face directory (config.json + *.safetensors) or a .gguf file. A `llama` GGUF file loaded
    without a dtype keeps its matrices in the block formats wgraph computes on (ggml_blocks.FORMATS: Q8_0, Q4_K,
    Q6_K, IQ4_XS, ...) as their raw blocks on the GPU, read by the quantized GEMV (a QuantizedLlama; every other
    tensor dequantized to f32); with a dtype, or another
    architecture, every tensor is dequantized to the weights' dtype. The files' tokenizer is `model.tokenizer`.
    `open_pretrained(path).load(...)` is the same in two steps (the config and tokenizer first).

    path: the directory or the .gguf file.
    device: the Device to run on; None: the default device.
    dtype: the weights' storage: "f16", "f32" or "bf16" (numpy's and torch's spellings too); None: f16 where the
        device has shader-f16, else f32 (a llama GGUF file: its blocks as they are, the rest f32).
    max_seq: the KV cache's positions, in [2, MAX_SEQ]; None: the config's, up to DEFAULT_MAX_SEQ.
    x_int8: a GGUF file's block matrices only (no dtype): their GEMVs may round x to int8 per 32 weights and sum
        by integer dots where that is the faster GEMV (QuantizedLlama's x_int8); float weights refuse it.
    """
    _check_load_options("from_pretrained", device, dtype, max_seq)   # before any file is read
    args.flag("from_pretrained", "x_int8", x_int8)
    return _open("from_pretrained", path).load(device, dtype=dtype, max_seq=max_seq, x_int8=x_int8)
