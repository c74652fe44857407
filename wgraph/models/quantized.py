"""A Llama whose matrices are QuantizedWeights: the raw GGML blocks (wgraph/ggml_blocks.py) are the program's
state buffers, and `ops.linear` / `ops.embedding` read them directly (wgraph/ops/quantized.py). The decode
step is one Program per token, as `Llama`'s; matrices given as float arrays stay f32, norms are f32.

Until the decoder builder takes a weight's kind from the checkpoint, this module declares the program's
states itself: `_weight_states` is the one place that says which state holds blocks and which floats.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from wgraph import args
from wgraph.dtypes import as_f32
from wgraph.errors import CheckpointError, UnsupportedError
from wgraph.ggml_blocks import FORMATS, QuantizedWeight, block_format, quantize, stack_rows
from wgraph.models.config import LlamaConfig
from wgraph.models.file_types import FILE_TYPES, tensor_format
from wgraph.models.llama import (Llama, ProgramWeight, _convert, _program_weights, _same_values, host_weight,
                                 check_all_used, check_device, check_options, weight_shapes)
from wgraph.progress import bar as progress_bar

if TYPE_CHECKING:
    from wgraph.api_types import DTypeLike
    from wgraph.device import Device


@attrs.frozen
class WeightState:
    """One weight state of the program: its shape and dtype, the HF tensors stacked into it, and the block
    format when it holds a QuantizedWeight's blocks (then `matrix` is the logical [out, in] shape)."""

    shape: tuple[int, ...]
    dtype: str
    sources: tuple[str, ...]
    ggml_type: str | None = None
    matrix: tuple[int, int] | None = None
    float_state: ProgramWeight | None = None  # how a float state is converted on load (Llama's ProgramWeight)
    mixed: tuple[str, ...] = ()  # a float state stacked from blocks of these formats (and floats: "float")


def _role(name: str, output: str) -> str:
    """A matrix's role in llama.cpp's file-type rules (wgraph.models.file_types.ROLES) from its HF name."""
    if name == output:
        return "output"
    for part, role in ((".v_proj.", "attn_v"), (".down_proj.", "ffn_down"), (".o_proj.", "attn_output")):
        if part in name:
            return role
    return "other"


def checkpoint_formats(weights: dict, ggml_type: str) -> dict[str, str]:
    """{HF name: block format} for every matrix of HF-named Llama weights quantized as `ggml_type`: one format for
    all (a block format), or the mixture of one of llama.cpp's K-quant file types (file_types.FILE_TYPES:
    "Q4_K_M", "Q3_K_S", ...): e.g. Q4_K_M's output matrix (lm_head; a tied model's embed_tokens, and a copy of it
    as lm_head.weight equal to it) Q6_K, v_proj and down_proj Q6_K in the layers of llama.cpp's use_more_bits,
    every other matrix Q4_K; a matrix whose rows its format's block does not divide takes llama.cpp's fallback
    (Q4_K -> Q5_0, ...) or, where that does not divide them either, stays float (left out).

    weights: {Hugging Face tensor name: array}; the 2-D ones are the matrices.
    ggml_type: a block format of wgraph.ggml_blocks.FORMATS, or a file type of file_types.FILE_TYPES.
    """
    matrices = [name for name, a in weights.items() if np.ndim(a) == 2]
    if ggml_type not in FILE_TYPES:
        block_format(ggml_type, "checkpoint_formats")
        return dict.fromkeys(matrices, ggml_type)
    layer_of = {name: int(m.group(1)) for name in matrices if (m := re.match(r"model\.layers\.(\d+)\.", name))}
    layers = max(layer_of.values(), default=-1) + 1
    head, table = "lm_head.weight", "model.embed_tokens.weight"
    # a tied model's lm_head.weight beside its table (transformers' state_dict() holds both, the same tensor): the
    # table is the output (llama.cpp's Q6_K), and the copy takes its format, so that it still equals the table once
    # quantized (QuantizedLlama takes a tied model's lm_head only then); the copy had the output's Q6_K, the table Q4_K
    copy = head in weights and table in weights and _same_values(weights[head], weights[table])
    output = head if head in weights and not copy else table
    formats = {}
    for name in matrices:
        fmt = tensor_format(ggml_type, _role(name, output), layer_of.get(name, 0), layers, np.shape(weights[name])[1])
        if fmt is not None:
            formats[name] = fmt
    if copy and table in formats:
        formats[head] = formats[table]
    return formats


def quantize_checkpoint(weights: dict[str, np.ndarray], ggml_type: str) -> dict[str, np.ndarray | QuantizedWeight]:
    """HF-named float weights with every matrix (projections, embed_tokens, lm_head) quantized to `ggml_type`
    (wgraph.ggml_blocks.quantize), or to the formats of one of llama.cpp's K-quant file types ("Q4_K_M",
    "Q3_K_M", ...: `checkpoint_formats`); vectors (the norms) stay as they are. bf16 bit patterns (a bf16
    checkpoint's tensors, dtypes.BF16_BITS) are quantized from their values (np.asarray(a, np.float32) took the
    bits as numbers: 1.0, 0x3F80, was 16256.0)."""
    formats = checkpoint_formats(weights, ggml_type)
    return {name: quantize(as_f32(a), formats[name]) if name in formats else a
            for name, a in weights.items()}


