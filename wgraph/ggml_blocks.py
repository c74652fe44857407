"""GGML's quantized block formats that wgraph computes on (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K,
Q6_K, IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M): their
layouts, the `QuantizedWeight` that holds one [out_features, in_features] matrix as its raw blocks (on the host, on
the GPU, or as a graph value), and `quantize` from float32 weights (its per-format quantizers: ggml_quantizers.py).

A GGML row is `in_features / block_weights` blocks stored back to back, and rows follow each other; a block is
byte-packed (Q4_0 is 18 bytes, Q5_0 22, Q8_0 34, Q6_K 210: not every block starts on a 4-byte boundary). On the GPU the
raw bytes are a u32 tensor, padded with zeros to a multiple of 16 bytes and at least one word past the last byte:
the GEMV reads a half-word-aligned block's quants as two-word windows, and Q4_K's kernels read 16-byte words.
The IQ1, IQ2 and IQ3 grid formats' tensors hold their grid after that (`format_table`, `BlockFormat.table_at`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Sequence

import attrs
import numpy as np

from wgraph import args
from wgraph.errors import ArgumentError, DtypeError, LimitError, ShapeError, UnsupportedError
from wgraph.ggml_quantizers import QUANTIZERS, format_grid
from wgraph.host_arrays import host_view

if TYPE_CHECKING:
    from wgraph.device import Device

MAX_BYTES = (1 << 32) - 64  # kernels address a weight's bytes with u32 offsets


@attrs.frozen
class BlockFormat:
    """One GGML block format: its name and type number (as in GGUF files), its block's weights and bytes, and
    where its f16 scales sit (`halves` of them from byte `halves_at` of a block: d, and the min or dmin where
    there is one; Q6_K's and Q3_K's d trails the block)."""

    name: str
    ggml_type: int
    block_weights: int
    block_bytes: int
    halves_at: int = 0
    halves: int = 1
    table_words: int = 0  # the format's lookup table (format_table) after the blocks on the GPU: the IQ1-3 grids

    def row_bytes(self, in_features: int) -> int:
        return in_features // self.block_weights * self.block_bytes

    def nbytes(self, out_features: int, in_features: int) -> int:
        """Bytes of the raw blocks of an [out_features, in_features] matrix: what a GEMV reads."""
        return out_features * self.row_bytes(in_features)

    def table_at(self, out_features: int, in_features: int) -> int:
        """The word where the GPU tensor's table starts: the raw bytes padded to a multiple of 16 with at least 4
        bytes more (the kernels compute it the same way from the matrix's rows and blocks)."""
        return (self.nbytes(out_features, in_features) + 4 + 15) // 16 * 4

    def words(self, out_features: int, in_features: int) -> int:
        """u32 words of the GPU tensor: the padded raw bytes, then the format's table (most formats have none)."""
        return self.table_at(out_features, in_features) + self.table_words


# Layouts (little-endian; "f16" is an IEEE half):
#   Q8_0: d f16, qs int8[32]                      w[i] = d * qs[i]
#   Q4_0: d f16, qs u8[16]                        w[i] = d * (q[i] - 8); q[i] = qs[i] & 15, q[i + 16] = qs[i] >> 4
#   Q4_1: d f16, m f16, qs u8[16]                 w[i] = d * q[i] + m (q as Q4_0's)
#   Q5_0: d f16, qh u8[4], qs u8[16]               w[i] = d * (q[i] - 16); q[i] as Q4_0's with bit i of qh (a u32)
#                                                 on top (llama.cpp's fallback where 256 does not divide a K-quant row)
#   Q5_1: d f16, m f16, qh u8[4], qs u8[16]       w[i] = d * q[i] + m (q as Q5_0's; the fallback inside Q5_K files)
#   Q4_K: d f16, dmin f16, scales u8[12], qs u8[128]: 8 sub-blocks of 32 with 6-bit scales sc[j] and mins mn[j]
#         packed in `scales`; qs byte 32c + l holds w[64c + l] (low nibble, sub-block 2c) and w[64c + 32 + l]
#         (high nibble, sub-block 2c + 1); w = d * sc[j] * q - dmin * mn[j].
#   Q5_K: d f16, dmin f16, scales u8[12], qh u8[32], qs u8[128]: Q4_K's with a fifth bit a weight, bit j of qh byte
#         l for w[32j + l] (its 16); w = d * sc[j] * q - dmin * mn[j]. Q5_K_M files hold it.
#   Q2_K: scales u8[16], qs u8[64], d f16, dmin f16: 16 sub-blocks of 16, sub-block s's scale sc in the low
#         nibble of scales[s] and its min mn in the high; half n (weights 128n ..): qs byte 32n + l holds
#         w[128n + 32j + l] in bits 2j, 2j + 1 (j = 0..3); w = d * sc * q - dmin * mn. Q2_K files hold it.
#   Q3_K: hmask u8[32], qs u8[64], scales u8[12], d f16: 16 sub-blocks of 16 with 6-bit scales (the low 4 bits
#         of scale s in byte s % 8 of scales, nibble s // 8; the top 2 in byte 8 + s % 4, bits 2 * (s // 4));
#         q: Q2_K's 2 bits from qs, the third bit 4n + j of hmask byte l; w = d * (scale - 32) * (q - 4).
#         Q3_K_S / Q3_K_M files hold it.
#   IQ4_NL: d f16, qs u8[16] (Q4_0's nibbles)    w[i] = d * IQ4_VALUES[q[i]] (16 non-uniform int8 values,
#         ggml_quantizers.IQ4_VALUES)
#   IQ4_XS: d f16, scales_h u16, scales_l u8[4], qs u8[128]: 8 sub-blocks of 32 with 6-bit scales (low 4 bits:
#         nibble j % 2 of scales_l[j // 2]; top 2: bits 2j of scales_h); sub-block j's quants are bytes 16j ..
#         16j + 15 as IQ4_NL's; w = d * (scale[j] - 32) * IQ4_VALUES[q]. llama.cpp's IQ4_XS files.
#   IQ2_XXS: d f16, then per sub-block j of 32 two u32: 4 grid indices (bytes; each 8 weights' magnitudes from a
#         256-entry grid of 8, 25 or 43) and 4 x 7 sign bits (the 8th of each 8: their parity) with a 4-bit scale s
#         on top; w = d * (0.5 + s) / 4 * grid * sign. llama.cpp's IQ2_XXS files (2.06 bits a weight).
#   IQ3_XXS: d f16, qs u8[64] (8 grid indices a sub-block; each 4 magnitudes from a 256-entry grid, 4..62), then
#         a u32 a sub-block: IQ2_XXS's signs and scale; w = d * (0.5 + s) / 2 * grid * sign (3.06 bits a weight).
#   IQ2_XS: d f16, qs u16[32] (a group of 8: a 9-bit index into a 512-entry grid of 8, a 7-bit sign code as
#         IQ2_XXS's), scales u8[8] (a nibble each 16 weights); w = d * (0.5 + s) / 4 * grid * sign.
#   IQ2_S: d f16, qs u8[32] (a group's index, low 8 bits), signs u8[32] (a group's 8 sign bits), qh u8[8] (2 more
#         index bits a group: 1024 entries of 8), scales u8[8] as IQ2_XS's.
#   IQ3_S: d f16, qs u8[64] (a group of 4: low 8 bits of its index into a 512-entry grid of 4 odd magnitudes),
#         qh u8[8] (the 9th bits), signs u8[32] (a bit a weight), scales u8[4] (a nibble a sub-block of 32);
#         w = d * (1 + 2s) * grid * sign. The IQ3_M / IQ3_S files hold it.
#   IQ1_S: d f16, qs u8[32] (a group of 8: low 8 bits of an 11-bit index into a 2048-entry grid of -1, 0, 1), a u16
#         a sub-block of 32 (3 more index bits a group, a 3-bit scale s, the sign of its delta 0.125 in bit 15);
#         w = d * (2s + 1) * (grid + delta).
#   IQ1_M: qs u8[32] as IQ1_S's, qh u8[16] (a nibble a group: 3 more index bits, the delta's sign), scales u16[4]
#         (3-bit scales a 16 weights, and d as the 4 top nibbles); w = d * (2s + 1) * (grid + delta).
#   Q6_K: ql u8[128], qh u8[64], scales int8[16], d f16: 16 sub-blocks of 16; half n (weights 128n ..): ql byte
#         64n + l holds the low 4 bits of w[128n + l] (low nibble) and w[128n + 64 + l] (high), byte 64n + 32 + l
#         those of w[128n + 32 + l] and w[128n + 96 + l]; qh byte 32n + l their top 2 bits (bits 0-1, 2-3, 4-5,
#         6-7: + 0, 32, 64, 96); w = d * scales[i // 16] * (q - 32). llama.cpp's Q4_K_M files hold some matrices
#         (the output, a share of attn_v and ffn_down) in it.
FORMATS = {f.name: f for f in (BlockFormat("Q8_0", 8, 32, 34), BlockFormat("Q4_0", 2, 32, 18),
                               BlockFormat("Q4_1", 3, 32, 20, halves=2), BlockFormat("Q4_K", 12, 256, 144, halves=2),
                               BlockFormat("Q5_0", 6, 32, 22), BlockFormat("Q5_1", 7, 32, 24, halves=2),
                               BlockFormat("Q5_K", 13, 256, 176, halves=2),
                               BlockFormat("Q2_K", 10, 256, 84, halves_at=80, halves=2),
                               BlockFormat("Q3_K", 11, 256, 110, halves_at=108),
                               BlockFormat("Q6_K", 14, 256, 210, halves_at=208),
                               BlockFormat("IQ4_NL", 20, 32, 18), BlockFormat("IQ4_XS", 23, 256, 136),
                               BlockFormat("IQ2_XXS", 16, 256, 66, table_words=512),
                               BlockFormat("IQ2_XS", 17, 256, 74, table_words=1024),
                               BlockFormat("IQ2_S", 22, 256, 82, table_words=2048),
                               BlockFormat("IQ3_XXS", 18, 256, 98, table_words=256),
                               BlockFormat("IQ3_S", 21, 256, 110, table_words=512),
                               BlockFormat("IQ1_S", 19, 256, 50, table_words=4096),
                               BlockFormat("IQ1_M", 29, 256, 56, table_words=4096))}


def block_format(name, where: str = "block_format") -> BlockFormat:
    """The format called `name` (GGML's name, e.g. "Q4_K"); UnsupportedError naming the formats otherwise."""
    fmt = FORMATS.get(name) if isinstance(name, str) else None
    if fmt is None:
        raise UnsupportedError(f"{where}: ggml_type={args.show(name)} is not a block format wgraph computes on; it has "
                               f"{sorted(FORMATS)} (other GGML types are dequantized on load)")
    return fmt


def check_matrix(fmt: BlockFormat, shape, where: str) -> tuple[int, int]:
    """(out_features, in_features) of a quantized matrix `shape`, checked against the block size and the u32
    byte offsets the kernels use."""
    if not (isinstance(shape, tuple) and len(shape) == 2 and all(map(args.is_int, shape)) and min(shape) >= 1):
        raise args.fail(where, "shape", shape, "a tuple (out_features, in_features) of two integers >= 1")
    n, k = (int(d) for d in shape)
    if k % fmt.block_weights:
        raise ShapeError(f"{where}: in_features {k} is not a multiple of {fmt.name}'s block of {fmt.block_weights} "
                         f"weights (GGML rows are whole blocks)")
    if fmt.nbytes(n, k) > MAX_BYTES:
        raise LimitError(f"{where}: a {fmt.name} matrix of shape {shape} is {fmt.nbytes(n, k)} bytes; the kernels "
                         f"address at most {MAX_BYTES}")
    return n, k


def _blocks_spec(blocks) -> tuple[tuple, str] | None:
    """(shape, wgraph dtype) of a numpy array, Tensor or graph Value; None for anything else."""
    if isinstance(blocks, np.ndarray):
        return blocks.shape, ("u32" if blocks.dtype == np.uint32 else str(blocks.dtype))
    shape, dtype = getattr(blocks, "shape", None), getattr(blocks, "dtype", None)
    if isinstance(shape, tuple) and isinstance(dtype, str):
        return shape, dtype
    return None


# GPU tensors whose grid table was read back and matched (or that upload made from checked host words), with the
# format: a decoder's prefill makes its weights over the same program states each time, one check each
_TABLE_CHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _table_missing(blocks: Any, first: int, fmt: BlockFormat) -> bool:
    """Whether words first .. of host blocks or of a GPU tensor (read back by a copy of that range) differ from
    `fmt`'s grid table; False for a graph value (its data is the program's) and for a tensor already checked.
    RecordingError inside an open recording, which cannot read a tensor back before it submits."""
    table = format_table(fmt.name)
    if isinstance(blocks, np.ndarray):
        return not np.array_equal(blocks[first:first + table.size], table)
    from wgraph.tensor import Tensor

    if not isinstance(blocks, Tensor) or _TABLE_CHECKED.get(blocks) == fmt.name:
        return False
    from wgraph.errors import RecordingError
    from wgraph.scheduler.dispatch import Copy

    dev = blocks.device
    if dev.scheduler.recording is not None:
        raise RecordingError("QuantizedWeight: a grid format's blocks tensor is checked for its grid table by a "
                             "readback, which an open recording cannot make; make the weight before the recording")
    tail = dev.empty((table.size,), "u32", label="grid table check")
    dev.run([Copy(blocks, tail, 4 * table.size, src_offset=4 * first, label="grid table check")])
    if not np.array_equal(tail.numpy(), table):
        return True
    _TABLE_CHECKED[blocks] = fmt.name
    return False


@attrs.frozen(eq=False)
class QuantizedWeight:
    """A weight matrix [out_features, in_features] as GGML blocks: `blocks` is a u32 array of
    `BlockFormat.words` words holding the raw bytes: numpy (host; the caller's array, not a copy), a Tensor (GPU)
    or a graph Value. A grid format's words end with its table (checked for host words and, by a readback, for a
    tensor: docs/quantized.md).

    ggml_type: the block format (a name of FORMATS: "Q8_0", "Q4_K", "IQ4_XS", ...).
    shape: (out_features, in_features); in_features a multiple of the format's block size."""

    ggml_type: str
    shape: tuple[int, int]
    blocks: Any = attrs.field(repr=False)

    def __attrs_post_init__(self):
        fmt = block_format(self.ggml_type, "QuantizedWeight")
        n, k = check_matrix(fmt, self.shape, "QuantizedWeight")
        # the checked plain ints: a numpy shape (np.int16(200), np.int16(256)) passed the checks, and the byte
        # counts later computed from it wrapped (raw() and upload raised numpy's reshape ValueError)
        object.__setattr__(self, "shape", (n, k))
        object.__setattr__(self, "ggml_type", fmt.name)   # np.str_("Q8_0") as the plain str params hold (args.choice)
        spec = _blocks_spec(self.blocks)
        if spec is None:
            raise DtypeError(f"QuantizedWeight: blocks must be a numpy uint32 array, a u32 Tensor or a graph value, "
                             f"got {type(self.blocks).__name__}")
        words = fmt.words(n, k)
        if spec[1] != "u32":   # a wrong dtype is a DtypeError (docs/errors.md), whatever the shape
            endian = " (big-endian)" if isinstance(self.blocks, np.ndarray) and self.blocks.dtype.byteorder == ">" \
                else ""
            raise DtypeError(f"QuantizedWeight: blocks must be u32 words (a native little-endian uint32 numpy "
                             f"array, a u32 Tensor or a graph value) holding the {self.ggml_type} bytes, got "
                             f"{spec[1]}{endian}; make host blocks with QuantizedWeight.from_bytes (or quantize)")
        if spec[0] != (words,):
            raise ShapeError(f"QuantizedWeight: a {self.ggml_type} {list(self.shape)} matrix is {fmt.nbytes(n, k)} "
                             f"bytes, held as u32 [{words}]; blocks is {spec[1]} {list(spec[0])}")
        # the words of a grid format end with the format's table, which the kernels read: zeros there gave zeros
        # (linear and embedding_q, no error). Host words are compared here, a GPU tensor's by a readback of its
        # table (16 KB at most; a tensor made from raw bytes padded as the other formats are lacked it); a graph
        # value's data is the program's (a state's init of host words that passed here)
        if fmt.table_words and _table_missing(self.blocks, fmt.table_at(n, k), fmt):
            raise ShapeError(f"QuantizedWeight: the last {fmt.table_words} words of {self.ggml_type} blocks hold "
                             f"the format's grid table, and these do not; make weights with "
                             f"QuantizedWeight.from_bytes (or quantize), which appends it, and .upload(device)")

    @property
    def format(self) -> BlockFormat:
        return FORMATS[self.ggml_type]

    @property
    def out_features(self) -> int:
        return self.shape[0]

    @property
    def in_features(self) -> int:
        return self.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes of the raw blocks: what a GEMV over this weight reads."""
        return self.format.nbytes(*self.shape)

    @property
    def row_bytes(self) -> int:
        return self.format.row_bytes(self.in_features)

    @classmethod
    def from_bytes(cls, ggml_type: str, shape: tuple[int, int], raw: bytes | memoryview | np.ndarray) -> QuantizedWeight:
        """A host weight from the raw blocks (bytes, a memoryview or a uint8 array of exactly the matrix's bytes,
        as a GGUF file stores them).

        ggml_type: the block format (a name of FORMATS: "Q8_0", "Q4_K", "IQ4_XS", ...).
        shape: (out_features, in_features).
        raw: the blocks' bytes, read in C order whatever the array's shape (gguf's reader gives [out_features,
            row_bytes]; a transposed view's C order is other bytes).
        """
        fmt = block_format(ggml_type, "QuantizedWeight.from_bytes")
        n, k = check_matrix(fmt, shape, "QuantizedWeight.from_bytes")
        if isinstance(raw, np.ndarray):
            if raw.dtype != np.uint8:
                raise DtypeError(f"QuantizedWeight.from_bytes: raw blocks must be uint8, got {raw.dtype}")
            data = np.ascontiguousarray(raw).reshape(-1)
        elif isinstance(raw, (bytes, bytearray, memoryview)):
            # np.frombuffer refuses a strided memoryview (BufferError); its bytes in order are the blocks
            data = np.frombuffer(raw.tobytes() if isinstance(raw, memoryview) and not raw.c_contiguous else raw,
                                 np.uint8)
        else:
            raise DtypeError(f"QuantizedWeight.from_bytes: raw must be bytes, a memoryview or a uint8 array, got "
                             f"{type(raw).__name__}")
        want = fmt.nbytes(n, k)
        if data.size != want:
            raise ShapeError(f"QuantizedWeight.from_bytes: a {ggml_type} {[n, k]} matrix is {want} bytes "
                             f"({n} rows of {k // fmt.block_weights} blocks of {fmt.block_bytes}), got {data.size}")
        padded = np.zeros(fmt.words(n, k) * 4, np.uint8)
        padded[:want] = data
        words = padded.view(np.uint32)
        words[fmt.table_at(n, k):] = format_table(fmt.name)
        return cls(ggml_type, (n, k), words)

    def raw(self) -> np.ndarray:
        """The raw blocks as uint8 [out_features, row_bytes] (a host weight only)."""
        if not isinstance(self.blocks, np.ndarray):
            raise DtypeError(f"QuantizedWeight.raw: the blocks are a {type(self.blocks).__name__}, not host data "
                             f"(read a Tensor back with .numpy())")
        # a strided view of words (blocks[::2]) passes the checks; viewing it as bytes needs contiguous words
        return np.ascontiguousarray(self.blocks).view(np.uint8)[:self.nbytes].reshape(self.out_features,
                                                                                     self.row_bytes)

    def dequantize(self) -> np.ndarray:
        """float32 [out_features, in_features] as GGML defines the blocks (the `gguf` package's dequantizer)."""
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize

        return dequantize(self.raw(), GGMLQuantizationType[self.ggml_type]).astype(np.float32)

    def upload(self, device: Device, label: str = "") -> QuantizedWeight:
        """The same weight with its blocks in a new u32 GPU tensor.

        device: the Device.
        label: the tensor's name.
        """
        from wgraph.device import Device

        if not isinstance(device, Device):
            raise args.fail("QuantizedWeight.upload", "device", device, "a wgraph Device")
        label = args.text("QuantizedWeight.upload", "label", label)
        self.raw()  # host data only
        blocks = device.tensor(self.blocks, "u32", label=label or f"{self.ggml_type} blocks")
        if self.format.table_words:
            _TABLE_CHECKED[blocks] = self.ggml_type   # copied from host words this weight checked
        return attrs.evolve(self, blocks=blocks)

    def with_blocks(self, blocks: Any) -> QuantizedWeight:
        """The same format and shape over other blocks (a program's state tensor, a graph value).

        blocks: u32 blocks of the same words (numpy, a Tensor or a graph Value).
        """
        return attrs.evolve(self, blocks=blocks)


def stack_rows(weights: Sequence[QuantizedWeight]) -> QuantizedWeight:
    """Host weights of one format and in_features stacked along out_features (rows are whole blocks, so the
    raw bytes concatenate).

    weights: host QuantizedWeights of one format and in_features.
    """
    if not isinstance(weights, (list, tuple)) or not weights:
        raise args.fail("stack_rows", "weights", weights, "a non-empty list of QuantizedWeights")
    first = weights[0]
    for w in weights:
        if not isinstance(w, QuantizedWeight):
            raise DtypeError(f"stack_rows: expected QuantizedWeights, got {type(w).__name__}")
        if (w.ggml_type, w.in_features) != (first.ggml_type, first.in_features):
            raise ShapeError(f"stack_rows: {w.ggml_type} {list(w.shape)} does not stack under {first.ggml_type} "
                             f"{list(first.shape)} (same format and in_features needed)")
    raw = np.concatenate([w.raw() for w in weights], axis=0)
    return QuantizedWeight.from_bytes(first.ggml_type, (raw.shape[0], first.in_features), raw)


def quantize(weights: np.ndarray, ggml_type: str) -> QuantizedWeight:
    """A float32 [out_features, in_features] matrix as a host QuantizedWeight: Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 by
    the `gguf` package's quantizer (llama.cpp's reference rounding); the others by `wgraph.ggml_quantizers`: the
    K-quants and IQ4s by `quantize_q2_k` .. `quantize_q6_k`, `quantize_iq4_nl` and `quantize_iq4_xs`, the IQ1 / IQ2
    / IQ3 grid formats by `quantize_iq2_xxs`, `_iq2_xs`, `_iq2_s`, `_iq3_xxs`, `_iq3_s`, `_iq1_s` and `_iq1_m` (gguf
    has no quantizer for them).

    weights: float32 [out_features, in_features] (in_features a multiple of the block size).
    ggml_type: a name of FORMATS ("Q8_0", "Q4_K", "IQ4_XS", ...).
    """
    fmt = block_format(ggml_type, "quantize")
    a = host_view(weights, "quantize")   # a ragged list was numpy's raw 'inhomogeneous shape' ValueError
    if a.dtype != np.float32:
        raise DtypeError(f"quantize: weights must be float32, got {a.dtype}")
    shape = tuple(int(d) for d in a.shape)
    if len(shape) != 2:
        raise ShapeError(f"quantize: weights must be [out_features, in_features], got shape {shape}")
    if min(shape) < 1:   # check_matrix's "shape=" names no argument of quantize
        raise ShapeError(f"quantize: weights must be [out_features, in_features] with both >= 1, got shape {shape}")
    check_matrix(fmt, shape, "quantize")
    bad = np.argwhere(~np.isfinite(a))
    if bad.size:
        r, c = (int(i) for i in bad[0])
        raise ArgumentError(f"quantize: weights[{r}, {c}] is {a[r, c]} ({len(bad)} values not finite); {fmt.name} "
                            f"blocks hold finite weights only")
    with np.errstate(over="ignore", invalid="ignore"):   # a scale past f16's range: refused below
        if fmt.name in QUANTIZERS:
            raw = QUANTIZERS[fmt.name](a)
        else:
            from gguf import GGMLQuantizationType
            from gguf.quants import quantize as gguf_quantize

            raw = gguf_quantize(np.ascontiguousarray(a), GGMLQuantizationType[fmt.name])
    blocks = raw.reshape(-1, fmt.block_bytes)
    if fmt.name == "IQ1_M":   # d is the top nibbles of the 4 scale words
        words = blocks[:, 48:56].copy().view("<u2").astype(np.uint16)
        halves = ((words >> 12) << (4 * np.arange(4, dtype=np.uint16))).sum(axis=1, dtype=np.uint16)[:, None]
    else:                     # d (and m or dmin) where BlockFormat says
        halves = blocks[:, fmt.halves_at:fmt.halves_at + 2 * fmt.halves].copy().view("<u2")
    over = np.flatnonzero(~np.isfinite(halves.view(np.float16)).all(axis=1))
    if over.size:
        per_row = shape[1] // fmt.block_weights
        r, c = divmod(int(over[0]), per_row)
        c *= fmt.block_weights
        peak = float(np.abs(a[r, c:c + fmt.block_weights]).max())
        raise ArgumentError(f"quantize: weights[{r}, {c}:{c + fmt.block_weights}] reach |w| = {peak:.6g}, whose "
                            f"{fmt.name} block scale is past f16's largest, 65504 ({over.size} blocks); scale the "
                            f"weights down")
    return QuantizedWeight.from_bytes(fmt.name, shape, raw)


def format_table(ggml_type: str) -> np.ndarray:
    """The u32 words of a format's lookup table, which its GPU tensor holds after the blocks (BlockFormat.table_at):
    the IQ2 / IQ3 formats' grid, an entry's magnitudes as bytes (the IQ2s: 2 words an entry); empty for the rest."""
    if FORMATS[ggml_type].table_words == 0:
        return np.zeros(0, np.uint32)
    return np.ascontiguousarray(format_grid(ggml_type)).reshape(-1).view(np.uint32)  # int8 grids as their bytes
