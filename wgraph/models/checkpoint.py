"""Reading a Hugging Face checkpoint directory: config.json and *.safetensors (one file, or shards listed by
model.safetensors.index.json) through the `safetensors` package's numpy API. F32 and F16 tensors come back as
stored; BF16, which numpy lacks, is read as raw 16-bit words and returned as wgraph's bf16 bit patterns
(dtypes.BF16_BITS), unconverted. Every name, shape, dtype and byte range is checked before use; nothing in the
files is executed."""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path

import numpy as np
from safetensors import SafetensorError, safe_open

from wgraph import args
from wgraph.dtypes import BF16_BITS, as_f32
from wgraph.errors import CheckpointError
from wgraph.models.config import DecoderConfig
from wgraph.models.config_values import shown
from wgraph.models.files import kind, read_text

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
MAX_INDEX_BYTES = 64 << 20
MAX_HEADER_BYTES = 100 << 20  # safetensors' own limit on a file's JSON header
DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None}  # None: read as raw bits by hand
HEAD = "lm_head.weight"


def _shard_names(root: Path) -> list[str]:
    """The .safetensors files of a checkpoint: model.safetensors alone when it is there, else the index's shards,
    else every *.safetensors beside config.json."""
    # transformers' from_pretrained tries SAFE_WEIGHTS_NAME (model.safetensors) before SAFE_WEIGHTS_INDEX_NAME and
    # then reads that file alone: a directory holding both (a re-save beside old shards) loads the single file
    # there, so reading the index here would load other weights than transformers, silently
    if (root / SINGLE_FILE).is_file():
        return [SINGLE_FILE]
    index = root / INDEX_FILE
    if index.exists():
        text = read_text(index, MAX_INDEX_BYTES)
        try:
            wmap = json.loads(text)["weight_map"]
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            raise CheckpointError(f"{index}: not a safetensors index with a 'weight_map' "
                                  f"({type(e).__name__}: {e})") from None
        if not isinstance(wmap, dict):
            raise CheckpointError(f"{index}: 'weight_map' must map tensor names to file names")
        names = []
        for tensor, fname in wmap.items():
            # a shard must be a plain file name inside the checkpoint directory: no paths out of it
            if not isinstance(fname, str) or Path(fname).name != fname or fname in ("", ".", "..") \
                    or not fname.endswith(".safetensors"):
                raise CheckpointError(f"{index}: tensor {tensor!r} maps to {fname!r}, which is not a "
                                      f".safetensors file name in {root}")
            names.append(fname)
        return sorted(set(names))
    found = sorted(p.name for p in root.glob("*.safetensors") if p.is_file())
    if not found:
        raise CheckpointError(f"{root}: no *.safetensors files and no {INDEX_FILE}")
    return found


