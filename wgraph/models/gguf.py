"""Reading GGUF files (llama.cpp's format, versions 2 and 3): the metadata and the tensors' raw blocks.

The header is parsed here, not by the `gguf` package's reader, so that every count, length, offset and size
read from the file is checked before it is used: a truncated or hostile file raises CheckpointError naming the
field, never reads out of bounds and never allocates by a count it has not checked against the bytes that are
there. The tensor data is memory-mapped; each `GGUFTensor` holds a read-only view of its bytes (`raw`), its
GGML type and shape, so a caller can keep quantized blocks as they are, or call `dequantized()` (the `gguf`
package's dequantizer) for float32.
"""

from __future__ import annotations

import math
import mmap
import os
import re
import struct
from pathlib import Path
from typing import Any

import attrs
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize

from wgraph.errors import ArgumentError, CheckpointError
from wgraph.models.files import regular_file

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # version 1 had 32-bit counts and is not read
DEFAULT_ALIGNMENT = 32
MAX_ALIGNMENT = 1 << 16
MAX_TENSORS = 1 << 16      # the largest MoE files hold a few thousand tensors
MAX_KV = 1 << 16           # metadata entries; real files hold tens
MAX_STRING_BYTES = 1 << 24  # a key, a token or a chat template (the largest templates are ~100 KB)
MAX_ARRAY_ITEMS = 1 << 24   # token lists, scores and merges: at most a few hundred thousand in real files
MAX_NAME_BYTES = 64        # GGML_MAX_NAME: llama.cpp refuses longer tensor names
MAX_DIMS = 4               # GGML_MAX_DIMS
MAX_ELEMENTS = 1 << 40

# GGUF metadata value types: id -> (name, numpy dtype of one item); STRING and ARRAY are read by hand
SCALAR_TYPES = {0: ("UINT8", "<u1"), 1: ("INT8", "<i1"), 2: ("UINT16", "<u2"), 3: ("INT16", "<i2"),
                4: ("UINT32", "<u4"), 5: ("INT32", "<i4"), 6: ("FLOAT32", "<f4"), 7: ("BOOL", "<u1"),
                10: ("UINT64", "<u8"), 11: ("INT64", "<i8"), 12: ("FLOAT64", "<f8")}
STRING, ARRAY, BOOL = 8, 9, 7
INTEGER_TYPES = {0, 1, 2, 3, 4, 5, 10, 11}
FLOAT_TYPES = {6, 12}


def type_name(value_type: int) -> str:
    """The GGUF name of a metadata value type id."""
    return {STRING: "STRING", ARRAY: "ARRAY"}.get(value_type) or SCALAR_TYPES[value_type][0]


