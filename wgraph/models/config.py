"""`DecoderConfig`: what a decoder of the Llama family computes, read from a Hugging Face `config.json` so that
it cannot be silently wrong. Every key that changes the math is read and checked (exact types: an integer is a
JSON integer, a number is finite, a flag is true or false; never a numeric string); every other key must be
on the list of keys known not to change inference (models/config_keys.py), or the config is refused with a
CheckpointError naming it. The architecture comes from `model_type` and `architectures`
(models/architectures.py); RoPE settings from either config format (models/rope.py)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from wgraph import args
from wgraph.errors import CheckpointError
from wgraph.models.architectures import ACTIVATIONS, ARCHITECTURES, BY_CLASS, COMMON_KEYS, Architecture
from wgraph.models import config_values as check
from wgraph.models.config_keys import harmless
from wgraph.models.config_values import shown
from wgraph.models.files import read_json
from wgraph.models.rope import LinearRopeScaling, RopeScaling, RopeSettings, check_scaling, inv_freq, read_rope

MAX_DIM = 1 << 20            # any one size (hidden, intermediate, heads x head_dim); a bound against absurd files
MAX_VOCAB = 1 << 22
MAX_LAYERS = 1024
MAX_POSITIONS = 1 << 24
MAX_SEQ = 1 << 20            # the most positions a model's KV cache and RoPE tables are made for (max_seq)
# Decode steps encoded into one submit (run_steps, generate): on the H200 the 1B model's host time per token
# went from 0.672 to 0.543 ms at 4 (benchmarks/results/h200-model-submit.log), the GPU time unchanged.
STEPS_PER_SUBMIT = 4


def submits_in_flight(steps: int, per_submit: int) -> int:
    """The in-flight window, in submits, that keeps at most `steps` decode steps unfinished (at least one)."""
    return max(1, steps // per_submit)
MAX_CONFIG_BYTES = 1 << 20   # config.json is a few KB; refuse to parse megabytes
ACTIVATION_NAMES = ("silu", "gelu", "gelu_tanh")


@attrs.frozen
class DecoderConfig:
    """A decoder's sizes and architecture flags. The defaults are Llama's; `from_dict` reads a config.json."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: RopeScaling | LinearRopeScaling | None = None
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    model_type: str = "llama"
    rotary_dim: int | None = None       # RoPE on the first rotary_dim dims of each head (None: all of them)
    rope_interleaved: bool = False      # GPT-J pairs (2i, 2i + 1) instead of rotate-half pairs (i, i + rotary_dim/2)
    qkv_bias: bool = False              # q, k, v projections add a bias (Qwen2; attention_bias)
    o_bias: bool = False                # the output projection adds a bias (attention_bias)
    mlp_bias: bool = False              # gate, up and down projections add a bias (Llama's mlp_bias)
    qk_norm: bool = False               # RMSNorm over each head of q and k before RoPE (Qwen3)
    activation: str = "silu"            # the gate's activation: silu (SwiGLU), gelu or gelu_tanh (GeGLU)
    norm_offset: float = 0.0            # RMSNorm multiplies by (norm_offset + w): Gemma's 1 + w
    sandwich_norms: bool = False        # also normalise the attention and MLP outputs (Gemma 2)
    embed_scale: float = 1.0            # the embedding rows are multiplied by this (Gemma: sqrt(hidden_size))
    query_pre_attn_scalar: float | None = None  # attention scale = this ** -0.5 (None: head_dim ** -0.5)
    attn_softcap: float = 0.0           # scores -> c * tanh(scores / c) after scaling (0: off)
    final_softcap: float = 0.0          # logits -> c * tanh(logits / c) (0: off)
    layer_windows: tuple[int, ...] = attrs.field(default=(), converter=tuple)  # per layer: 0 for full attention,
                                        # w > 0 for a sliding window of w keys; () means full everywhere

    def __attrs_post_init__(self):
        # from_dict's bounds, for a DecoderConfig built in code: num_hidden_layers=-1 built a model of no layer (no
        # error), hidden_size=0 raised a bare ZeroDivisionError, vocab_size=True a bare TypeError
        for name, hi in (("vocab_size", MAX_VOCAB), ("hidden_size", MAX_DIM), ("intermediate_size", MAX_DIM),
                         ("num_hidden_layers", MAX_LAYERS), ("num_attention_heads", MAX_DIM),
                         ("num_key_value_heads", MAX_DIM), ("max_position_embeddings", MAX_POSITIONS)):
            v = getattr(self, name)
            if not (args.is_int(v) and 1 <= v <= hi):
                raise CheckpointError(f"DecoderConfig: {name}={v!r} must be an integer in [1, {hi}]")
            object.__setattr__(self, name, int(v))   # the plain int checked, not the numpy integer given
        # flags by args' rule: tie_word_embeddings="no" was truthy, so a model without lm_head.weight was tied
        for name in ("tie_word_embeddings", "rope_interleaved", "qkv_bias", "o_bias", "mlp_bias", "qk_norm",
                     "sandwich_norms"):
            object.__setattr__(self, name, args.flag("DecoderConfig", name, getattr(self, name), CheckpointError))
        # sizes by args' rule, kept plain: rotary_dim=4.0 passed (4.0 % 2 == 0) and reached Graph.state's shape
        for name in ("head_dim", "rotary_dim"):
            v = getattr(self, name)
            if args.is_int(v):
                object.__setattr__(self, name, int(v))
            elif v is not None or name == "head_dim":
                raise CheckpointError(f"DecoderConfig: {name}={v!r} must be an integer")
        heads, kv_heads = self.num_attention_heads, self.num_key_value_heads
        if kv_heads > heads or heads % kv_heads:
            raise CheckpointError(f"DecoderConfig: num_key_value_heads={kv_heads} must be an integer in [1, {heads}] "
                                  f"dividing num_attention_heads={heads}")
        if not args.is_int(self.head_dim) or self.head_dim < 2 or self.head_dim % 2 \
                or self.rotary_dim is not None and not (
                2 <= self.rotary_dim <= self.head_dim and self.rotary_dim % 2 == 0):
            raise CheckpointError(f"DecoderConfig: head_dim={self.head_dim} must be an even number >= 2 and "
                                  f"rotary_dim={self.rotary_dim} an even number in [2, head_dim]")
        # from_dict checks these by the config.json rules; a DecoderConfig built in code is checked here: a
        # rope_theta of 0, < 0 or NaN made NaN cos / sin tables (NaN logits, no error), a query_pre_attn_scalar of
        # 0 a ZeroDivisionError, a negative one a complex attention scale
        # numbers by args' rule (numbers.Real, never a bool), kept as plain floats: np.float32(1e-6) was refused
        # where np.float64 passed
        for name in ("rms_norm_eps", "norm_offset", "embed_scale", "query_pre_attn_scalar"):
            v = getattr(self, name)
            if v is not None and (not args.is_real(v) or not math.isfinite(v) or v <= 0 and name != "norm_offset"):
                raise CheckpointError(f"DecoderConfig: {name}={v!r} must be a finite number"
                                      + ("" if name == "norm_offset" else " > 0"))
            if v is not None:
                object.__setattr__(self, name, float(v))
        if not args.is_real(self.rope_theta) or not math.isfinite(self.rope_theta) or self.rope_theta <= 1:
            raise CheckpointError(f"DecoderConfig: rope_theta={self.rope_theta!r} must be a finite number > 1")
        object.__setattr__(self, "rope_theta", float(self.rope_theta))
        check_scaling("DecoderConfig", self.rope_scaling)
        with np.errstate(all="ignore"):
            inv = self.inv_freq()
            peak = float(np.max(inv, initial=0.0)) * (MAX_SEQ - 1)
        if not (np.isfinite(inv).all() and math.isfinite(peak)):
            raise CheckpointError(f"DecoderConfig: rope_scaling={self.rope_scaling!r} gives inverse frequencies "
                                  f"{inv.tolist()[:4]}...; the angles of {MAX_SEQ} positions must be finite")
        if args.plain_str(self.activation) not in ACTIVATION_NAMES:
            raise CheckpointError(f"DecoderConfig: activation {self.activation!r} is not one of {ACTIVATION_NAMES}")
        object.__setattr__(self, "activation", args.plain_str(self.activation))   # np.str_ as the plain str
        if self.layer_windows and (len(self.layer_windows) != self.num_hidden_layers
                                   or any(not args.is_int(w) or w < 0 for w in self.layer_windows)):
            raise CheckpointError(f"DecoderConfig: layer_windows {self.layer_windows} must hold one integer >= 0 "
                                  f"per layer ({self.num_hidden_layers})")
        object.__setattr__(self, "layer_windows", tuple(map(int, self.layer_windows)))

    @property
    def rope_dim(self) -> int:
        """How many dims of each head rotate."""
        return self.head_dim if self.rotary_dim is None else self.rotary_dim

    @property
    def attention_scale(self) -> float:
        """The factor q.k is multiplied by before the softmax: query_pre_attn_scalar (else head_dim) ** -0.5."""
        return (self.head_dim if self.query_pre_attn_scalar is None else self.query_pre_attn_scalar) ** -0.5

    def window(self, layer: int) -> int:
        """Layer `layer`'s sliding window in keys (0: full attention).

        layer: the layer index, in [0, num_hidden_layers).
        """
        layer = args.integer("DecoderConfig.window", "layer", layer, 0, self.num_hidden_layers - 1)
        return self.layer_windows[layer] if self.layer_windows else 0

    def inv_freq(self) -> np.ndarray:
        """RoPE inverse frequencies [rope_dim / 2] in float64 (models/rope.py)."""
        return inv_freq(self.rope_theta, self.rope_scaling, self.rope_dim)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DecoderConfig:
        """Check a parsed config.json; CheckpointError names the bad or unknown key.

        d: the parsed config.json (a dict).
        """
        if not isinstance(d, dict):
            raise CheckpointError(f"config.json must hold a JSON object, got {type(d).__name__}")
        arch = _architecture(d)
        fields = _Fields(d, arch)
        for key, value in d.items():
            if key not in COMMON_KEYS and key not in arch.keys and not harmless(key, value):
                raise CheckpointError(
                    f"config.json: key {key!r} (= {shown(value)}) is not known to wgraph for model_type "
                    f"{arch.model_type!r}; an unread key that changes the math would make a silently wrong model, so "
                    f"it is refused (keys known not to change inference: wgraph/models/config_keys.py)")
        return cls(**_read(fields, arch))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> DecoderConfig:
        """Read and check a config.json (see from_dict).

        path: the config.json file.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise args.fail("DecoderConfig.from_file", "path", path, "a path (str or os.PathLike)")
        return cls.from_dict(read_json(Path(path), MAX_CONFIG_BYTES))


LlamaConfig = DecoderConfig  # the name before other architectures loaded


def _architecture(d: dict) -> Architecture:
    """The architecture `model_type` names; `architectures`, when present, must name its causal LM class."""
    mt, classes = d.get("model_type"), d.get("architectures")
    if classes is not None:
        if not isinstance(classes, list) or len(classes) != 1 or not isinstance(classes[0], str):
            raise CheckpointError(f"config.json: architectures={shown(classes)} must be a list of one class name")
        if classes[0] not in BY_CLASS:
            raise CheckpointError(f"config.json: architectures names {classes[0]!r}; supported: {sorted(BY_CLASS)}")
        if mt is None:
            return BY_CLASS[classes[0]]
    if not isinstance(mt, str) or mt not in ARCHITECTURES:
        raise CheckpointError(f"config.json: model_type {shown(mt)} is not supported (supported: "
                              f"{sorted(ARCHITECTURES)})")
    arch = ARCHITECTURES[mt]
    if classes is not None and classes[0] != arch.causal_lm:
        raise CheckpointError(f"config.json: architectures names {classes[0]!r} but model_type {mt!r} is "
                              f"{arch.causal_lm!r}")
    return arch


class _Fields:
    """The values of a config dict, each checked by type and range; a key config.json omits takes the
    architecture's default (transformers' value), and a key without one is required."""

    def __init__(self, d: dict, arch: Architecture):
        self.d, self.arch = d, arch

    def has(self, key: str) -> bool:
        return self.get(key) is not None

    def get(self, key: str):
        if key in self.d:
            return self.d[key]
        return self.arch.defaults.get(key)

    def integer(self, key: str, lo: int, hi: int) -> int:
        v = self.get(key)
        if v is None:
            raise CheckpointError(f"config.json: required key {key!r} is missing (or null)")
        return check.integer(key, v, lo, hi)

    def optional_integer(self, key: str, lo: int, hi: int) -> int | None:
        """An integer, or None for a key omitted (without a default) or null."""
        v = self.get(key)
        return None if v is None else check.integer(key, v, lo, hi)

    def real(self, key: str) -> float:
        """A finite number that is a normal f32 (the model computes with it in f32: config_values.f32_normal)."""
        return check.f32_normal(key, self.get(key))

    def cap(self, key: str) -> float:
        """A softcap: a finite number that is a normal f32, or null (0.0: off)."""
        v = self.get(key)
        return 0.0 if v is None else check.f32_normal(key, v)

    def boolean(self, key: str, *, null_is_false: bool = False) -> bool:
        v = self.get(key)
        return False if v is None and null_is_false else check.boolean(key, v)

    def choice(self, key: str, choices) -> str:
        v = self.get(key)
        if not isinstance(v, str) or v not in choices:
            check.refuse(key, v, f"must be one of {sorted(choices)}")
        return v


def _read(f: _Fields, arch: Architecture) -> dict:
    """DecoderConfig's arguments from the checked fields of architecture `arch`."""
    for key in arch.no_null:
        if key in f.d and f.d[key] is None:
            default = arch.defaults.get(key)
            raise CheckpointError(f"config.json: {key}=null: transformers' {arch.causal_lm} sizes its attention with "
                                  f"it and fails; give a number or omit the key (then "
                                  f"{'hidden_size // num_attention_heads' if default is None else default})")
    hidden = f.integer("hidden_size", 1, MAX_DIM)
    heads = f.integer("num_attention_heads", 1, MAX_DIM)
    kv_heads = f.optional_integer("num_key_value_heads", 1, heads) or heads
    if heads % kv_heads:
        raise CheckpointError(f"config.json: num_attention_heads={heads} is not a multiple of "
                              f"num_key_value_heads={kv_heads}")
    head_dim = f.optional_integer("head_dim", 2, MAX_DIM)
    if head_dim is None:
        if hidden % heads:
            raise CheckpointError(f"config.json: without head_dim, hidden_size={hidden} must be a multiple of "
                                  f"num_attention_heads={heads}")
        head_dim = hidden // heads
    if head_dim % 2 or heads * head_dim > MAX_DIM:
        raise CheckpointError(f"config.json: head_dim={head_dim} must be even and heads x head_dim "
                              f"({heads * head_dim}) at most {MAX_DIM}")
    layers = f.integer("num_hidden_layers", 1, MAX_LAYERS)
    rope = read_rope(f.d)
    _check_rope_angles(rope, head_dim)
    act_name = f.choice(arch.activation_key, ACTIVATIONS)
    out = dict(
        vocab_size=f.integer("vocab_size", 1, MAX_VOCAB), hidden_size=hidden,
        intermediate_size=f.integer("intermediate_size", 1, MAX_DIM), num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
        rms_norm_eps=f.real("rms_norm_eps"), rope_theta=rope.theta, rope_scaling=rope.scaling,
        max_position_embeddings=f.optional_integer("max_position_embeddings", 1, MAX_POSITIONS) or 2048,
        tie_word_embeddings=f.boolean("tie_word_embeddings"), model_type=arch.model_type,
        activation=ACTIVATIONS[act_name],
        qk_norm=arch.qk_norm, layer_windows=_layer_windows(f, arch, layers),
    )
    if arch.qkv_bias is None:
        out["qkv_bias"] = out["o_bias"] = f.boolean("attention_bias")
    else:
        out["qkv_bias"] = arch.qkv_bias
    if "mlp_bias" in arch.keys:
        out["mlp_bias"] = f.boolean("mlp_bias")
    if arch.gemma_norms:
        if f.d.get("hidden_act") is not None and f.d["hidden_act"] != act_name:
            raise CheckpointError(f"config.json: hidden_act={shown(f.d['hidden_act'])} and hidden_activation="
                                  f"{act_name!r} disagree (transformers' Gemma 2 uses hidden_activation)")
        # gemma-2-9b's and 27b's config.json repeat the window as sliding_window_size, which transformers never
        # reads: accepted where it says what sliding_window says, refused where the two disagree
        size, window = f.d.get("sliding_window_size"), f.get("sliding_window")
        if size is not None and check.integer("sliding_window_size", size, 1, MAX_POSITIONS) != window:
            raise CheckpointError(f"config.json: sliding_window_size={shown(size)} and sliding_window={shown(window)} "
                                  f"disagree (transformers' Gemma 2 uses sliding_window)")
        if f.boolean("use_bidirectional_attention", null_is_false=True):
            raise CheckpointError("config.json: use_bidirectional_attention=true (non-causal attention) is not "
                                  "supported by the causal decoder")
        out.update(norm_offset=1.0, sandwich_norms=True, embed_scale=float(np.float32(math.sqrt(hidden))),
                   query_pre_attn_scalar=f.real("query_pre_attn_scalar"),
                   attn_softcap=f.cap("attn_logit_softcapping"), final_softcap=f.cap("final_logit_softcapping"))
    return out


