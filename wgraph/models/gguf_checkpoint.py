"""A GGUF file as a Hugging Face checkpoint: its metadata as a config.json-style dict, its tensors by their
Hugging Face names, with llama.cpp's conversions undone as transformers' GGUF loader undoes them (Q/K rows of
`llama` files un-permuted, Gemma 2's norm weights minus one) and every tensor dequantized to float32.

Architectures: llama (Mistral files say llama too and run as llama: full attention, as llama.cpp runs them), qwen2,
qwen3, gemma2. What the metadata leaves out, llama.cpp's
defaults fill in (rope base 10000; Gemma 2's window 4096, sliding-window pattern 2 and softcaps 50 / 30), never a
guess of ours.
"""

from __future__ import annotations

import math
import re

import numpy as np

from wgraph import args
from wgraph.errors import CheckpointError
from wgraph.ggml_blocks import FORMATS, QuantizedWeight
from wgraph.models.config import MAX_DIM, MAX_LAYERS, MAX_VOCAB
from wgraph.models.gguf import FLOAT_TYPES, INTEGER_TYPES, GGUFFile, open_split, type_name

ARCHITECTURES = ("llama", "qwen2", "qwen3", "gemma2")
HF_CLASSES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
              "gemma2": "Gemma2ForCausalLM"}

# Hugging Face tensor name -> GGUF tensor name (checked against the gguf package's own map in the tests)
GLOBAL_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                "lm_head.weight": "output.weight"}
LAYER_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
               "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
               "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
# Gemma 2 has four norms per layer; llama.cpp names the one after attention differently
GEMMA2_LAYER_NAMES = {**LAYER_NAMES, "post_attention_layernorm": "post_attention_norm",
                      "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm"}
LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)")
ROPE_FREQS = "rope_freqs.weight"  # llama.cpp's per-frequency divisors for Llama 3 rope scaling
# Gemma 2 values llama.cpp uses where the file has no key (src/llama-hparams.h, src/llama-model.cpp)
GEMMA2_DEFAULTS = {"sliding_window": 4096, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}
GEMMA2_27B_LAYERS = 46  # llama.cpp scales queries by 1/sqrt(hidden / heads) for this size, else 1/sqrt(head_dim)