def dequantize_checkpoint(weights: dict) -> dict[str, np.ndarray]:
    """The same weights with every QuantizedWeight dequantized to float32 (the float path's input)."""
    return {name: w.dequantize() if isinstance(w, QuantizedWeight) else w for name, w in weights.items()}


class QuantizedLlama(Llama):
    """A Llama over HF-named weights where any matrix may be a host QuantizedWeight (any format of
    wgraph.ggml_blocks.FORMATS; tensors stacked into one matrix of different formats are dequantized to f32:
    `mixed_stacks`);
    activations, KV caches and the other weights are f32. Greedy and sampled decoding, as Llama's (the sampling
    program shares the greedy one's weight states, blocks included).

    config: the DecoderConfig.
    device: the Device to run on.
    weights: {Hugging Face tensor name: float array or host QuantizedWeight}.
    max_seq: the KV cache's positions, in [2, MAX_SEQ]; None: the config's, up to DEFAULT_MAX_SEQ.
    x_int8: the block matrices' GEMVs may round x to int8 per 32 weights and sum by integer dots where that is the
        faster GEMV (`ops.linear`'s x_int8: Q4_0, Q4_1, Q5_K matrices of >= 8192 rows, the lm_head and gate+up;
        llama.cpp's GEMV rounds x likewise): those outputs move a little (docs/quantized.md). Off: x stays f32."""

    def __init__(self, config: LlamaConfig, device: Device, weights: dict[str, Any], *,
                 max_seq: int | None = None, x_int8: bool = False) -> None:
        if not isinstance(config, LlamaConfig):
            raise args.fail("QuantizedLlama", "config", config, "a DecoderConfig (DecoderConfig.from_dict, from_file)")
        if not isinstance(weights, dict):
            raise args.fail("QuantizedLlama", "weights", weights, "a dict of arrays and QuantizedWeights by Hugging "
                            "Face tensor name")
        check_device("QuantizedLlama", device, required=True)
        check_options("QuantizedLlama", "f32", max_seq)
        self.x_int8 = args.flag("QuantizedLlama", "x_int8", x_int8)
        check_all_used("QuantizedLlama", config, weights)   # as from_pretrained refuses a file's (GGUF loader too)
        self._host = weights
        self._states = _weight_states(config, weights)
        super().__init__(config, device, self._get, dtype="f32", max_seq=max_seq)

    @classmethod
    def from_weights(cls, config: LlamaConfig, weights: dict[str, Any], device: Device | None = None, *,
                     dtype: DTypeLike = "f32", max_seq: int | None = None, x_int8: bool = False) -> QuantizedLlama:
        """A model from HF-named weights: float arrays and host QuantizedWeights (their shapes checked).

        config: the DecoderConfig.
        weights: {Hugging Face tensor name: float array or host QuantizedWeight}.
        device: the Device to run on; None: the default device.
        dtype: "f32" (the only one: non-quantized weights and activations are f32).
        max_seq: the KV cache's positions, in [2, MAX_SEQ]; None: the config's, up to DEFAULT_MAX_SEQ.
        x_int8: round x to int8 for the block matrices' integer-dot GEMVs (as the constructor's).
        """
        from wgraph.device import default_device

        fn = "QuantizedLlama.from_weights"
        dtype, _ = check_options(fn, dtype, max_seq)
        check_device(fn, device)
        if dtype != "f32":
            raise UnsupportedError(f"QuantizedLlama: non-quantized weights and activations are f32, got dtype={dtype!r}")
        return cls(config, device or default_device(), weights, max_seq=max_seq, x_int8=x_int8)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str], device: Device | None = None, *, dtype: DTypeLike = "f16",
                        max_seq: int | None = None) -> QuantizedLlama:
        """Not supported: a GGUF file loads through wgraph.models.from_pretrained (UnsupportedError, after the
        arguments are checked as Llama.from_pretrained checks them).

        path, device, dtype, max_seq: as Llama.from_pretrained's (checked, then refused).
        """
        fn = "QuantizedLlama.from_pretrained"
        if not isinstance(path, (str, os.PathLike)):
            raise args.fail(fn, "path", path, "a path (str or os.PathLike)")
        check_options(fn, dtype, max_seq)
        check_device(fn, device)
        raise UnsupportedError("QuantizedLlama.from_pretrained: GGUF files load through wgraph.models' GGUF reader; "
                               "build from weights with QuantizedLlama.from_weights")

    @property
    def block_formats(self) -> tuple[str, ...]:
        """The GGML block formats its weight states hold, sorted (the other states are f32)."""
        return tuple(sorted({s.ggml_type for s in self._states.values() if s.ggml_type is not None}))

    @property
    def mixed_stacks(self) -> dict[str, tuple[str, ...]]:
        """{weight state: the formats of its tensors} for the states stacked from tensors of different formats,
        which are dequantized to f32 on load (one GEMV reads one format): in llama.cpp's Q4_K_M files, the
        layers whose v_proj is Q6_K and q_proj / k_proj Q4_K (their [q; k; v] state)."""
        return {name: s.mixed for name, s in self._states.items() if s.mixed}

    def _get(self, name: str, shape: tuple) -> Any:  # a float array or a QuantizedWeight
        if name not in self._host:
            raise CheckpointError(f"tensor {name!r} is missing")
        w = self._host[name]
        if not isinstance(w, QuantizedWeight):
            w = host_weight(name, w)
        have = w.shape
        if tuple(have) != tuple(shape):
            raise CheckpointError(f"tensor {name!r} has shape {list(have)}, the config needs {list(shape)}")
        return w

    _graph_name = "llama_decode_quantized"

    def _linear(self, x, w, b=None, **options):
        if isinstance(w, QuantizedWeight):
            options["x_int8"] = self.x_int8
        return super()._linear(x, w, b, **options)

    def _weight_specs(self) -> dict[str, tuple[tuple[int, ...], str]]:
        return {name: (spec.shape, spec.dtype) for name, spec in self._states.items()}

    def _cache_dtype(self) -> str:
        return "f32"  # the activations are f32 (docs/quantized.md)

    def _weights(self, get) -> tuple[dict, list, list]:
        """Llama's weight dicts with each block state seen as the QuantizedWeight it holds."""

        def wrap(name):
            spec = self._states[name]
            value = get(name)
            return value if spec.ggml_type is None else QuantizedWeight(spec.ggml_type, spec.matrix, value)

        glob, layers, caches = super()._weights(get)
        glob["embed"] = wrap("embed")
        glob["lm_head"] = glob["embed"] if self.config.tie_word_embeddings else wrap("lm_head")
        for i, layer in enumerate(layers):
            for key in layer:
                layer[key] = wrap(f"l{i}.{key}")
        return glob, layers, caches

    def _load(self, get_weight):
        """Each state from its HF tensors: blocks stacked by rows and written as they are, floats as f32.
        weight_bytes_per_token counts the bytes a step reads: every matrix's blocks (or floats) once, the
        norms, and one row of an untied embedding table."""
        shapes = weight_shapes(self.config)
        with progress_bar(len(self._states), "loading weights", "tensors") as shown:
            for name, spec in self._states.items():
                parts = [get_weight(src, shapes[src]) for src in spec.sources]
                if spec.ggml_type is not None:
                    w = parts[0] if len(parts) == 1 else stack_rows(parts)
                    data, nbytes, row = w.blocks, w.nbytes, w.row_bytes
                else:
                    parts = [_convert(p.dequantize() if isinstance(p, QuantizedWeight) else np.asarray(p),
                                      spec.float_state, src) for p, src in zip(parts, spec.sources)]
                    data = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
                    nbytes, row = data.nbytes, data.nbytes // data.shape[0]
                self.device.write(self.program.state(name), data)
                self._count_weight_bytes(name, nbytes, row)
                shown.update()
        self._write_rope_tables()