def _check_rope_angles(rope: RopeSettings, rotary_dim: int) -> None:
    """CheckpointError unless every RoPE angle (position x inverse frequency) of every position a model may have
    (MAX_SEQ) is finite: a linear factor of 5e-324 made the frequencies inf, and the cos / sin tables NaN."""
    inv = inv_freq(rope.theta, rope.scaling, rotary_dim)
    peak = float(np.max(inv)) * (MAX_SEQ - 1)
    if not (np.isfinite(inv).all() and math.isfinite(peak)):
        scaling = {} if rope.scaling is None else attrs.asdict(rope.scaling)
        raise CheckpointError(f"config.json: RoPE scaling {scaling} (rope_theta={rope.theta!r}) gives inverse "
                              f"frequencies {inv.tolist()[:4]}...; the angles of {MAX_SEQ} positions must be finite")


def _layer_windows(f: _Fields, arch: Architecture, layers: int) -> tuple[int, ...]:
    """Each layer's sliding window (0: full), as transformers derives it for the architecture (its
    `sliding_layers` rule) unless layer_types lists the layers' kinds."""
    if arch.sliding_layers is None:
        return ()
    window = f.optional_integer("sliding_window", 1, MAX_POSITIONS)
    if arch.sliding_layers == "all":
        return (window,) * layers if window else ()
    if "use_sliding_window" in arch.keys and not f.boolean("use_sliding_window"):
        window = None  # transformers' Qwen config drops the window when use_sliding_window is false
    kinds = f.get("layer_types")
    if kinds is None:
        if arch.sliding_layers == "alternating":
            kinds = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
        else:
            first = f.integer("max_window_layers", 0, MAX_LAYERS)
            kinds = ["sliding_attention" if window and i >= first else "full_attention" for i in range(layers)]
    elif "max_window_layers" in arch.keys:
        f.integer("max_window_layers", 0, MAX_LAYERS)  # checked; transformers uses layer_types when given
    if not isinstance(kinds, list) or len(kinds) != layers \
            or any(k not in ("full_attention", "sliding_attention") for k in kinds):
        raise CheckpointError(f"config.json: layer_types={shown(kinds)} must list 'full_attention' or "
                              f"'sliding_attention' for each of the {layers} layers")
    if "sliding_attention" in kinds and not window:
        raise CheckpointError(f"config.json: layer_types has sliding_attention layers but no sliding window is "
                              f"set (sliding_window={shown(f.get('sliding_window'))}"
                              + (f", use_sliding_window={shown(f.get('use_sliding_window'))})"
                                 if "use_sliding_window" in arch.keys else ")"))
    windows = tuple((window or 0) if k == "sliding_attention" else 0 for k in kinds)
    return windows if any(windows) else ()