class Checkpoint:
    """The tensors of a checkpoint directory, by name; `get(name, shape)` reads one as a numpy array.

    root: the checkpoint directory (*.safetensors, sharded with model.safetensors.index.json or not)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        if not isinstance(root, (str, os.PathLike)) or not isinstance(os.fspath(root), str) or not os.fspath(root):
            raise args.fail("Checkpoint", "root", root, "a directory path (a non-empty str or os.PathLike of str)")
        self.root = Path(root)
        if kind(self.root) != "dir":
            raise CheckpointError(f"{self.root} is not a directory")
        self.where: dict[str, Path] = {}
        self.read: set[str] = set()   # the names `get` has read (unused(): the rest)
        self._files = {}
        self._offsets: dict[Path, tuple[int, dict]] = {}   # per file: its header's length and data_offsets, read once
        for fname in _shard_names(self.root):
            path = self.root / fname
            try:
                listed = path.is_file()
            except OSError as e:  # a name the file system refuses (past NAME_MAX: ENAMETOOLONG)
                raise CheckpointError(f"{self.root / INDEX_FILE}: shard {shown(fname)} cannot be looked up: "
                                      f"{e.strerror}") from None
            if not listed:
                raise CheckpointError(f"{path}: shard listed in {INDEX_FILE} is missing")
            try:
                handle = safe_open(str(path), framework="np")
            except (SafetensorError, OSError) as e:
                raise CheckpointError(f"{path}: not a valid safetensors file: {e}") from None
            self._files[path] = handle
            for name in handle.keys():
                if name in self.where:
                    raise CheckpointError(f"tensor {name!r} is in both {self.where[name].name} and {fname}")
                self.where[name] = path

    def __contains__(self, name: str) -> bool:
        return name in self.where

    def _header(self, name: str, shape: tuple[int, ...]) -> tuple[Path, str, tuple[int, ...]]:
        """(file, dtype, shape) of tensor `name` from its header (no data read), checked against `shape`."""
        path = self.where.get(name)
        if path is None:
            raise CheckpointError(f"tensor {name!r} is missing from the checkpoint in {self.root}")
        sl = self._files[path].get_slice(name)
        dtype, got = sl.get_dtype(), tuple(sl.get_shape())
        if dtype not in DTYPES:
            raise CheckpointError(f"tensor {name!r} in {path.name} has dtype {dtype}; supported: {sorted(DTYPES)}")
        if got != tuple(shape):
            raise CheckpointError(f"tensor {name!r} in {path.name} has shape {list(got)}, "
                                  f"the config needs {list(shape)}")
        return path, dtype, got

    def check_shapes(self, shapes: dict[str, tuple[int, ...]]) -> None:
        """CheckpointError unless every tensor of `shapes` (name -> shape) is here with that shape and a dtype
        wgraph reads: from the headers alone, before a model allocates anything for them.

        shapes: the tensors a model will read, by name.
        """
        if not isinstance(shapes, dict):
            raise args.fail("Checkpoint.check_shapes", "shapes", shapes, "a dict of tensor name -> shape")
        for name, shape in shapes.items():
            self._header(args.text("Checkpoint.check_shapes", "name", name),
                         args.shape("Checkpoint.check_shapes", "shape", shape))
        embed = "model.embed_tokens.weight"
        if HEAD in self.where and HEAD not in shapes and embed in shapes:  # tied: the embedding serves as lm_head
            self._check_tied_head(embed, shapes[embed])

    def _check_tied_head(self, embed: str, shape: tuple[int, ...]) -> None:
        """A tied model's file that holds its own lm_head.weight: accepted only where it equals the embedding
        (torch .bin conversions write both). transformers 5.25 does not tie two that differ (its logits come from
        lm_head.weight, whatever the config says), so such a file says two things."""
        head, table = (as_f32(self.get(name, shape)) for name in (HEAD, embed))
        if not np.array_equal(head, table):
            raise CheckpointError(f"config.json: tie_word_embeddings=true, but {HEAD!r} in {self.where[HEAD].name} "
                                  f"differs from {embed!r}: transformers 5.25 does not tie them then (its logits come "
                                  f"from lm_head.weight), so the file says two things; set tie_word_embeddings to "
                                  f"false to use lm_head.weight")

    def check_all_read(self, config: DecoderConfig) -> None:
        """After a model is built from it: CheckpointError naming the Hugging Face model tensors (model.*,
        lm_head.*) no `get` read, which would be math its config leaves out (a layer past num_hidden_layers, biases
        the config says it has not). As transformers loads them, a tied model's own lm_head.weight (the embedding
        serves; check_shapes found them equal) and rotary inv_freq buffers (computed from the config) are not
        counted; tensors of other names (another format's file beside the model's, as Mistral's
        consolidated.safetensors) are not the model's.

        config: the model's config (its tie_word_embeddings and model_type).
        """
        if not isinstance(config, DecoderConfig):
            raise args.fail("Checkpoint.check_all_read", "config", config, "a DecoderConfig")
        unused = sorted(n for n in self.where if n not in self.read and n.startswith(("model.", "lm_head."))
                        and not n.endswith("rotary_emb.inv_freq")
                        and not (config.tie_word_embeddings and n == HEAD))
        if unused:
            raise CheckpointError(f"{self.root}: tensors {unused[:5]} ({len(unused)} in all) are not used by the "
                                  f"{config.model_type} model config.json describes")

    def get(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """Tensor `name`, checked to have `shape`: float32 or float16 as stored, BF16 as its bit patterns
        (a dtypes.BF16_BITS array; dtypes.from_bf16 widens it exactly).

        name: the tensor's name in the checkpoint.
        shape: the shape the model needs (a CheckpointError names a mismatch).
        """
        shape = args.shape("Checkpoint.get", "shape", shape)
        path, dtype, got = self._header(args.text("Checkpoint.get", "name", name), shape)
        self.read.add(name)
        if DTYPES[dtype] is None:
            if path not in self._offsets:   # parsed once a file: a 100 MB header took 0.26 s a tensor to parse again
                self._offsets[path] = _header_offsets(path)
            data = _raw_bytes(path, name, 2 * math.prod(got), *self._offsets[path])
            return np.frombuffer(data, BF16_BITS).reshape(got)
        arr = self._files[path].get_tensor(name)
        if arr.dtype != DTYPES[dtype] or arr.shape != got:  # what safetensors returned must be what it declared
            raise CheckpointError(f"tensor {name!r}: read {arr.dtype} {arr.shape}, declared {dtype} {got}")
        return arr


def _header_offsets(path: Path) -> tuple[int, dict]:
    """(header length, {tensor name: its data_offsets as the header states them}) of a safetensors file (already
    validated by safetensors' safe_open; `_raw_bytes` checks each range again)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        if hlen > min(MAX_HEADER_BYTES, size - 8):
            raise CheckpointError(f"{path.name}: header length {hlen} exceeds the file ({size} bytes)")
        try:
            header = json.loads(f.read(hlen))
        except (ValueError, RecursionError):
            header = None
    if not isinstance(header, dict):   # safe_open read it as one: the file changed since
        raise CheckpointError(f"{path.name}: its header is no longer a JSON object")
    return hlen, {name: entry.get("data_offsets") for name, entry in header.items() if isinstance(entry, dict)}


def _raw_bytes(path: Path, name: str, nbytes: int, hlen: int, offsets: dict) -> bytes:
    """The bytes of one tensor, located through the file's header (`_header_offsets`: its length and the tensors'
    data_offsets), checked: the range lies inside the file and has exactly the expected length."""
    size = path.stat().st_size
    try:
        start, end = (int(x) for x in offsets[name])
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"tensor {name!r}: no data_offsets in {path.name}'s header") from None
    if not (0 <= start <= end and end - start == nbytes and 8 + hlen + end <= size):
        raise CheckpointError(f"tensor {name!r} in {path.name}: bytes [{start}, {end}) do not hold {nbytes} bytes "
                              f"inside the file's {size - 8 - hlen} data bytes")
    with open(path, "rb") as f:
        f.seek(8 + hlen + start)
        data = f.read(nbytes)
    if len(data) != nbytes:
        raise CheckpointError(f"tensor {name!r}: read {len(data)} of {nbytes} bytes from {path.name}")
    return data