class GGUFCheckpoint:
    """`config` (a config.json-style dict) and `get(hf_name, shape)` -> float32 array for a GGUF model file."""

    def __init__(self, path):
        self.file = open_split(path)
        self.arch = _string(self.file, "general.architecture")
        if self.arch not in ARCHITECTURES:
            raise CheckpointError(f"GGUF file {self.file.path.name}: general.architecture {self.arch!r} is not "
                                  f"supported (supported: {list(ARCHITECTURES)})")
        self.config = _config(self.file, self.arch)
        self.read: set[str] = {ROPE_FREQS} if ROPE_FREQS in self.file.tensors else set()  # GGUF names consumed

    def gguf_name(self, hf_name: str) -> str | None:
        """The GGUF tensor name of a Hugging Face tensor name, or None when the architecture has no such tensor."""
        if hf_name in GLOBAL_NAMES:
            return GLOBAL_NAMES[hf_name]
        m = LAYER.fullmatch(hf_name)
        names = GEMMA2_LAYER_NAMES if self.arch == "gemma2" else LAYER_NAMES
        if m is None or m.group(2) not in names:
            return None
        return f"blk.{int(m.group(1))}.{names[m.group(2)]}.{m.group(3)}"

    def _tensor(self, hf_name: str, shape: tuple[int, ...]):
        """(GGUF name, GGUFTensor) of `hf_name`, checked to exist with `shape`."""
        name = self.gguf_name(hf_name)
        tensor = self.file.tensors.get(name) if name else None
        if tensor is None:
            raise CheckpointError(f"tensor {hf_name!r} ({name or 'no GGUF name'}) is missing from "
                                  f"{self.file.path.name}")
        if tensor.shape != tuple(shape):
            raise CheckpointError(f"tensor {hf_name!r} ({name}) in {self.file.path.name} has shape "
                                  f"{list(tensor.shape)}, the config needs {list(shape)}")
        return name, tensor

    def check_shapes(self, shapes: dict[str, tuple[int, ...]]) -> None:
        """CheckpointError unless every tensor of `shapes` (Hugging Face name -> shape) is in the file with that
        shape: from the header alone, before a model allocates anything for them (as Checkpoint.check_shapes).

        shapes: the tensors a model will read, by Hugging Face name.
        """
        if not isinstance(shapes, dict):
            raise args.fail("GGUFCheckpoint.check_shapes", "shapes", shapes, "a dict of tensor name -> shape")
        for name, shape in shapes.items():
            self._tensor(args.text("GGUFCheckpoint.check_shapes", "name", name),
                         args.shape("GGUFCheckpoint.check_shapes", "shape", shape))

    def get(self, hf_name: str, shape: tuple[int, ...]) -> np.ndarray:
        """Tensor `hf_name` as float32 of `shape`, converted back to Hugging Face's layout."""
        name, tensor = self._tensor(hf_name, shape)
        values = tensor.dequantized()
        if self.arch == "llama" and (".attn_q." in name or ".attn_k." in name):
            heads = self.config["num_attention_heads"] if ".attn_q." in name else self.config["num_key_value_heads"]
            values = unpermute_rows(values, heads)
        if self.arch == "gemma2" and name.endswith("norm.weight"):
            values = values - np.float32(1)  # llama.cpp stores Gemma's (1 + w) norm weights as 1 + w
        self.read.add(name)
        return values

    def get_blocks(self, hf_name: str, shape: tuple[int, ...]) -> np.ndarray | QuantizedWeight:
        """Tensor `hf_name` as `get` returns it, except a matrix in a block format wgraph computes on
        (ggml_blocks.FORMATS: Q8_0, Q4_K, IQ4_XS, ...), which stays its raw blocks, as a host QuantizedWeight (Q/K
        rows of a `llama` file un-permuted on the raw rows: no block spans two rows)."""
        name, tensor = self._tensor(hf_name, shape)
        if tensor.type_name not in FORMATS or len(shape) != 2:
            return self.get(hf_name, shape)
        rows = tensor.rows()
        if self.arch == "llama" and (".attn_q." in name or ".attn_k." in name):
            heads = self.config["num_attention_heads"] if ".attn_q." in name else self.config["num_key_value_heads"]
            rows = unpermute_rows(rows, heads)
        self.read.add(name)
        return QuantizedWeight.from_bytes(tensor.type_name, tuple(shape), np.ascontiguousarray(rows).reshape(-1))

    def hf_names(self) -> list[str]:
        """The Hugging Face names of the file's tensors (rope_freqs, which the config carries, left out)."""
        layers = int(self.config["num_hidden_layers"])
        names = GEMMA2_LAYER_NAMES if self.arch == "gemma2" else LAYER_NAMES
        candidates = list(GLOBAL_NAMES) + [f"model.layers.{i}.{hf}.{kind}" for i in range(layers) for hf in names
                                           for kind in ("weight", "bias")]
        return [hf for hf in candidates if self.gguf_name(hf) in self.file.tensors]

    def has_blocks(self) -> bool:
        """Whether any matrix of the file is in a block format wgraph computes on."""
        return any(t.type_name in FORMATS for t in self.file.tensors.values() if len(t.shape) == 2)

    def unused(self) -> list[str]:
        """GGUF tensors no `get` has read: after a model is built, any left means the config left them out."""
        return [n for n in self.file.tensors if n not in self.read]