@attrs.frozen(eq=False)
class GGUFTensor:
    """One tensor of a GGUF file: its GGML type, its shape in numpy order (rows first: GGUF lists dimensions
    fastest first) and a read-only uint8 view of its bytes in the file."""

    name: str
    ggml_type: int
    shape: tuple[int, ...]
    raw: np.ndarray

    @property
    def type_name(self) -> str:
        return GGMLQuantizationType(self.ggml_type).name

    @property
    def block(self) -> tuple[int, int]:
        """(values per block, bytes per block) of the tensor's GGML type."""
        return GGML_QUANT_SIZES[GGMLQuantizationType(self.ggml_type)]

    def rows(self) -> np.ndarray:
        """The raw bytes as [elements / row length, bytes per row] (a row's blocks are contiguous)."""
        per_block, block_bytes = self.block
        return self.raw.reshape(-1, self.shape[-1] // per_block * block_bytes)

    def dequantized(self) -> np.ndarray:
        """The values as float32 of `shape`, through the `gguf` package's dequantizer."""
        try:
            values = dequantize(self.rows(), GGMLQuantizationType(self.ggml_type))
        except NotImplementedError:
            raise CheckpointError(f"GGUF tensor {self.name!r} has GGML type {self.type_name}, which the gguf "
                                  f"package cannot dequantize") from None
        if values.dtype != np.float32 or values.size != math.prod(self.shape):  # never trust a decoder blindly
            raise CheckpointError(f"GGUF tensor {self.name!r}: dequantizing {self.type_name} gave {values.dtype} "
                                  f"{values.shape}, expected float32 {self.shape}")
        return values.reshape(self.shape)


class _Cursor:
    """Little-endian reads from the header, each checked against the bytes left in the file."""

    def __init__(self, buf, where: str):
        self.buf, self.pos, self.size, self.where = buf, 0, len(buf), where

    def take(self, n: int, field: str):
        if n > self.size - self.pos:
            raise CheckpointError(f"{self.where}: {field} needs {n} bytes at offset {self.pos}, but the file ends "
                                  f"{self.size - self.pos} bytes later (truncated?)")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, field: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), field))[0]

    def count(self, field: str, limit: int, item_bytes: int) -> int:
        """A u64 count, refused above `limit` or above what the rest of the file could hold at `item_bytes` each."""
        n = self.unpack("<Q", field)
        room = (self.size - self.pos) // max(item_bytes, 1)
        if n > limit:
            raise CheckpointError(f"{self.where}: {field}={n} exceeds the limit {limit}")
        if n > room:
            raise CheckpointError(f"{self.where}: {field}={n} is more than the rest of the file can hold ({room} "
                                  f"at {item_bytes} bytes each; truncated or corrupt?)")
        return n

    def string(self, field: str, limit: int = MAX_STRING_BYTES) -> str:
        n = self.count(f"{field} length", limit, 1)
        raw = bytes(self.take(n, field))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CheckpointError(f"{self.where}: {field} is not valid UTF-8 ({e})") from None

    def strings(self, field: str, n: int) -> list[str]:
        """n strings as `string` reads them, with the same checks, for a vocabulary's 10^5 of them: one tight loop
        over the buffer; an element it does not take goes through `string`, which names it in its error."""
        buf, pos, size = self.buf, self.pos, self.size
        length_at = _U64.unpack_from
        out = []
        for i in range(n):
            if size - pos >= 8:
                (length,) = length_at(buf, pos)
                end = pos + 8 + length
                if length <= MAX_STRING_BYTES and end <= size:
                    try:
                        out.append(bytes(buf[pos + 8:end]).decode("utf-8"))
                        pos = end
                        continue
                    except UnicodeDecodeError:
                        pass
            self.pos = pos
            out.append(self.string(f"{field}[{i}]"))  # raises: too short for its length, too long, not UTF-8
            pos = self.pos
        self.pos = pos
        return out


_U64 = struct.Struct("<Q")


def _read_value(cur: _Cursor, vtype: int, field: str):
    """One metadata value of type `vtype`: a Python scalar, a str, a list of str or a 1-D numpy array."""
    if vtype == STRING:
        return cur.string(field)
    if vtype == ARRAY:
        itype = cur.unpack("<I", f"{field} item type")
        if itype == ARRAY:
            raise CheckpointError(f"{cur.where}: {field} is an array of arrays, which no supported model uses")
        if itype == STRING:
            n = cur.count(f"{field} item count", MAX_ARRAY_ITEMS, 8)  # each string has at least its length
            return cur.strings(field, n)
        if itype not in SCALAR_TYPES:
            raise CheckpointError(f"{cur.where}: {field} has unknown array item type {itype}")
        dt = np.dtype(SCALAR_TYPES[itype][1])
        n = cur.count(f"{field} item count", MAX_ARRAY_ITEMS, dt.itemsize)
        arr = np.frombuffer(cur.take(n * dt.itemsize, field), dt).copy()
        if itype == BOOL:
            if arr.size and arr.max() > 1:
                raise CheckpointError(f"{cur.where}: {field} holds a bool that is neither 0 nor 1")
            arr = arr.astype(bool)
        return arr
    if vtype not in SCALAR_TYPES:
        raise CheckpointError(f"{cur.where}: {field} has unknown value type {vtype}")
    dt = np.dtype(SCALAR_TYPES[vtype][1])
    v = np.frombuffer(cur.take(dt.itemsize, field), dt)[0].item()
    if vtype == BOOL:
        if v > 1:
            raise CheckpointError(f"{cur.where}: {field} is a bool of value {v}, neither 0 nor 1")
        return bool(v)
    return v


