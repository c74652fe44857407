"""The decoder of the Llama family, built only from wgraph's public ops and Graph: Llama, Qwen2/Qwen2.5, Qwen3,
Mistral and Gemma 2 are configurations of it (models/config.py reads their flags from config.json). One
function, `_layer`, is a layer of every architecture: RMSNorm, q/k/v projections (biases in the linear's
epilogue), per-head q/k norm, RoPE, KV append, attention (GQA, per-layer sliding window, score softcap,
scale), output projection (and norm), residual add, norm, gated MLP (SwiGLU or GeGLU; and norm), residual add.
Where the architecture allows, neighbours are fused (each fusion an option of a public op): the norm into the
GEMV after it, q, k and v into one GEMV with RoPE and the KV append in its epilogue (`linear_rope_kv_append`),
the residual add into o_proj's and down_proj's epilogue, SwiGLU into the gate/up GEMV: 6 dispatches a Llama
layer.

The decode step is ONE compiled Program: it embeds the token held in a GPU state buffer, runs every layer
(KV caches are program states, appended at a GPU position; attention reads a GPU kv_len), the final norm and
lm_head, picks the next id on the GPU and `decode_advance` feeds it back (token, history, position, kv_len).
So a step needs no host input: `generate` submits steps back to back, a bounded number in flight, and reads
the history only every `read_every` tokens (a long cache's first positions run a second program, planned for
fewer keys, on views of the same caches: models/decode_span.py). Prefill runs the same layers on Tensors in one recorded submit,
writing into the program's own KV caches, with the program's weights (docs/models.md).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import attrs
import numpy as np

import wgraph.ops as ops
from wgraph import args
from wgraph.device import Device
from wgraph.dtypes import BF16_BITS, as_f32, from_bf16, to_bf16
from wgraph.errors import CheckpointError, DtypeError, LimitError, ShapeError, UnsupportedError
from wgraph.ggml_blocks import QuantizedWeight
from wgraph.kernels.registry import kernel, select_variant
from wgraph.ops.dense import cos_sin_rows
from wgraph.graph import Graph
from wgraph.models.config import STEPS_PER_SUBMIT
from wgraph.models.checkpoint import Checkpoint
from wgraph.models.config import MAX_SEQ, DecoderConfig
from wgraph.models.decode_span import decode_steps, run_scheduled, run_steps_args, short_cache_rows
from wgraph.models.session import SessionLock
from wgraph.ops.sampling import SampleSettings, check_sampling, check_settings
from wgraph.progress import bar as progress_bar
from wgraph.tensor import Tensor

if TYPE_CHECKING:
    from wgraph.api_types import DTypeLike, Ids
    from wgraph.models.tokenizer import Tokenizer

DTYPES = ("f32", "f16", "bf16")
DEFAULT_MAX_SEQ = 2048

log = logging.getLogger(__name__)


def fused_qkv(cfg: DecoderConfig) -> bool:
    """Whether q, k and v are one GEMV with RoPE and the KV append in its epilogue (`linear_rope_kv_append`): not
    where q and k are normalised per head between the projection and RoPE (Qwen3), nor for rotary on part of the
    head or GPT-J pairs, which its RoPE (`rope_kv_append`'s) does not do."""
    return not cfg.qk_norm and cfg.rope_dim == cfg.head_dim and not cfg.rope_interleaved


def kv_cache_dtype(cfg: DecoderConfig, dtype: str) -> str:
    """The KV caches' dtype: f16 for an f16 model whose K/V rows `linear_rope_kv_append` writes (it rounds the f32
    projections into an f16 cache: half the bytes attention reads), else f32 (`kv_append` copies rows of the
    cache's own dtype, and the projections are f32)."""
    return "f16" if dtype == "f16" and fused_qkv(cfg) else "f32"


def _layer_tensors(cfg: DecoderConfig) -> dict[str, tuple[str, ...]]:
    """A layer's program weight name -> the HF tensors (under model.layers.N.) stacked into it along axis 0.
    gate and up are stacked: one linear, then the gated activation. `mlp_norm` is the norm before the MLP:
    post_attention_layernorm in Llama's naming, pre_feedforward_layernorm where norms sandwich each block
    (Gemma 2, whose post_attention_layernorm normalises the attention output)."""
    t = {"attn_norm": ("input_layernorm.weight",), "wo": ("self_attn.o_proj.weight",),
         "w_gate_up": ("mlp.gate_proj.weight", "mlp.up_proj.weight"), "w_down": ("mlp.down_proj.weight",)}
    if fused_qkv(cfg):
        t["w_qkv"] = ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight")
    else:
        t.update(wq=("self_attn.q_proj.weight",), wk=("self_attn.k_proj.weight",), wv=("self_attn.v_proj.weight",))
    if cfg.sandwich_norms:
        t.update(post_attn_norm=("post_attention_layernorm.weight",), mlp_norm=("pre_feedforward_layernorm.weight",),
                 post_mlp_norm=("post_feedforward_layernorm.weight",))
    else:
        t["mlp_norm"] = ("post_attention_layernorm.weight",)
    if cfg.qk_norm:
        t.update(q_norm=("self_attn.q_norm.weight",), k_norm=("self_attn.k_norm.weight",))
    if cfg.qkv_bias and fused_qkv(cfg):
        t["b_qkv"] = ("self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias")
    elif cfg.qkv_bias:
        t.update(bq=("self_attn.q_proj.bias",), bk=("self_attn.k_proj.bias",), bv=("self_attn.v_proj.bias",))
    if cfg.o_bias:
        t["bo"] = ("self_attn.o_proj.bias",)
    if cfg.mlp_bias:
        t.update(b_gate_up=("mlp.gate_proj.bias", "mlp.up_proj.bias"), b_down=("mlp.down_proj.bias",))
    return t


def tensors_read(cfg: DecoderConfig, dtype: str) -> dict[str, tuple[int, ...]]:
    """Hugging Face tensor name -> shape, for the tensors a model of `cfg` in `dtype` reads (a checkpoint's are
    checked against it before the model allocates: Checkpoint.check_shapes)."""
    shapes = weight_shapes(cfg)
    return {src: shapes[src] for pw in _program_weights(cfg, dtype).values() for src in pw.sources}


def weight_shapes(cfg: DecoderConfig) -> dict[str, tuple[int, ...]]:
    """Hugging Face tensor name -> shape, for every tensor the model reads."""
    h, i, v, d = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.head_dim
    q, kv = cfg.num_attention_heads * d, cfg.num_key_value_heads * d
    per_layer = {"self_attn.q_proj.weight": (q, h), "self_attn.k_proj.weight": (kv, h),
                 "self_attn.v_proj.weight": (kv, h), "self_attn.o_proj.weight": (h, q),
                 "mlp.gate_proj.weight": (i, h), "mlp.up_proj.weight": (i, h), "mlp.down_proj.weight": (h, i),
                 "self_attn.q_proj.bias": (q,), "self_attn.k_proj.bias": (kv,), "self_attn.v_proj.bias": (kv,),
                 "self_attn.o_proj.bias": (h,), "mlp.gate_proj.bias": (i,), "mlp.up_proj.bias": (i,),
                 "mlp.down_proj.bias": (h,), "self_attn.q_norm.weight": (d,), "self_attn.k_norm.weight": (d,)}
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for layer in range(cfg.num_hidden_layers):
        for sources in _layer_tensors(cfg).values():
            for src in sources:
                shapes[f"model.layers.{layer}.{src}"] = per_layer.get(src, (h,))  # the rest: norms over hidden
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (v, h)
    return shapes


@attrs.frozen
class ProgramWeight:
    """A weight state of the decode program: its shape, the dtype its values are rounded to (`values`: the model
    dtype for matrices, f32 for norms and biases) and the dtype it is stored in (`dtype`), the HF tensors stacked
    into it along axis 0, and what is added to every value on load (a norm's 1 of Gemma's (1 + w), in f32 as
    transformers adds it)."""

    shape: tuple[int, ...]
    dtype: str
    sources: tuple[str, ...]
    offset: float = 0.0
    values: str = "f32"


def linear_weight_storage(dtype: str) -> str:
    """How matrices of model dtype `dtype` are stored for `linear`: as they are, except bf16 where `linear` has
    no bf16 kernel yet: then they are widened to f32 on load (exactly: the same values, twice the bytes)."""
    if dtype != "bf16":
        return dtype
    try:
        select_variant("linear", weight_dtype="bf16")
    except DtypeError:
        return "f32"
    return "bf16"


def _program_weights(cfg: DecoderConfig, dtype: str) -> dict[str, ProgramWeight]:
    """Program state name -> ProgramWeight. Matrices take the model dtype (stored per linear_weight_storage; an
    untied embedding table only feeds `embedding`, which reads bf16 as it is); norms and biases stay f32
    (activations are f32)."""
    shapes = weight_shapes(cfg)
    matrices = linear_weight_storage(dtype)

    def weight(sources: tuple[str, ...], storage: str = matrices) -> ProgramWeight:
        first = shapes[sources[0]]
        shape = (sum(shapes[src][0] for src in sources),) + first[1:]  # stacked along axis 0 ([q; k; v]: GQA)
        if len(first) == 2:
            return ProgramWeight(shape, storage, sources, values=dtype)
        return ProgramWeight(shape, "f32", sources, cfg.norm_offset if sources[0].endswith("norm.weight") else 0.0)

    table = matrices if cfg.tie_word_embeddings else dtype  # a tied table is also the lm_head's matrix
    out = {"embed": weight(("model.embed_tokens.weight",), table), "norm": weight(("model.norm.weight",))}
    for layer in range(cfg.num_hidden_layers):
        for name, sources in _layer_tensors(cfg).items():
            out[f"l{layer}.{name}"] = weight(tuple(f"model.layers.{layer}.{s}" for s in sources))
    if not cfg.tie_word_embeddings:
        out["lm_head"] = weight(("lm_head.weight",))
    return out


class Llama:
    """A decoder of the Llama family (any architecture DecoderConfig reads) on one device. Build with
    `from_pretrained` (a Hugging Face directory) or `from_weights`.

    config: the DecoderConfig.
    device: the Device to run on.
    get_weight: a function (Hugging Face tensor name, shape) -> array that returns each weight once.
    dtype: the weights' storage (and the KV caches' for f16; activations and logits are f32): "f16" (needs
        shader-f16), "f32" or "bf16" (numpy's and torch's spellings too: np.float16, "float32", torch.bfloat16).
    max_seq: the KV cache's positions (prompt + new tokens), in [2, MAX_SEQ]; None: the config's
        max_position_embeddings, up to DEFAULT_MAX_SEQ.

    After construction: `program` is the decode step over the whole cache; `short_rows` the cache rows of the
    second program the steps at positions below it run (planned for that many keys; docs/models.md), None where
    attention would plan the same kernel (setting it to None turns that program off)."""

    def __init__(self, config: DecoderConfig, device: Device, get_weight: Callable[[str, tuple], Any], *,
                 dtype: DTypeLike = "f16", max_seq: int | None = None) -> None:
        if not isinstance(config, DecoderConfig):
            raise args.fail("Llama", "config", config, "a DecoderConfig (DecoderConfig.from_file, from_dict)")
        check_device("Llama", device, required=True)
        dtype, max_seq = check_options("Llama", dtype, max_seq)
        if not callable(get_weight):
            raise args.fail("Llama", "get_weight", get_weight, "a function (name, shape) -> array")
        if dtype == "f16" and not device.caps.has_f16:
            raise UnsupportedError(f"Llama: dtype 'f16' needs shader-f16, which {device.caps.adapter_name!r} lacks; "
                                   f"use dtype='f32'")
        self.config, self.device, self.dtype = config, device, dtype
        self.max_seq = max_seq if max_seq is not None else min(config.max_position_embeddings, DEFAULT_MAX_SEQ)
        if not 2 <= self.max_seq <= MAX_SEQ:
            raise LimitError(f"Llama: max_seq {self.max_seq} (the config's max_position_embeddings) must be in "
                             f"[2, {MAX_SEQ}]")
        self.weight_bytes = 0  # bytes of every weight the program holds
        self.weight_bytes_per_token = 0  # bytes a decode step reads: all but the embedding rows it skips
        self.sampling = False  # whether the decode programs draw with `sample` (else argmax)
        self._sample: SampleSettings | None = None
        t0 = time.perf_counter()
        graph, self._choose_node = self._build_decode(False, self.max_seq)
        self.program = graph.compile(device)  # the decode step over the whole KV cache: any position
        # a second program for the first positions, where its attention plans another kernel (decode_span.py)
        self.short_rows = short_cache_rows(graph, device.caps, self.max_seq)
        self._short = None  # compiled on first use (_short_program)
        self._short_choose = ""
        self._position: int | None = None  # the position the next decode step consumes (None: no prefill yet)
        # One generation at a time: the caches, pos and history are the model's (two threads' generate calls
        # interleaved their steps). `session` counts prefills: a paused text stream checks that none came since.
        self._lock = SessionLock(type(self).__name__)
        self.session = 0
        t1 = time.perf_counter()
        self._load(get_weight)
        log.info("%s: %d layers; decode program compiled in %.1f s (%d nodes), %.1f MiB of weights loaded in %.1f s",
                 type(self).__name__, config.num_hidden_layers, t1 - t0, len(graph), self.weight_bytes / 2**20,
                 time.perf_counter() - t1)
        self.last_stats: dict = {}

    # ---- construction ----

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str], device: Device | None = None, *, dtype: DTypeLike = "f16",
                        max_seq: int | None = None) -> Llama:
        """Load config.json and *.safetensors (sharded or not; F32/F16/BF16) from a Hugging Face directory.

        path: the directory.
        device: the Device to run on; None: the default device.
        dtype: the weights' storage (and the KV caches' for f16; activations and logits are f32): "f16" (needs
            shader-f16), "f32" or "bf16" (numpy's and torch's spellings too: np.float16, "float32", torch.bfloat16).
        max_seq: the KV cache's positions (prompt + new tokens), in [2, MAX_SEQ]; None: the config's
            max_position_embeddings, up to DEFAULT_MAX_SEQ.
        """
        from wgraph.device import default_device

        dtype_name, _ = check_options("Llama.from_pretrained", dtype, max_seq)   # before any file is read
        check_device("Llama.from_pretrained", device)
        if not isinstance(path, (str, os.PathLike)):
            raise args.fail("Llama.from_pretrained", "path", path, "a directory path (str or os.PathLike)")
        root = Path(path)
        config = DecoderConfig.from_file(root / "config.json")
        ckpt = Checkpoint(root)
        ckpt.check_shapes(tensors_read(config, dtype_name))
        model = cls(config, device or default_device(), ckpt.get, dtype=dtype, max_seq=max_seq)
        ckpt.check_all_read(config)
        return model

    @classmethod
    def from_weights(cls, config: DecoderConfig, weights: dict[str, np.ndarray], device: Device | None = None, *,
                     dtype: DTypeLike = "f16", max_seq: int | None = None) -> Llama:
        """A model from in-memory arrays named as in a Hugging Face checkpoint (shapes checked).

        config: the DecoderConfig.
        weights: {Hugging Face tensor name: array}.
        device: the Device to run on; None: the default device.
        dtype: the weights' storage (and the KV caches' for f16; activations and logits are f32): "f16" (needs
            shader-f16), "f32" or "bf16" (numpy's and torch's spellings too: np.float16, "float32", torch.bfloat16).
        max_seq: the KV cache's positions (prompt + new tokens), in [2, MAX_SEQ]; None: the config's
            max_position_embeddings, up to DEFAULT_MAX_SEQ.
        """
        from wgraph.device import default_device

        check_options("Llama.from_weights", dtype, max_seq)
        check_device("Llama.from_weights", device)
        if not isinstance(weights, dict):
            raise args.fail("Llama.from_weights", "weights", weights, "a dict of arrays by Hugging Face tensor name")
        if isinstance(config, DecoderConfig):   # else the constructor names it
            check_all_used("Llama.from_weights", config, weights)

        def get(name, shape):
            if name not in weights:
                raise CheckpointError(f"tensor {name!r} is missing")
            if isinstance(weights[name], QuantizedWeight):   # np.asarray made it a 0-d object array: "shape []"
                w = weights[name]
                raise CheckpointError(f"tensor {name!r} is a {w.ggml_type} QuantizedWeight {list(w.shape)}; Llama "
                                      f"takes float arrays: QuantizedLlama.from_weights computes on GGML blocks "
                                      f"(or dequantize_checkpoint(weights) gives their floats)")
            a = host_weight(name, weights[name])
            if a.shape != tuple(shape):
                raise CheckpointError(f"tensor {name!r} has shape {list(a.shape)}, the config needs {list(shape)}")
            return a

        return cls(config, device or default_device(), get, dtype=dtype, max_seq=max_seq)

    def _load(self, get_weight):
        """Read each HF tensor once (checked by name and shape), convert and write it into the program's state."""
        shapes = weight_shapes(self.config)
        weights = _program_weights(self.config, self.dtype)
        with progress_bar(len(weights), "loading weights", "tensors") as shown:
            for name, pw in weights.items():
                parts = [_convert(get_weight(src, shapes[src]), pw, src) for src in pw.sources]
                data = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
                self.device.write(self.program.state(name), data)
                self._count_weight_bytes(name, data.nbytes, data.nbytes // data.shape[0])
                shown.update()
        self._write_rope_tables()

    def _count_weight_bytes(self, name: str, nbytes: int, row_bytes: int) -> None:
        """State `name`'s `nbytes` into weight_bytes, and into weight_bytes_per_token what a decode step reads of
        it: all, but one row (`row_bytes`) of an untied embedding table."""
        self.weight_bytes += nbytes
        read_whole = name != "embed" or self.config.tie_word_embeddings  # a tied table is the lm_head too
        self.weight_bytes_per_token += nbytes if read_whole else row_bytes

    def _write_rope_tables(self) -> None:
        cos, sin = self.rope_tables()
        self.device.write(self.program.state("rope_cos"), cos)
        self.device.write(self.program.state("rope_sin"), sin)

    def rope_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """cos and sin [max_seq, rope_dim / 2] (f32) of the config's (possibly scaled) frequencies."""
        # in blocks of positions: the whole float64 angle, cos and sin arrays were ~3 GB at max_seq 2**20
        return cos_sin_rows(self.max_seq, self.config.inv_freq(), np.float32)

    # ---- the forward pass, on graph values (decode) or Tensors (prefill) alike ----

    def _forward(self, x, glob: dict, layers: list, caches: list, pos, kv_len, rows: int, scope):
        """Embedded states x [rows, H] -> the last layer's residual stream [rows, H] (the final norm is fused into
        the lm_head's GEMV: `_logits`). Works on graph values (decode) and Tensors (prefill) alike."""
        for i, (w, cache) in enumerate(zip(layers, caches)):
            with scope(f"layer{i}"):
                x = self._layer(i, x, w, cache, glob, pos, kv_len, rows)
        return x

    def _layer(self, i: int, x, w: dict, cache, glob: dict, pos, kv_len, rows: int):
        """Layer i on the residual stream x [rows, H] -> the stream after it. The config's architecture flags
        choose the variations; a weight absent from `w` (a bias) is None. Each norm before a projection is folded
        into that projection's GEMV (`linear(norm=)`); a residual add goes into the epilogue of the projection
        before it, unless a norm sits between them (Gemma 2's sandwich norms)."""
        c = self.config
        hq, hkv, d, eps = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rms_norm_eps
        if fused_qkv(c):
            # norm + [q; k; v] (+ biases) in one GEMV with RoPE of q and k and the K/V append in its epilogue
            q = self._qkv_rope_append(x, w, glob, cache, pos)
        else:
            h = ops.rmsnorm(x, w["attn_norm"], eps=eps)
            q = ops.reshape(self._linear(h, w["wq"], w.get("bq")), rows, hq, d)
            k = ops.reshape(self._linear(h, w["wk"], w.get("bk")), rows, hkv, d)
            v = ops.reshape(self._linear(h, w["wv"], w.get("bv")), rows, hkv, d)
            if c.qk_norm:
                q, k = ops.rmsnorm(q, w["q_norm"], eps=eps), ops.rmsnorm(k, w["k_norm"], eps=eps)
            rd, inter = c.rotary_dim, c.rope_interleaved
            q = ops.rope(q, glob["cos"], glob["sin"], pos=pos, rotary_dim=rd, interleaved=inter)
            k = ops.rope(k, glob["cos"], glob["sin"], pos=pos, rotary_dim=rd, interleaved=inter)
            ops.kv_append(cache, k, v, pos)
        o = ops.reshape(self._attend(i, q, cache, kv_len), rows, hq * d)
        if c.sandwich_norms:
            x = ops.add(x, ops.rmsnorm(self._linear(o, w["wo"], w.get("bo")), w["post_attn_norm"], eps=eps))
        else:
            x = self._linear(o, w["wo"], w.get("bo"), residual=x)
        # norm + gated MLP over stacked gate/up weights (SwiGLU in the GEMV's epilogue)
        if c.activation == "silu":
            act = self._linear(x, w["w_gate_up"], w.get("b_gate_up"), norm=w["mlp_norm"], eps=eps, activation="swiglu")
        else:
            act = self._gate(self._linear(x, w["w_gate_up"], w.get("b_gate_up"), norm=w["mlp_norm"], eps=eps))
        if c.sandwich_norms:
            return ops.add(x, ops.rmsnorm(self._linear(act, w["w_down"], w.get("b_down")), w["post_mlp_norm"], eps=eps))
        return self._linear(act, w["w_down"], w.get("b_down"), residual=x)

    # ---- where a layer meets its KV cache: the two hooks BatchedDecoder (models/batched.py) has its own of ----

    def _qkv_rope_append(self, x, w: dict, glob: dict, cache, pos):
        """q [rows, Hq, D] rotated, projected from the normed x by the stacked [Wq; Wk; Wv]; k (rotated) and v
        written into `cache` at `pos`: one dispatch for the decode step's rows (prefill: linear, rope_kv_append)."""
        c = self.config
        return ops.linear_rope_kv_append(x, w["w_qkv"], glob["cos"], glob["sin"], cache, pos,
                                         q_heads=c.num_attention_heads, b=w.get("b_qkv"), norm=w["attn_norm"],
                                         eps=c.rms_norm_eps)

    def _attend(self, i: int, q, cache, kv_len):
        """Layer i's attention of q [rows, Hq, D] over the cache's first kv_len rows."""
        c = self.config
        return ops.attention(q, cache[0], cache[1], causal=True, kv_len=kv_len, scale=c.attention_scale,
                             sliding_window=c.window(i), softcap=c.attn_softcap)

    def _gate(self, gate_up):
        """act(gate) * up over the stacked halves: SwiGLU or GeGLU."""
        act = self.config.activation
        if act == "silu":
            return ops.swiglu(gate_up)
        return ops.geglu(gate_up, approximate="tanh" if act == "gelu_tanh" else "none")

    def _embed(self, ids, table):
        """The embedding rows of `ids` as f32 (an f16 table's widened in the gather), times the config's scale."""
        x = ops.embedding(ids, table, dtype="f32")
        return x if self.config.embed_scale == 1.0 else ops.scale(x, self.config.embed_scale)

    def _linear(self, x, w, b=None, **options):
        """ops.linear for the model's matrices (QuantizedLlama adds its x_int8 option for its block matrices)."""
        return ops.linear(x, w, b, **options)

    def _logits(self, x, glob: dict):
        """The final RMSNorm and the lm_head (one fused GEMV), softcapped where the config says."""
        logits = self._linear(x, glob["lm_head"], norm=glob["norm"], eps=self.config.rms_norm_eps)
        return ops.softcap(logits, self.config.final_softcap) if self.config.final_softcap else logits

    def _weights(self, get) -> tuple[dict, list, list]:
        """(global weights, per-layer weight dicts, per-layer (k, v) caches) from `get(state name)`."""
        c = self.config
        glob = {"embed": get("embed"), "norm": get("norm"), "cos": get("rope_cos"), "sin": get("rope_sin")}
        glob["lm_head"] = get("embed") if c.tie_word_embeddings else get("lm_head")
        keys = tuple(_layer_tensors(c))
        layers = [{k: get(f"l{i}.{k}") for k in keys} for i in range(c.num_hidden_layers)]
        caches = [(get(f"l{i}.k_cache"), get(f"l{i}.v_cache")) for i in range(c.num_hidden_layers)]
        return glob, layers, caches

    _graph_name = "llama_decode"  # the decode programs' names (profiles, explain): + "_sample", + "_first<rows>"

    def _weight_specs(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """The decode program's weight states: name -> (shape, dtype)."""
        return {name: (pw.shape, pw.dtype) for name, pw in _program_weights(self.config, self.dtype).items()}

    def _cache_dtype(self) -> str:
        return kv_cache_dtype(self.config, self.dtype)

    def _build_decode(self, sampling: bool, cache_rows: int) -> tuple[Graph, str]:
        """The decode step's graph over KV caches of `cache_rows` positions (its attention planned for that many
        keys), and the name of its node that picks the next id."""
        c = self.config
        name = self._graph_name + ("_sample" if sampling else "")
        g = Graph(name if cache_rows == self.max_seq else f"{name}_first{cache_rows}")
        for wname, (shape, dtype) in self._weight_specs().items():
            g.state(wname, shape, dtype)  # zeros at compile; _load writes the checkpoint into it
        half = c.rope_dim // 2
        g.state("rope_cos", (self.max_seq, half), "f32")
        g.state("rope_sin", (self.max_seq, half), "f32")
        for i in range(c.num_hidden_layers):
            for kv in ("k", "v"):
                g.state(f"l{i}.{kv}_cache", (cache_rows, c.num_key_value_heads, c.head_dim), self._cache_dtype())
        token = g.state("token", (1,), "u32")
        history = g.state("history", (self.max_seq,), "u32")
        pos, kv_len = g.state("pos", (1,), "u32"), g.state("kv_len", (1,), "u32")
        glob, layers, caches = self._weights(lambda n: g.values[n])

        h = self._forward(self._embed(token, glob["embed"]), glob, layers, caches, pos, kv_len, 1, g.scope)
        logits = self._logits(h, glob)
        g.output("logits", logits)
        sample = SampleSettings(1.0, 0, 1.0, 0) if sampling else None  # the real values: Program.update
        nxt = self._choose(logits, pos, sample)
        ops.decode_advance(nxt, token=token, history=history, pos=pos, kv_len=kv_len)
        return g, g.producer[nxt.name]

    def _short_program(self):
        """The decode program for positions below `short_rows` (compiled on first use): its caches are the first
        short_rows rows of the whole-cache program's, every other state that program's own."""
        if self._short is None:
            graph, node = self._build_decode(self.sampling, self.short_rows)
            shared = {name: self.program.state(name) for name in graph.states}
            for i in range(self.config.num_hidden_layers):
                for kv in ("k", "v"):
                    name = f"l{i}.{kv}_cache"
                    shared[name] = self.program.state(name).prefix(self.short_rows)
            self._short = graph.compile(self.device, shared_states=shared)
            self._short_choose = node
            if self._sample is not None:
                self._apply_sample(self._short, node, self._sample)
        return self._short

    def _decode_programs(self, steps: int, fn: str) -> list[tuple[Any, int]]:
        """(program, steps) for the next `steps` decode steps, in order, and the position count moved past them:
        the short program while the position stays below short_rows, the whole cache's after it. LimitError
        (naming `fn`) where they would pass the cache; RecordingError before any prefill (the position is None
        only then), whose caches hold nothing to decode from."""
        programs, self._position = decode_steps(
            fn, self._position, steps, self.max_seq, self.short_rows, self._short_program, self.program,
            unprefilled="no prompt was prefilled on this model: its decode state (token, position, KV caches) holds "
                        "nothing to decode from; call prefill(prompt_ids) first")
        return programs

    def _choose(self, logits, pos, sample: SampleSettings | None):
        """The next id [1] u32 from logits [1, V]: argmax, or a draw keyed by (seed, position)."""
        if sample is None:
            return ops.argmax(logits)
        return ops.sample(logits, temperature=sample.temperature, top_k=sample.top_k, top_p=sample.top_p,
                          seed=sample.seed, step=pos)

    def _set_sampling(self, sample: SampleSettings | None) -> None:
        """Make the decode programs pick ids as `sample` says. Greedy and sampling are two programs (argmax or
        sample as their last op); switching compiles the other one on the weight states of the one before
        (`Graph.compile(shared_states=)`: the same buffers, nothing copied, whatever they hold: floats or GGML
        blocks), and drops the short program (compiled again on first use). New sampling values only rewrite the
        sample node's uniforms."""
        if (sample is not None) != self.sampling:
            old = self.program
            graph, node = self._build_decode(sample is not None, self.max_seq)
            keep = sorted(set(self._weight_specs()) | {"rope_cos", "rope_sin"})
            new = graph.compile(self.device, shared_states={n: old.state(n) for n in keep})
            self.program, self._choose_node, self.sampling = new, node, sample is not None
            self._short, self._position = None, None  # the new program's caches and position are its own
        self._sample = sample
        if sample is not None:
            self._apply_sample(self.program, self._choose_node, sample)
            if self._short is not None:
                self._apply_sample(self._short, self._short_choose, sample)

    @staticmethod
    def _apply_sample(program, node: str, sample: SampleSettings) -> None:
        params = program.graph.node(node).params
        program.update(node, attrs.evolve(params, temperature=sample.temperature, top_k=sample.top_k,
                                          top_p=sample.top_p, seed=sample.seed))

    # ---- running ----

    def _check_ids(self, ids, what: str, fn: str) -> np.ndarray:
        arr = args.ids(fn, what, ids)
        if arr.size == 0:
            raise ShapeError(f"{fn}: {what} is empty; give at least one token id")
        bad = arr[arr >= self.config.vocab_size]
        if bad.size:
            raise LimitError(f"{fn}: {what} holds token id {int(bad[0])}, outside the vocabulary "
                             f"[0, {self.config.vocab_size})")
        return arr.astype(np.uint32)

    def prefill(self, prompt_ids: Ids, *, all_logits: bool = False, sample: SampleSettings | None = None) -> Tensor:
        """Run the prompt through every layer in ONE recorded submit: fills the KV caches at positions
        0..S-1, picks the first new token on the GPU (argmax, or a draw with `sample`) and leaves the decode
        state ready for `step()`. Returns the logits of the last position [1, V], or of all [S, V] with all_logits.

        prompt_ids: the prompt's token ids (a list or numpy integer array, at least one, below the vocabulary size).
        all_logits: return the logits of every position instead of the last.
        sample: draw the first token with these settings (temperature > 0, top_k, top_p, seed: generate's rules,
            checked before anything changes); None: argmax.
        """
        ids = self._check_ids(prompt_ids, "prompt_ids", "prefill")
        args.flag("prefill", "all_logits", all_logits)
        if sample is not None:  # checked before the decode programs switch to sampling
            sample = check_settings("prefill", sample)
        s = ids.size
        if s >= self.max_seq:
            raise LimitError(f"prefill: {s} prompt tokens leave no room in the KV cache of {self.max_seq} positions")
        with self._lock("prefill"):
            return self._prefill(ids, all_logits, sample)

    def _prefill(self, ids: np.ndarray, all_logits: bool, sample: SampleSettings | None) -> Tensor:
        # no position counted until the recording is in: a prefill that fails after writing pos and history (a lost
        # device, an interrupt) leaves steps refused, not decoding from the new position over the old caches
        self._position = None
        self._set_sampling(sample)   # the steps after it pick as the first id did (a sampled run's mode stayed)
        self.session += 1
        s = ids.size
        prog, dev = self.program, self.device
        dev.write(prog.state("pos"), np.array([s - 1], np.uint32))  # decode_advance moves it to s
        history = np.zeros(prog.state("history").shape, np.uint32)   # the id at each position: the prompt's first
        history[:s] = ids
        dev.write(prog.state("history"), history)
        ids_t = dev.tensor(ids, "u32", label="prompt_ids")
        last_t = dev.tensor(np.array([s - 1], np.uint32), "u32", label="last_row")
        glob, layers, caches = self._weights(prog.state)
        with dev.record():
            h = self._forward(self._embed(ids_t, glob["embed"]), glob, layers, caches, 0, s, s,
                              lambda _name: contextlib.nullcontext())
            logits = self._logits(ops.embedding(last_t, h), glob)  # the last row only: a one-id gather
            ops.decode_advance(self._choose(logits, prog.state("pos"), sample), token=prog.state("token"),
                               history=prog.state("history"), pos=prog.state("pos"), kv_len=prog.state("kv_len"))
            if all_logits:
                logits = self._logits(h, glob)
        self._position = s
        return logits

    def step(self) -> Tensor:
        """One decode step (one submit, no host input): returns the program's logits output [1, V] for the
        token it consumed (overwritten by the next step). RecordingError before any prefill."""
        with self._lock("step"):
            (program, _), = self._decode_programs(1, "step")
            return program.run()["logits"]

    def generate(self, prompt_ids: Ids, max_new_tokens: int, *, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 0, stop_ids: Iterable[int] | np.ndarray = (), in_flight: int = 8,
                 read_every: int | None = None, progress: Callable[[int, float], None] | None = None) -> list[int]:
        """Up to `max_new_tokens` new ids after `prompt_ids`. One recorded submit for the prompt, then a submit
        per STEPS_PER_SUBMIT tokens (run_steps) with at most `in_flight` steps unfinished on the GPU; the ids are
        read back every
        `read_every` tokens (default: once, at the end). Generation stops at the first id in `stop_ids` found
        at a read; the stop id is returned, ids generated after it are dropped.
        temperature 0 is greedy (argmax; top_k, top_p and seed unused); otherwise each id is drawn on the GPU from
        softmax(logits / temperature) kept to top_k and top_p, keyed by (seed, position): the same seed and
        prompt give the same ids.

        prompt_ids: the prompt's token ids.
        max_new_tokens: the most new ids; 0 returns [] and runs nothing (the prompt is not prefilled: step() goes
            on from the previous prompt).
        temperature: a finite real >= 0; 0 is greedy.
        top_k: keep the k most likely ids (0: all).
        top_p: keep the fewest most likely ids whose probability reaches it, in (0, 1].
        seed: the draws' seed (a u64).
        stop_ids: ids that end generation (found at a read).
        in_flight: the most decode steps unfinished on the GPU at once.
        read_every: read the ids back every this many tokens; None: once, at the end.
        progress: None, or a function (tokens so far, seconds) called at every read. It runs inside the generation: a
            call from it into this model is refused (RecordingError).
        """
        fn = "generate"
        ids = self._check_ids(prompt_ids, "prompt_ids", fn)
        n = args.integer(fn, "max_new_tokens", max_new_tokens, 0, MAX_SEQ)
        temperature, top_k, top_p, seed = check_sampling(fn, temperature, top_k, top_p, seed)
        stops = set(args.ids(fn, "stop_ids", list(stop_ids) if isinstance(stop_ids, (set, frozenset, range))
                             else stop_ids, 0, self.config.vocab_size - 1).tolist())
        in_flight = args.integer(fn, "in_flight", in_flight, 1, MAX_SEQ)
        every = args.optional_integer(fn, "read_every", read_every, 1, MAX_SEQ)
        every = max(n, 1) if every is None else every
        if progress is not None and not callable(progress):
            raise args.fail(fn, "progress", progress, "None or a function (tokens, seconds)")
        if ids.size + n > self.max_seq:
            raise LimitError(f"generate: {ids.size} prompt + {n} new tokens exceed the KV cache of {self.max_seq} "
                             f"positions (max_seq): load the model with a larger max_seq= or ask for fewer new "
                             f"tokens")
        sample = None if temperature == 0 else SampleSettings(temperature, top_k, top_p, seed)
        if n == 0:
            self.last_stats = {"tokens": 0, "seconds": 0.0, "submits": 0, "readbacks": 0}
            return []
        with self._lock("generate"):
            return self._generate(ids, n, sample, stops, in_flight, every, progress)

    def _generate(self, ids, n: int, sample, stops: set, in_flight: int, every: int, progress) -> list[int]:
        s = ids.size
        t0 = time.perf_counter()
        before = self.device.stats.snapshot()
        self._prefill(ids, False, sample)
        prog = self.program
        made, out = 1, list[int]()  # prefill chose the first new id
        while True:
            if made == n or made % every == 0:
                new = prog.state("history").numpy()[s + len(out):s + made].tolist()
                hit = next((j for j, t in enumerate(new) if t in stops), None)
                out += new if hit is None else new[:hit + 1]
                if progress is not None:
                    with self._lock.callback():
                        progress(len(out), time.perf_counter() - t0)
                if hit is not None or made == n:
                    d = self.device.stats.since(before)
                    self.last_stats = {"tokens": len(out), "seconds": time.perf_counter() - t0,
                                       "submits": d.submits, "readbacks": d.readbacks}
                    return out
            k = min(every - made % every, n - made)
            self.run_steps(k, in_flight=in_flight)
            made += k

    def run_steps(self, n: int, *, in_flight: int = 8, per_submit: int = STEPS_PER_SUBMIT) -> float:
        """Submit `n` decode steps back to back, `per_submit` to a submit, waiting (without a readback) only
        when `in_flight` submitted steps are not yet finished on the GPU (Program.run_many). Steps at positions
        below `short_rows` run the program planned for that many keys, the rest `program`. Returns the host
        seconds spent encoding and submitting them. RecordingError before any prefill (n > 0).

        n: how many steps.
        in_flight: the most steps unfinished on the GPU at once (whole submits: at least one).
        per_submit: steps encoded into one submit: a submit's fixed cost is paid once for them.
        """
        n, in_flight, per_submit = run_steps_args("run_steps", n, in_flight, per_submit)
        with self._lock("run_steps"):
            return run_scheduled(self._decode_programs(n, "run_steps"), in_flight, per_submit)

    # ---- text in, text out (wgraph/models/text.py); from_pretrained attaches the files' tokenizer ----

    tokenizer: Tokenizer | None = None  # from_pretrained attaches the checkpoint's
    x_int8 = False  # whether block matrices' GEMVs round x to int8 (a QuantizedLlama's option)

    @property
    def block_formats(self) -> tuple[str, ...]:
        """The GGML block formats its weights are held in: none (QuantizedLlama's hold some)."""
        return ()

    @property
    def x_int8_gemvs(self) -> int:
        """The decode step's GEMVs that round x to int8 (a QuantizedLlama with x_int8: those the registry plans
        where the integer dots were measured faster; else none)."""
        return sum(1 for r in self.program.rows if r.op == "linear_q" and kernel(r.variant).facts.get("x_int8", False))

    def generate_text(self, prompt: str | list[dict[str, str]], max_new_tokens: int, **options: Any) -> str:
        """The text of up to `max_new_tokens` new tokens after `prompt` (a str; with chat=True a user message or a
        list of messages, rendered by the chat template). Options: chat, system, temperature, top_k, top_p, seed,
        stop_ids (default: the tokenizer's eos ids), read_every, in_flight, skip_special_tokens.

        prompt: the text (with chat=True a user message, or a list of {"role", "content"} messages).
        max_new_tokens: the most new tokens.
        options: the keywords above (wgraph/models/text.py checks each; an unknown one is an ArgumentError).
        """
        from wgraph.models.text import generate_text

        return generate_text(self, prompt, max_new_tokens, **options)

    def stream_text(self, prompt: str | list[dict[str, str]], max_new_tokens: int, **options: Any) -> Iterator[str]:
        """An iterator of text pieces as the ids are read back (every `read_every` tokens); options as generate_text.

        prompt: as generate_text's.
        max_new_tokens: the most new tokens.
        options: generate_text's keywords.
        """
        from wgraph.models.text import stream_text

        return stream_text(self, prompt, max_new_tokens, **options)


def check_options(fn: str, dtype, max_seq) -> tuple[str, int | None]:
    """(dtype, max_seq) of a model, by their rules (args.py); max_seq None: the config's, up to DEFAULT_MAX_SEQ."""
    return args.dtype_name(fn, "dtype", dtype, DTYPES), args.optional_integer(fn, "max_seq", max_seq, 2, MAX_SEQ)


def check_all_used(fn: str, config: DecoderConfig, weights: dict) -> None:
    """CheckpointError naming the model tensors (model.*, lm_head.*) of in-memory `weights` that a model of `config`
    does not read, as from_pretrained refuses a checkpoint's (Checkpoint.check_all_read): a layer past
    num_hidden_layers, a bias the config says it has not, a tied model's own lm_head.weight unless it equals the
    embedding (transformers computes the logits from it then). Rotary inv_freq buffers are passed over."""
    used = weight_shapes(config)
    unused = sorted(n for n in weights if isinstance(n, str) and n.startswith(("model.", "lm_head."))
                    and n not in used and not n.endswith("rotary_emb.inv_freq"))
    head, table = "lm_head.weight", "model.embed_tokens.weight"
    note = ""
    if config.tie_word_embeddings and head in unused:
        if _same_values(weights[head], weights.get(table)):
            unused.remove(head)
        else:
            note = f" (a tied model's {head} is taken only where it equals {table})"
    if unused:
        raise CheckpointError(f"{fn}: tensors {unused[:5]} ({len(unused)} in all) are not used by the "
                              f"{config.model_type} model the config describes{note}")


def host_weight(name: str, w) -> np.ndarray:
    """A weight from_weights is given (an array, a list) as a numpy array; CheckpointError naming the tensor where
    numpy cannot view it (a ragged list raised numpy's raw 'inhomogeneous shape' ValueError)."""
    try:
        return np.asarray(w)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"tensor {name!r} cannot be viewed as an array ({type(e).__name__}: {e})") from None


def _same_values(a, b) -> bool:
    """Whether two weights (float arrays, bf16 bit patterns or QuantizedWeights) hold the same values."""
    def values(w):
        if hasattr(w, "dequantize"):   # a QuantizedWeight
            return w.dequantize()
        w = np.asarray(w)
        return as_f32(w) if w.dtype == BF16_BITS else w
    if b is None:
        return False
    x, y = values(a), values(b)
    return x.shape == y.shape and bool(np.array_equal(x, y))


def check_device(fn: str, device, required: bool = False) -> None:
    """ArgumentError unless `device` is a wgraph Device (or None, the default device, where not `required`)."""
    if not isinstance(device, Device) and (required or device is not None):
        raise args.fail(fn, "device", device, "a wgraph Device" if required else
                        "None (the default device) or a wgraph Device")


def _convert(a: np.ndarray, pw: ProgramWeight, name: str) -> np.ndarray:
    """A checkpoint array (float, or bf16 bit patterns) as state `pw` holds it: its values rounded to pw.values
    (plus pw.offset, added in f32), stored as pw.dtype. Refuses values that f32, f16 or bf16 cannot hold (they
    would become inf: a float64 array from_weights is given may hold any)."""
    if a.dtype != BF16_BITS and a.dtype.kind != "f":
        raise CheckpointError(f"tensor {name!r} has dtype {a.dtype}; expected floating point")
    given = a  # the values as given: a float64 1e300 is inf once in f32, and the check below must see it finite
    if pw.offset:
        with np.errstate(over="ignore"):  # found and named below
            a = np.float32(pw.offset) + as_f32(a)
    if pw.values == "bf16":
        try:
            a = to_bf16(a, where=f"tensor {name!r}")
        except DtypeError as e:
            raise CheckpointError(f"{e}; load with dtype='f32'") from None
        return a if pw.dtype == "bf16" else from_bf16(a)
    want = np.float16 if pw.values == "f16" else np.float32
    if a.dtype == want and given.dtype == want:
        return np.ascontiguousarray(a)
    with np.errstate(over="ignore"):  # the overflow is found and named just below (numpy warned 'overflow in cast')
        out = as_f32(a).astype(want)
    # value by value: a whole-tensor test passed a tensor holding an inf or NaN anywhere, its 1e5 becoming inf silently
    given = as_f32(given) if given.dtype == BF16_BITS else given
    bad = np.isinf(out) & np.isfinite(given)
    if bad.any():
        limit, hint = ("65504", "; load with dtype='f32'") if want == np.float16 else \
            (str(np.finfo(np.float32).max), ": the model computes in f32")
        raise CheckpointError(f"tensor {name!r} has values beyond the {pw.values} range (|x| > {limit}), as "
                              f"{given[bad].flat[0].item()!r}{hint}")
    return out