def _weight_states(cfg: LlamaConfig, weights: dict) -> dict[str, WeightState]:
    """Llama's weight states (`_program_weights`), each holding blocks when its HF tensors are QuantizedWeights
    of one format (gate and up stacked by rows), else f32: floats, or tensors of different formats stacked
    (dequantized on load; `mixed`)."""
    out = {}
    for name, pw in _program_weights(cfg, "f32").items():
        shape, sources = pw.shape, pw.sources
        given = [weights.get(src) for src in sources]
        for src, w in zip(sources, given):
            # written into the program's states from the host: a Tensor's blocks raised dev.write's DtypeError on
            # the state's name ('l0.w_down'), once the program had compiled
            if isinstance(w, QuantizedWeight) and not isinstance(w.blocks, np.ndarray):
                raise CheckpointError(f"tensor {src!r} is a {w.ggml_type} QuantizedWeight whose blocks are a "
                                      f"{type(w.blocks).__name__}, not host data; QuantizedLlama takes host blocks "
                                      f"(numpy: quantize, QuantizedWeight.from_bytes) and uploads them itself")
        kinds = {w.ggml_type if isinstance(w, QuantizedWeight) else None for w in given}
        kind = next(iter(kinds)) if len(kinds) == 1 else None
        if kind is None:
            mixed = tuple(sorted(k or "float" for k in kinds)) if len(kinds) > 1 else ()
            out[name] = WeightState(tuple(shape), "f32", tuple(sources), float_state=pw, mixed=mixed)
        elif len(shape) != 2:  # a norm or a bias: blocks hold matrices only (raised a bare unpacking ValueError)
            src, w = next((src, w) for src, w in zip(sources, given) if isinstance(w, QuantizedWeight))
            raise CheckpointError(f"tensor {src!r} is a {kind} QuantizedWeight of shape {list(w.shape)}; the config "
                                  f"needs a float array of shape {list(weight_shapes(cfg)[src])}")
        else:
            n, k = shape
            fmt = FORMATS[kind]
            out[name] = WeightState((fmt.words(n, k),), "u32", tuple(sources), kind, (n, k))
    return out