class GGUFFile:
    """A parsed GGUF file: `metadata` (key -> value), `value_types` (key -> GGUF type id, and the item type for
    arrays) and `tensors` (name -> GGUFTensor, in file order). The file stays memory-mapped while tensors are
    referenced."""

    def __init__(self, path):
        if not isinstance(path, (str, os.PathLike)):
            raise ArgumentError(f"GGUFFile: path={path!r} must be a path (str or os.PathLike)")
        self.path = Path(path)
        where = f"GGUF file {self.path.name}"
        regular_file(self.path)   # a FIFO would block the open, a device map anything
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, 2)
                if size < 24:  # magic, version and the two counts
                    raise CheckpointError(f"{where}: {size} bytes is too short for a GGUF header (24 bytes)")
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise CheckpointError(f"cannot read {self.path}: {e}") from None
        buf = memoryview(self._map)
        cur = _Cursor(buf, where)
        if bytes(cur.take(4, "magic")) != MAGIC:
            raise CheckpointError(f"{where}: magic {bytes(buf[:4])!r} is not {MAGIC!r}: not a GGUF file")
        self.version = cur.unpack("<I", "version")
        if self.version not in VERSIONS:
            raise CheckpointError(f"{where}: version {self.version} is not supported (only {list(VERSIONS)}; "
                                  f"a big-endian file reads as a huge version)")
        n_tensors = cur.count("tensor_count", MAX_TENSORS, 8 + 4 + 8 + 4 + 8)
        n_kv = cur.count("kv_count", MAX_KV, 8 + 4 + 1)

        self.metadata: dict[str, Any] = {}
        self.value_types: dict[str, tuple[int, ...]] = {}
        for i in range(n_kv):
            key = cur.string(f"key of metadata entry {i}")
            if key in self.metadata:
                raise CheckpointError(f"{where}: metadata key {key!r} appears twice")
            vtype = cur.unpack("<I", f"value type of {key!r}")
            start = cur.pos
            self.metadata[key] = _read_value(cur, vtype, f"metadata {key!r}")
            itype = (struct.unpack("<I", buf[start:start + 4])[0],) if vtype == ARRAY else ()
            self.value_types[key] = (vtype, *itype)

        self.alignment = DEFAULT_ALIGNMENT
        if "general.alignment" in self.metadata:
            a = self.metadata["general.alignment"]
            if self.value_types["general.alignment"] != (4,) or not 0 < a <= MAX_ALIGNMENT or a & (a - 1):
                raise CheckpointError(f"{where}: general.alignment={a!r} must be a UINT32 power of two at most "
                                      f"{MAX_ALIGNMENT}")
            self.alignment = a

        infos = []
        for i in range(n_tensors):
            name = cur.string(f"name of tensor {i}", MAX_NAME_BYTES)
            n_dims = cur.unpack("<I", f"n_dims of tensor {name!r}")
            if not 1 <= n_dims <= MAX_DIMS:
                raise CheckpointError(f"{where}: tensor {name!r} has n_dims={n_dims}; must be in [1, {MAX_DIMS}]")
            dims = struct.unpack(f"<{n_dims}Q", cur.take(8 * n_dims, f"dims of tensor {name!r}"))
            ggml_type = cur.unpack("<I", f"type of tensor {name!r}")
            offset = cur.unpack("<Q", f"offset of tensor {name!r}")
            infos.append((name, dims, ggml_type, offset))
        self.data_offset = -(-cur.pos // self.alignment) * self.alignment

        self.tensors: dict[str, GGUFTensor] = {}
        spans = []
        for name, dims, ggml_type, offset in infos:
            if name in self.tensors:
                raise CheckpointError(f"{where}: tensor name {name!r} appears twice")
            nbytes = self._tensor_bytes(where, name, dims, ggml_type)
            if offset % self.alignment:
                raise CheckpointError(f"{where}: tensor {name!r} offset {offset} is not a multiple of the alignment "
                                      f"{self.alignment}")
            start = self.data_offset + offset
            if start > size or nbytes > size - start:
                raise CheckpointError(f"{where}: tensor {name!r} bytes [{start}, {start + nbytes}) lie past the end "
                                      f"of the file ({size} bytes)")
            raw = np.frombuffer(self._map, np.uint8, count=nbytes, offset=start)
            self.tensors[name] = GGUFTensor(name, ggml_type, tuple(reversed(dims)), raw)
            spans.append((start, start + nbytes, name))
        spans.sort()
        for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
            if start < end:
                raise CheckpointError(f"{where}: the bytes of tensors {a!r} and {b!r} overlap")

    @staticmethod
    def _tensor_bytes(where: str, name: str, dims: tuple[int, ...], ggml_type: int) -> int:
        """The byte size of a tensor of `dims` (fastest first) and `ggml_type`, each checked."""
        try:
            qtype = GGMLQuantizationType(ggml_type)
            per_block, block_bytes = GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise CheckpointError(f"{where}: tensor {name!r} has unknown GGML type {ggml_type}") from None
        if any(d < 1 for d in dims) or math.prod(dims) > MAX_ELEMENTS:
            raise CheckpointError(f"{where}: tensor {name!r} has dims {list(dims)}; each must be >= 1 and their "
                                  f"product at most {MAX_ELEMENTS}")
        if dims[0] % per_block:
            raise CheckpointError(f"{where}: tensor {name!r} has rows of {dims[0]} values, not a multiple of the "
                                  f"{qtype.name} block of {per_block}")
        return dims[0] // per_block * block_bytes * math.prod(dims[1:])


# llama.cpp's gguf-split names shard i (1-based) of n `<prefix>-%05d-of-%05d.gguf` (llama_split_path) and writes
# split.no (0-based), split.count and split.tensors.count into every shard; the first holds the model's metadata
SPLIT_NAME = re.compile(r"(.+)-(\d{5})-of-(\d{5})\.gguf")
MAX_SPLITS = (1 << 16) - 1   # split.count is a UINT16


def _split_field(f: GGUFFile, key: str, lo: int, hi: int) -> int:
    where = f"GGUF file {f.path.name}"
    if key not in f.metadata:
        raise CheckpointError(f"{where}: metadata {key!r} is missing (the other shards of its split model have it)")
    v, t = f.metadata[key], f.value_types[key]
    if t[0] not in INTEGER_TYPES or not lo <= v <= hi:
        raise CheckpointError(f"{where}: metadata {key}={v!r} must be an integer in [{lo}, {hi}]")
    return v


def open_split(path) -> GGUFFile:
    """The GGUF file at `path`; where it is a shard of a model llama.cpp split over several files (split.count >
    1), the first shard (its metadata is the model's) with the tensors of every shard. The sibling shards are found
    by llama.cpp's naming rule; each must agree on split.count and split.tensors.count, hold the split.no its name
    says, and no tensor may be in two shards; the shards' tensors must add up to split.tensors.count."""
    f = GGUFFile(path)
    if "split.count" not in f.metadata:
        return f
    count = _split_field(f, "split.count", 1, MAX_SPLITS)
    if count == 1:   # one file (gguf-split given more tensors a shard than there are): read as llama.cpp reads it
        return f
    total = _split_field(f, "split.tensors.count", 0, MAX_TENSORS)
    m = SPLIT_NAME.fullmatch(f.path.name)
    if m is None or int(m.group(3)) != count:
        raise CheckpointError(f"GGUF file {f.path.name}: split.count={count} but its name is not "
                              f"'<model>-%05d-of-{count:05d}.gguf', llama.cpp's name of a shard of {count}")
    shards = []
    for i in range(1, count + 1):
        p = f.path.with_name(f"{m.group(1)}-{i:05d}-of-{count:05d}.gguf")
        if int(m.group(2)) == i:
            shards.append(f)
        elif not p.is_file():
            raise CheckpointError(f"GGUF file {p.name}: shard {i} of the {count} of split model "
                                  f"{f.path.name} is missing")
        else:
            shards.append(GGUFFile(p))
    tensors: dict[str, GGUFTensor] = {}
    where: dict[str, str] = {}
    for i, s in enumerate(shards):
        name = f"GGUF file {s.path.name}"
        for key, want in (("split.no", i), ("split.count", count), ("split.tensors.count", total)):
            got = _split_field(s, key, 0, MAX_SPLITS if key != "split.tensors.count" else MAX_TENSORS)
            if got != want:
                raise CheckpointError(f"{name}: metadata {key}={got}, but as shard {i + 1} of {shards[0].path.name}'s "
                                      f"split of {count} it must be {want}")
        for t, tensor in s.tensors.items():
            if t in tensors:
                raise CheckpointError(f"{name}: tensor {t!r} is also in {where[t]}: a tensor is in one shard only")
            tensors[t], where[t] = tensor, s.path.name
    if len(tensors) != total:
        raise CheckpointError(f"GGUF file {shards[0].path.name}: its {count} shards hold {len(tensors)} tensors, "
                              f"split.tensors.count={total}")
    first = shards[0]
    first.tensors = tensors   # each tensor's bytes are a view of its own shard's map, which the view keeps open
    first.shards = tuple(s.path for s in shards)
    return first