def unpermute_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row order for `llama` files: its converter interleaves each head's two rotary halves
    (HF's rotate-half layout -> GGML's adjacent pairs); transformers' LlamaTensorProcessor reverses it like this.
    A permutation of rows only, so it applies as well to quantized blocks (`GGUFTensor.rows()`): no block spans
    two rows."""
    dim = w.shape[0] // heads // 2
    return w.reshape(heads, dim, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# ---- metadata -> config.json ----

def _string(f: GGUFFile, key: str) -> str:
    if key not in f.metadata:
        raise CheckpointError(f"GGUF file {f.path.name}: required metadata {key!r} is missing")
    if f.value_types[key] != (8,):
        raise CheckpointError(f"GGUF file {f.path.name}: metadata {key!r} must be a STRING, "
                              f"got {type_name(f.value_types[key][0])}")
    return f.metadata[key]


def _integer(f: GGUFFile, key: str, lo: int, hi: int, default: int | None = None) -> int:
    if key not in f.metadata:
        if default is None:
            raise CheckpointError(f"GGUF file {f.path.name}: required metadata {key!r} is missing")
        return default
    v, t = f.metadata[key], f.value_types[key]
    if t[0] not in INTEGER_TYPES:
        what = f"an array of {type_name(t[1])}" if len(t) > 1 else type_name(t[0])
        raise CheckpointError(f"GGUF file {f.path.name}: metadata {key!r} must be one integer, got {what}"
                              + (" (per-layer values are not supported)" if len(t) > 1 else ""))
    if not lo <= v <= hi:
        raise CheckpointError(f"GGUF file {f.path.name}: metadata {key}={v} must be in [{lo}, {hi}]")
    return v


def _number(f: GGUFFile, key: str, default: float | None, lo: float = 0.0) -> float:
    if key not in f.metadata:
        if default is None:
            raise CheckpointError(f"GGUF file {f.path.name}: required metadata {key!r} is missing")
        return default
    v, t = f.metadata[key], f.value_types[key]
    if t[0] not in FLOAT_TYPES | INTEGER_TYPES or not math.isfinite(v) or not v > lo:
        raise CheckpointError(f"GGUF file {f.path.name}: metadata {key}={v!r} must be a finite number > {lo}")
    return float(v)


# The `{arch}.*` metadata keys wgraph reads (or knows to change nothing): llama.cpp reads its architecture's keys into
# the model's math (attention.scale, logit_scale, embedding_scale, ... in the architectures that take them), so a key
# outside these sets is refused by name rather than loaded as if it were absent, as config.json's keys are
# (config_keys.py). general.*, tokenizer.*, quantize.* and split.* hold no math of the model.
_READ_KEYS = frozenset({
    "embedding_length", "block_count", "feed_forward_length", "context_length", "vocab_size", "expert_count",
    "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "attention.layer_norm_rms_epsilon", "attention.causal", "rope.dimension_count", "rope.freq_base",
    "rope.scaling.type", "rope.scaling.factor", "rope.scale_linear", "rope.scaling.attn_factor",
    "rope.scaling.original_context_length", "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow",
    # no math: the experts a token uses (expert_count must be 0, above), whether rope scaling was fine-tuned
    "expert_used_count", "rope.scaling.finetuned",
})
_ARCH_KEYS = {
    # Mistral files say llama and may carry a sliding window that llama.cpp's llama architecture never reads (nor
    # transformers' GGUF loader); Qwen2 / Qwen3 attend every key there too (use_sliding_window false, _config)
    "llama": frozenset({"attention.sliding_window"}),
    "qwen2": frozenset({"attention.sliding_window"}),
    "qwen3": frozenset({"attention.sliding_window"}),
    "gemma2": frozenset({"attention.sliding_window", "attention.sliding_window_pattern", "attn_logit_softcapping",
                         "final_logit_softcapping", "rope.freq_base_swa", "rope.dimension_count_swa",
                         "attention.key_length_swa", "attention.value_length_swa"}),
}


def _check_known_keys(f: GGUFFile, arch: str) -> None:
    """CheckpointError naming the first `{arch}.*` key that wgraph neither reads nor knows to be inert."""
    known = _READ_KEYS | _ARCH_KEYS[arch]
    for k in f.metadata:
        if k.startswith(f"{arch}.") and k[len(arch) + 1:] not in known:
            value = f.metadata[k]
            shown = repr(value) if isinstance(value, (int, float, str, bool)) else f"{type(value).__name__}"
            raise CheckpointError(f"GGUF file {f.path.name}: {k}={shown[:80]} is a key wgraph does not read for "
                                  f"{arch} (llama.cpp reads an architecture's keys into its math): refused rather "
                                  f"than loaded as if it were absent")


def _config(f: GGUFFile, arch: str) -> dict:
    """The config.json of the model the metadata describes (transformers 4's key names, rope at the top level)."""
    def key(name):
        return f"{arch}.{name}"

    _check_known_keys(f, arch)

    if _integer(f, key("expert_count"), 0, 1 << 16, default=0) != 0:
        raise CheckpointError(f"GGUF file {f.path.name}: {key('expert_count')}={f.metadata[key('expert_count')]!r}: "
                              f"mixture-of-experts models are not supported")
    if key("attention.causal") in f.metadata and f.metadata[key("attention.causal")] is not True:
        raise CheckpointError(f"GGUF file {f.path.name}: {key('attention.causal')}="
                              f"{f.metadata[key('attention.causal')]!r}: only causal (decoder) attention is supported")
    hidden = _integer(f, key("embedding_length"), 1, MAX_DIM)
    heads = _integer(f, key("attention.head_count"), 1, MAX_DIM)
    kv_heads = _integer(f, key("attention.head_count_kv"), 1, heads, default=heads)
    head_dim = _integer(f, key("attention.key_length"), 2, MAX_DIM, default=hidden // heads)
    value_dim = _integer(f, key("attention.value_length"), 2, MAX_DIM, default=head_dim)
    rope_dim = _integer(f, key("rope.dimension_count"), 2, MAX_DIM, default=head_dim)
    name = f.path.name
    if value_dim != head_dim:
        raise CheckpointError(f"GGUF file {name}: attention.value_length={value_dim} differs from key_length="
                              f"{head_dim}; not supported")
    if rope_dim != head_dim:
        raise CheckpointError(f"GGUF file {name}: rope.dimension_count={rope_dim} differs from the head dim "
                              f"{head_dim} (rotary on part of the head); not supported from GGUF")
    embd = f.tensors.get("token_embd.weight")
    if embd is None:
        raise CheckpointError(f"GGUF file {name}: tensor 'token_embd.weight' is missing")
    cfg = {
        "model_type": arch, "architectures": [HF_CLASSES[arch]],
        "vocab_size": _integer(f, key("vocab_size"), 1, MAX_VOCAB, default=embd.shape[0]),
        "hidden_size": hidden,
        "intermediate_size": _integer(f, key("feed_forward_length"), 1, MAX_DIM),
        "num_hidden_layers": _integer(f, key("block_count"), 1, MAX_LAYERS),
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "rms_norm_eps": _number(f, key("attention.layer_norm_rms_epsilon"), None),
        "rope_theta": _number(f, key("rope.freq_base"), 10000.0, lo=1.0),
        "max_position_embeddings": _integer(f, key("context_length"), 1, 1 << 24),
        "tie_word_embeddings": "output.weight" not in f.tensors,
    }
    scaling = _rope_scaling(f, arch, cfg)
    if scaling is not None:
        cfg["rope_scaling"] = scaling
    for ours, gguf_key in (("bos_token_id", "tokenizer.ggml.bos_token_id"), ("eos_token_id", "tokenizer.ggml.eos_token_id")):
        if gguf_key in f.metadata:
            cfg[ours] = _integer(f, gguf_key, 0, cfg["vocab_size"] - 1)
    has = {n.split(".", 2)[-1] for n in f.tensors if n.startswith("blk.")}  # e.g. "attn_q.bias"
    if arch == "llama":
        # Mistral files say llama too; llama.cpp's llama architecture reads no llama.attention.sliding_window (every
        # layer attends to every key), nor does transformers' GGUF loader: the key is not read here either
        cfg.update(hidden_act="silu", attention_bias="attn_q.bias" in has, mlp_bias="ffn_up.bias" in has)
    elif arch == "qwen2":
        if head_dim * heads != hidden:
            raise CheckpointError(f"GGUF file {name}: qwen2 needs head_dim x heads = hidden size, got "
                                  f"{head_dim} x {heads} != {hidden}")
        del cfg["head_dim"]  # Qwen2's config has no such key: hidden / heads
        cfg.update(hidden_act="silu", use_sliding_window=False, sliding_window=None)
    elif arch == "qwen3":
        cfg.update(hidden_act="silu", attention_bias="attn_q.bias" in has, use_sliding_window=False,
                   sliding_window=None)
    elif arch == "gemma2":
        if "output.weight" in f.tensors:  # Gemma 2 always ties its output to the embedding
            raise CheckpointError(f"GGUF file {name}: tensor 'output.weight' in a gemma2 file: llama.cpp's gemma2 "
                                  f"has no output tensor (its output is token_embd) and transformers does not load it")
        layers = cfg["num_hidden_layers"]
        # llama.cpp's gemma2 (src/models/gemma2.cpp): sliding layers by attention.sliding_window_pattern (default 2)
        # as llama_hparams::set_swa_pattern marks them: all for 0, else layer i where i % pattern < pattern - 1
        pattern = _integer(f, key("attention.sliding_window_pattern"), 0, MAX_LAYERS, default=2)
        # and their own RoPE base and head sizes, which wgraph takes only where they equal the full layers'
        for swa_key, full_key, full in (("rope.freq_base_swa", "rope.freq_base", cfg["rope_theta"]),
                                        ("rope.dimension_count_swa", "rope.dimension_count", rope_dim),
                                        ("attention.key_length_swa", "attention.key_length", head_dim),
                                        ("attention.value_length_swa", "attention.value_length", value_dim)):
            if key(swa_key) in f.metadata:
                got = (_number(f, key(swa_key), None, lo=1.0) if swa_key.startswith("rope.freq")
                       else _integer(f, key(swa_key), 1, MAX_DIM))
                if got != full:
                    raise CheckpointError(f"GGUF file {name}: {key(swa_key)}={got} differs from {full_key} {full} "
                                          f"(the sliding layers' own value); only the same value is supported")
        cfg.update(
            hidden_activation="gelu_pytorch_tanh", attention_bias=False,
            query_pre_attn_scalar=hidden // heads if layers == GEMMA2_27B_LAYERS else head_dim,
            sliding_window=_integer(f, key("attention.sliding_window"), 1, 1 << 24,
                                    default=GEMMA2_DEFAULTS["sliding_window"]),
            attn_logit_softcapping=_number(f, key("attn_logit_softcapping"), GEMMA2_DEFAULTS["attn_logit_softcapping"]),
            final_logit_softcapping=_number(f, key("final_logit_softcapping"),
                                            GEMMA2_DEFAULTS["final_logit_softcapping"]),
            layer_types=["sliding_attention" if pattern == 0 or i % pattern < pattern - 1 else "full_attention"
                         for i in range(layers)])
    return cfg


def _rope_scaling(f: GGUFFile, arch: str, cfg: dict) -> dict | None:
    """rope_scaling from `{arch}.rope.scaling.*` (linear, yarn) or from llama.cpp's rope_freqs tensor (Llama 3)."""
    name = f.path.name
    # as llama.cpp reads them (llama-model.cpp, load_hparams): the type defaults to linear, the factor comes from
    # rope.scaling.factor, else from the older rope.scale_linear, whatever the type
    kind = _string(f, f"{arch}.rope.scaling.type") if f"{arch}.rope.scaling.type" in f.metadata else "linear"
    if f"{arch}.rope.scaling.factor" in f.metadata:
        factor = _number(f, f"{arch}.rope.scaling.factor", None)
    else:
        factor = _number(f, f"{arch}.rope.scale_linear", 1.0)
    attn_factor = f"{arch}.rope.scaling.attn_factor"
    # yarn of factor 1 is read as no scaling below, which would drop the attn_factor too (llama.cpp still scales
    # cos and sin by it): refused as with the other types
    if (kind != "yarn" or factor == 1.0) and attn_factor in f.metadata and _number(f, attn_factor, None) != 1.0:
        raise CheckpointError(f"GGUF file {name}: {attn_factor}={f.metadata[attn_factor]!r} scales the rotated "
                              f"values (llama.cpp's mscale); wgraph takes it with yarn scaling (factor != 1) only")
    freqs = f.tensors.get(ROPE_FREQS)
    if freqs is not None and arch != "llama":
        # llama.cpp's qwen2, qwen3 and gemma2 load no rope_freqs (its loader counts the tensor as unexpected and
        # refuses the file); read as Llama 3 scaling it made a model neither llama.cpp nor transformers runs
        raise CheckpointError(f"GGUF file {name}: tensor {ROPE_FREQS!r} in a {arch} file: only llama.cpp's llama "
                              f"architecture reads it (Llama 3 rope scaling)")
    if freqs is not None:
        if kind != "none" and factor != 1.0:
            raise CheckpointError(f"GGUF file {name}: both rope_freqs and rope.scaling.type={kind!r} with factor "
                                  f"{factor}")
        return _llama3_from_factors(freqs.dequantized().astype(np.float64), cfg, name)
    if kind not in ("none", "linear", "yarn"):
        raise CheckpointError(f"GGUF file {name}: rope.scaling.type {kind!r} is not supported (supported: 'none', "
                              f"'linear' and Llama 3's rope_freqs; 'yarn' is read, then refused by the config rules)")
    if kind == "none" or factor == 1.0:
        return None
    if kind == "linear":
        return {"rope_type": "linear", "factor": factor}
    out = {"rope_type": "yarn", "factor": factor,  # kind == "yarn"
           "original_max_position_embeddings": _integer(f, f"{arch}.rope.scaling.original_context_length", 1, 1 << 24)}
    for ours, theirs in (("beta_fast", "yarn_beta_fast"), ("beta_slow", "yarn_beta_slow"),
                         ("attention_factor", "attn_factor")):
        if f"{arch}.rope.scaling.{theirs}" in f.metadata:
            out[ours] = _number(f, f"{arch}.rope.scaling.{theirs}", None)
    return out


def _llama3_from_factors(factors: np.ndarray, cfg: dict, name: str) -> dict | None:
    """Llama 3 rope_scaling whose frequencies are llama.cpp's `rope_freqs` divisors. The formula has three
    degrees of freedom (factor, and the two wavelength bounds original/low and original/high), so low_freq_factor
    is set to 1 and the rest solved from the divisors between the bounds; the result must reproduce every divisor."""
    d = cfg["head_dim"]
    if factors.shape != (d // 2,) or not np.all(np.isfinite(factors)) or factors.min() < 1.0 - 1e-6:
        raise CheckpointError(f"GGUF file {name}: rope_freqs must hold {d // 2} finite factors >= 1, "
                              f"got shape {list(factors.shape)} in [{factors.min()}, {factors.max()}]")
    big = float(factors.max())
    if big <= 1.0 + 1e-6:
        return None
    inv = cfg["rope_theta"] ** (-np.arange(0, d // 2, dtype=np.float64) * 2.0 / d)
    wavelen = 2 * np.pi / inv
    blend = (factors > 1.0 + 1e-4) & (factors < big * (1 - 1e-4))
    if blend.sum() < 2:
        raise CheckpointError(f"GGUF file {name}: rope_freqs has {int(blend.sum())} factors between 1 and "
                              f"{big}; at least 2 are needed to recover Llama 3's rope_scaling")
    # between the bounds: 1/f = (1 - s)/factor + s with s = a/wavelen - b, a = orig/(high - low), b = low/(high - low)
    s = (1.0 / factors[blend] - 1.0 / big) / (1.0 - 1.0 / big)
    a, b = map(float, np.linalg.lstsq(np.stack([1.0 / wavelen[blend], -np.ones(blend.sum())], 1), s, rcond=None)[0])
    # a / b past float's range is no integer; b past ~2e6 makes high_freq_factor 1.0 to the 6 digits kept (a blend
    # over no band: a division by zero below)
    if not (a > 0 and b > 0 and math.isfinite(a / b)):
        raise CheckpointError(f"GGUF file {name}: rope_freqs does not follow Llama 3's rope scaling")
    high, orig = float(f"{1.0 + 1.0 / b:.6g}"), int(round(a / b))  # f32 factors: 6 digits are all they say
    if high <= 1.0:
        raise CheckpointError(f"GGUF file {name}: rope_freqs does not follow Llama 3's rope scaling")
    scaling = {"rope_type": "llama3", "factor": big, "low_freq_factor": 1.0, "high_freq_factor": float(high),
               "original_max_position_embeddings": orig}
    smooth = (orig / wavelen - 1.0) / (high - 1.0)
    want = np.where(wavelen < orig / high, 1.0, np.where(wavelen > orig, big, 1.0 / ((1 - smooth) / big + smooth)))
    if not np.allclose(want, factors, rtol=1e-4, atol=0):
        raise CheckpointError(f"GGUF file {name}: rope_freqs does not follow Llama 3's rope scaling (fitted "
                              f"{scaling} misses by {float(np.max(np.abs(want / factors - 1))):.2g})")
    return scaling
