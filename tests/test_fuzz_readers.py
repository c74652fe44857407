"""Hostile inputs for every reader of files: a small valid file of each kind (a Llama checkpoint directory's
config.json and model.safetensors, a GGUF model with its vocabulary, a tokenizer directory, a graph JSON) is
mutated (truncated, bytes overwritten, header fields, counts, shapes, dtypes, lengths and config values set to
huge, negative, zero, NaN, the wrong JSON or GGUF type) and read. Each read either succeeds with a result that is
consistent (shapes and dtypes as declared, finite RoPE frequencies, a graph that round-trips) or raises a
WgraphError subclass, never another exception, within a time bound; a small file declaring a huge size fails fast
without allocating for it. Examples are derandomized: CI sees the same inputs every run. No GPU work."""

from __future__ import annotations

import json
import logging
import math
import resource
import shutil
import struct
import time
import tracemalloc
from pathlib import Path

import gguf
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tiny_files
import wgraph as wg
from test_gguf_reader import _str, build
from test_model_config import CASES, hf_config
from wgraph.dtypes import BF16_BITS
from wgraph.errors import CheckpointError, WgraphError
from wgraph.graph.export import param_classes
from wgraph.models import Checkpoint, DecoderConfig
from wgraph.models.config import MAX_DIM, MAX_SEQ
from wgraph.models.gguf import GGUFFile
from wgraph.models.gguf_checkpoint import GGUFCheckpoint
from wgraph.models.llama import weight_shapes
from wgraph.models.random_checkpoint import random_weights, tiny_config, write_checkpoint
from wgraph.models.tokenizer import Tokenizer
from wgraph.ops.core import OPS

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SECONDS = 2.0  # any one read of these small files (most take milliseconds)
V = gguf.GGUFValueType

# any JSON value, the odd ones first in mind: past float's range, NaN, bools where numbers go, wrong containers
JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 2**31, 2**32, 2**63, 2**64, 10**400, -10**400, 2.0, 0.5, 1e308, 5e-324, "", "1", "x"]),
    st.text(max_size=6))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=6)


# a damaged file's tensor bytes (moved by another general.alignment, overwritten) hold whatever block scales they
# hold: the gguf package's dequantizer then computes inf * 0 or NaN and numpy warns; what the read must do is
# asserted (no exception but WgraphError, bounded time), the values of a damaged tensor are not
DAMAGED_VALUES = pytest.mark.filterwarnings("ignore::RuntimeWarning:gguf.quants")


def _read(fn, seconds: float = SECONDS):
    """fn()'s result, or the WgraphError it raised; any other exception fails the test, and so does taking longer
    than `seconds`."""
    start = time.perf_counter()
    try:
        out = fn()
    except WgraphError as e:
        out = e
    elapsed = time.perf_counter() - start
    assert elapsed < seconds, f"the read took {elapsed:.2f} s"
    return out


def _bounded(fn, *, python_bytes: int = 16 << 20, native_bytes: int = 256 << 20):
    """_read(fn), which must also allocate at most `python_bytes` (tracemalloc's peak: numpy and Python objects) and
    grow the process's peak resident memory by at most `native_bytes` (what Rust or C code allocates too)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    try:
        out = _read(fn)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < python_bytes, f"allocated {peak} bytes"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss < native_bytes
    return out


def _fresh(directory: Path, name: str, data: bytes | str) -> Path:
    """`directory / name` holding `data`, as a new file (a reader may still map the one it replaces)."""
    path = directory / name
    path.unlink(missing_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return path


def _mutated(raw: bytes, flips: list[tuple[int, int]], cut: int | None) -> bytes:
    """`raw` with bytes overwritten at (position, value) and cut to `cut` bytes (None: whole)."""
    out = bytearray(raw)
    for pos, value in flips:
        out[pos % len(out)] = value
    return bytes(out[:cut])


# ---- config.json + model.safetensors ----

TINY = dict(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=1, head_dim=4, max_position_embeddings=32)


@pytest.fixture(scope="module")
def safetensors_files(tmp_path_factory):
    """A tiny Llama checkpoint's config and its model.safetensors bytes, stored as f32 and as bf16 (which `get`
    reads by hand from the header's offsets)."""
    cfg = tiny_config(**TINY)
    files = {}
    for storage in ("f32", "bf16"):
        root = write_checkpoint(tmp_path_factory.mktemp(storage), cfg, random_weights(cfg), storage=storage)
        files[storage] = (root / "model.safetensors").read_bytes()
    return cfg, files, tmp_path_factory.mktemp("st")


def _read_checkpoint(root: Path, cfg: dict) -> Checkpoint:
    """Every tensor the config's model reads, checked against the shapes and dtypes the header declares."""
    shapes = weight_shapes(DecoderConfig.from_dict(cfg))
    ckpt = Checkpoint(root)
    ckpt.check_shapes(shapes)
    for name, shape in shapes.items():
        a = ckpt.get(name, shape)
        assert a.shape == shape and a.dtype in (np.float32, np.float16, BF16_BITS), (name, a.dtype, a.shape)
    return ckpt


def _header(raw: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def _with_header(header, data: bytes, length: int | None = None) -> bytes:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


@FUZZ
@given(st.sampled_from(["f32", "bf16"]), st.lists(st.tuples(st.integers(0, 700), st.integers(0, 255)), max_size=4),
       st.one_of(st.none(), st.integers(0, 800)))
def test_safetensors_bytes_overwritten_or_cut(safetensors_files, storage, flips, cut):
    """Bytes of the header overwritten (its length field and JSON), the file cut anywhere in its first 800 bytes."""
    cfg, files, tmp = safetensors_files
    _fresh(tmp, "model.safetensors", _mutated(files[storage], flips, cut))
    _read(lambda: _read_checkpoint(tmp, cfg))


OFFSETS = st.lists(st.integers(-2**65, 2**65), min_size=0, max_size=3) | st.tuples(
    st.integers(0, 600), st.integers(0, 600)).map(list)
SHAPES = st.lists(st.integers(-2, 2**64), max_size=4) | st.sampled_from([[2**32, 2**32], [2**62, 4], [0], [16, 0]])
DTYPES = st.sampled_from(["F32", "F16", "BF16", "F64", "I8", "U8", "BOOL", "F8_E4M3", "F4", "f32", "", 3, None])


@FUZZ
@given(st.sampled_from(["f32", "bf16"]), st.data())
def test_safetensors_header_fields(safetensors_files, storage, data):
    """One tensor's dtype, shape or data_offsets replaced (offsets past the end, overlapping, begin > end, a shape
    whose product does not match the bytes, unknown dtypes, any JSON), or the header length or the whole header."""
    cfg, files, tmp = safetensors_files
    header, rest = _header(files[storage])
    names = sorted(k for k in header if k != "__metadata__")
    kind = data.draw(st.sampled_from(["dtype", "shape", "data_offsets", "any", "metadata", "length", "header"]))
    length = None
    if kind == "length":
        length = data.draw(st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 2**63, 100 << 20]))
    elif kind == "header":
        header = data.draw(JSON_VALUES)
    elif kind == "metadata":
        header["__metadata__"] = data.draw(JSON_VALUES)
    else:
        entry = header[data.draw(st.sampled_from(names))]
        field = data.draw(st.sampled_from(["dtype", "shape", "data_offsets"])) if kind == "any" else kind
        entry[field] = data.draw({"dtype": DTYPES, "shape": SHAPES, "data_offsets": OFFSETS}[field]
                                 if kind != "any" else JSON_VALUES)
    _fresh(tmp, "model.safetensors", _with_header(header, rest, length))
    _read(lambda: _read_checkpoint(tmp, cfg))


def test_safetensors_huge_declarations_fail_fast(safetensors_files):
    """A 2 KB file declaring a tensor of 2^64 elements, offsets 2^62 past its end, or a header of 2^63 bytes is
    refused without allocating for what it declares."""
    cfg, files, tmp = safetensors_files
    header, rest = _header(files["f32"])
    name = "model.embed_tokens.weight"
    for field, value in (("shape", [2**32, 2**32]), ("data_offsets", [0, 2**62]), ("shape", [2**31, 2**31])):
        h = json.loads(json.dumps(header))
        h[name][field] = value
        _fresh(tmp, "model.safetensors", _with_header(h, rest[:1024]))
        assert isinstance(_bounded(lambda: _read_checkpoint(tmp, cfg)), CheckpointError)
    _fresh(tmp, "model.safetensors", _with_header(header, rest, 2**63))
    assert isinstance(_bounded(lambda: _read_checkpoint(tmp, cfg)), CheckpointError)
    # a config.json declaring the largest model a config may (vocab 2^22 x hidden 2^20) beside the tiny file: its
    # shapes are checked from the headers before anything is allocated for them
    _fresh(tmp, "model.safetensors", files["f32"])
    huge = dict(cfg, vocab_size=1 << 22, hidden_size=1 << 20, intermediate_size=MAX_DIM, head_dim=1 << 19)
    assert isinstance(_bounded(lambda: _read_checkpoint(tmp, huge)), CheckpointError)


SHARD_NAMES = st.one_of(JSON_VALUES, st.sampled_from([
    "model.safetensors", "shard.safetensors", "x" * 5000 + ".safetensors", "../model.safetensors", "/etc/x.safetensors", ".safetensors",
    "a\x00.safetensors", "\udcff.safetensors", "model.safetensors/", "..", ".", "", "nul.safetensors"]))


@FUZZ
@given(st.one_of(st.dictionaries(st.text(max_size=30) | st.sampled_from(["model.embed_tokens.weight"]), SHARD_NAMES,
                                 max_size=3).map(lambda m: {"weight_map": m}), JSON_VALUES,
                 st.sampled_from(["[" * 100000 + "]" * 100000, "{", "", "\x00"])))
def test_safetensors_index(safetensors_files, index):
    """model.safetensors.index.json with any weight map (shard names out of the directory, past the file system's
    name limit, empty, not strings) or any JSON, beside the checkpoint's tensors as shard.safetensors (not as
    model.safetensors, which is read before the index, as transformers does, leaving the index unread)."""
    cfg, files, tmp = safetensors_files
    root = tmp / "indexed"
    root.mkdir(exist_ok=True)
    _fresh(root, "shard.safetensors", files["f32"])
    _fresh(root, "model.safetensors.index.json", index if isinstance(index, str) else json.dumps(index))
    _read(lambda: _read_checkpoint(root, cfg))


# ---- config.json ----

def _check_config(c: DecoderConfig) -> None:
    """What a config that reads must hold, whatever file it came from."""
    assert 1 <= c.num_key_value_heads <= c.num_attention_heads and c.num_attention_heads % c.num_key_value_heads == 0
    assert c.head_dim % 2 == 0 and c.num_attention_heads * c.head_dim <= MAX_DIM
    for v in (c.rms_norm_eps, c.rope_theta, c.attn_softcap, c.final_softcap, c.embed_scale):
        assert type(v) is float and math.isfinite(v), v
    inv = c.inv_freq()
    assert np.isfinite(inv).all() and np.isfinite(inv.max() * (MAX_SEQ - 1))


@FUZZ
@given(st.sampled_from(CASES), st.sampled_from(["v5", "v4"]), st.data())
def test_config_json_any_value_of_any_key(tmp_path_factory, case, fmt, data):
    """Any key of each architecture's config (or of its RoPE object, or a key it may add) set to any JSON value,
    up to three at once, written as a file and read."""
    d = hf_config(case, fmt)
    keys = sorted(d) + ["head_dim", "sliding_window", "layer_types", "rope_scaling", "rope_parameters",
                        "partial_rotary_factor", "query_pre_attn_scalar", "use_sliding_window", "max_window_layers"]
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(keys))
        rope = d.get(key) if key in ("rope_scaling", "rope_parameters") else None
        if isinstance(rope, dict) and data.draw(st.booleans()):
            inner = data.draw(st.sampled_from(sorted(rope) + ["factor", "rope_type", "type", "rope_theta"]))
            rope[inner] = data.draw(JSON_VALUES | st.sampled_from(["linear", "llama3", "default", "yarn"]))
        else:
            d[key] = data.draw(JSON_VALUES)
    path = _fresh(tmp_path_factory.mktemp("cfg"), "config.json", json.dumps(d))
    out = _read(lambda: DecoderConfig.from_file(path))
    if not isinstance(out, WgraphError):
        _check_config(out)


ROPE = st.fixed_dictionaries({"rope_type": st.sampled_from(["linear", "llama3", "default"])}, optional={
    "factor": st.floats() | st.sampled_from([5e-324, 1e-300, 1e308, 10**400]),
    "low_freq_factor": st.floats(allow_nan=False) | st.sampled_from([5e-324, 1e308]),
    "high_freq_factor": st.floats(allow_nan=False) | st.sampled_from([1e-323, 1e308]),
    "original_max_position_embeddings": st.integers(-1, 1 << 25),
    "rope_theta": st.floats(min_value=0, allow_nan=False) | st.sampled_from([1.0, 1e308, 10**400])})


@FUZZ
@given(st.sampled_from(["rope_parameters", "rope_scaling"]), ROPE)
def test_rope_objects(name, rope):
    """RoPE objects of each supported type with extreme numbers: read with finite frequencies, or refused."""
    d = hf_config("llama", "v4")
    d.pop("rope_scaling")
    d[name] = rope
    out = _read(lambda: DecoderConfig.from_dict(json.loads(json.dumps(d))))
    if not isinstance(out, WgraphError):
        _check_config(out)


def _llama_config_with(key: str, value) -> dict:
    """The llama config.json with `key` (a top-level key, or "outer.inner" inside an object) set to `value`."""
    d = hf_config("llama")
    outer, _, inner = key.rpartition(".")
    (d[outer] if outer else d)[inner] = value
    return d


INTEGER_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "max_position_embeddings")


@pytest.mark.parametrize("value", [True, False, 2.0, 8.0, "8", -8, 0, 10**400, None, [8]], ids=lambda v: repr(v)[:12])
@pytest.mark.parametrize("key", INTEGER_KEYS + ("rope_parameters.original_max_position_embeddings",))
def test_integer_keys_take_json_integers_only(key, value):
    """A bool (True is an int in Python) or an integral float (8.0) where config.json has an integer is refused,
    as an integer in the wrong range is (a null where a default exists takes it): one rule, config_values.integer,
    for every integer key."""
    d = _llama_config_with(key, value)
    if value is None and key in ("num_key_value_heads", "head_dim", "max_position_embeddings"):
        DecoderConfig.from_dict(d)   # null: transformers' default
        return
    with pytest.raises(CheckpointError, match=rf"{key.rsplit('.', 1)[-1]}"):
        DecoderConfig.from_dict(d)


@pytest.mark.parametrize("value", [True, "1e-5", math.nan, math.inf, -math.inf, 0, -1e-5, 10**400, None, [1e-5]],
                         ids=lambda v: repr(v)[:12])
@pytest.mark.parametrize("key", ["rms_norm_eps", "rope_parameters.rope_theta", "rope_parameters.factor"])
def test_real_keys_take_finite_json_numbers_only(key, value):
    """A bool, a string, NaN, an infinity, a number out of range or past float's range where a real goes; null
    too (rope_parameters.rope_theta null was read as absent, theta 10000, where transformers 5.25 fails building
    the model: tests/data/make_arch_checkpoints.py's check_nulls)."""
    d = _llama_config_with(key, value)
    with pytest.raises(CheckpointError, match=rf"{key.rsplit('.', 1)[-1]}"):
        DecoderConfig.from_dict(d)


# ---- GGUF ----

@pytest.fixture(scope="module")
def gguf_models(tmp_path_factory):
    """Tiny GGUF models with their vocabularies: llama (Q8_0 matrices, SentencePiece vocabulary), gemma2 and qwen2
    (byte-level vocabulary), each as bytes and parsed."""
    log = logging.getLogger("gguf")
    level = log.level
    log.setLevel(logging.ERROR)   # the writer warns of each key it replaces
    tmp = tmp_path_factory.mktemp("gguf")
    out = {}
    for arch in ("llama", "gemma2", "qwen2"):
        tok = tiny_files.byte_level_tokenizer() if arch == "qwen2" else tiny_files.spm_tokenizer()
        cfg = dict(tiny_files.tiny_model_config(arch, vocab_size=len(tok["tokens"])), hidden_size=32,
                   intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                   head_dim=16)
        w = tiny_files.arch_weights(arch, cfg)
        if cfg["tie_word_embeddings"]:
            w.pop("lm_head.weight", None)
        path = tiny_files.write_model(tmp / f"{arch}.gguf", arch, cfg, w, qtype=gguf.GGMLQuantizationType.Q8_0,
                                      tokenizer=tok)
        out[arch] = (path.read_bytes(), GGUFFile(path))
    yield out, tmp
    log.setLevel(level)


def _read_gguf(path: Path) -> GGUFCheckpoint:
    """A GGUF model as from_pretrained reads it before any GPU work: its config, every tensor (as blocks and as
    float32, in the shape the file declares), its tokenizer encoding and decoding, its chat template rendering."""
    ckpt = GGUFCheckpoint(path)
    DecoderConfig.from_dict(ckpt.config)
    for hf in ckpt.hf_names():
        shape = ckpt.file.tensors[ckpt.gguf_name(hf)].shape
        ckpt.get_blocks(hf, shape)
        values = ckpt.get(hf, shape)
        assert values.shape == shape and values.dtype == np.float32
    for t in ckpt.file.tensors.values():
        assert t.raw.nbytes <= path.stat().st_size
    if "tokenizer.ggml.model" in ckpt.file.metadata:
        tok = Tokenizer.from_gguf(ckpt.file)
        ids = tok.encode("hello world <s> ünï")
        assert all(0 <= i < tok.vocab_size for i in ids)
        tok.decode(ids)
        if tok.chat_template is not None:
            _read(lambda: tok.apply_chat_template([{"role": "user", "content": "hi"}]))
    return ckpt


def _rewrite(src: GGUFFile, dest: Path, replace: dict) -> Path:
    """`src` written again with the `gguf` package's writer, metadata `replace`d: {key: (value, GGUF type ids)}
    (value None: the key dropped)."""
    arch = src.metadata["general.architecture"]
    w = gguf.GGUFWriter(str(dest), arch)
    meta = {k: (v, src.value_types[k]) for k, v in src.metadata.items() if k != "general.architecture"}
    meta.update(replace)
    for key, (value, types) in meta.items():
        if value is None:
            continue
        if types[0] == V.ARRAY:
            items = value.tolist() if isinstance(value, np.ndarray) else list(value)
            if items:   # the writer writes no empty array
                w.add_key_value(key, items, V.ARRAY, sub_type=V(types[1]))
        else:
            w.add_key_value(key, value, V(types[0]))
    for name, t in src.tensors.items():
        if t.ggml_type == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, t.dequantized())
        else:
            w.add_tensor(name, np.array(t.rows()), raw_dtype=gguf.GGMLQuantizationType(t.ggml_type))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dest


def test_rewritten_gguf_reads_as_the_original(gguf_models):
    models, tmp = gguf_models
    for arch, (raw, src) in models.items():
        again = GGUFFile(_rewrite(src, tmp / f"again_{arch}.gguf", {}))
        assert again.metadata.keys() == src.metadata.keys() and list(again.tensors) == list(src.tensors)
        _read_gguf(tmp / f"again_{arch}.gguf")


U32, I32, U64, I64 = (V.UINT32,), (V.INT32,), (V.UINT64,), (V.INT64,)
GGUF_VALUES = st.one_of(
    st.tuples(st.integers(0, 2**32 - 1) | st.sampled_from([0, 1, 2**31, 2**32 - 1]), st.just(U32)),
    st.tuples(st.integers(-2**31, 2**31 - 1), st.just(I32)),
    st.tuples(st.sampled_from([2**32, 2**63, 2**64 - 1]), st.just(U64)),
    st.tuples(st.sampled_from([-1, -2**63, 2**40]), st.just(I64)),
    st.tuples(st.floats(width=32) | st.sampled_from([math.nan, math.inf, 0.0, 1e-45]), st.just((V.FLOAT32,))),
    st.tuples(st.floats() | st.sampled_from([1e308, 5e-324]), st.just((V.FLOAT64,))),
    st.tuples(st.booleans(), st.just((V.BOOL,))),
    st.tuples(st.text(max_size=8) | st.sampled_from(["llama", "gpt2", "linear", "yarn", "{{ 1/0 }}", "{%"]),
              st.just((V.STRING,))),
    st.tuples(st.lists(st.integers(-2**31, 2**31 - 1), min_size=1, max_size=4), st.just((V.ARRAY, V.INT32))),
    st.tuples(st.lists(st.text(max_size=4), min_size=1, max_size=4), st.just((V.ARRAY, V.STRING))),
    st.tuples(st.lists(st.floats(width=32), min_size=1, max_size=4), st.just((V.ARRAY, V.FLOAT32))),
    st.tuples(st.lists(st.booleans(), min_size=1, max_size=2), st.just((V.ARRAY, V.BOOL))),
    st.just((None, ())))   # the key dropped


def _gguf_keys(src: GGUFFile, arch: str) -> list[str]:
    """The metadata keys a reader looks at: the file's own and the optional ones it may hold."""
    more = [f"{arch}.{k}" for k in ("expert_count", "attention.causal", "rope.scaling.type", "rope.scaling.factor",
                                    "rope.scale_linear", "rope.scaling.attn_factor", "attention.key_length",
                                    "rope.scaling.original_context_length", "attention.sliding_window",
                                    "attn_logit_softcapping", "attention.value_length", "rope.dimension_count")]
    more += ["tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id", "tokenizer.ggml.add_bos_token",
             "tokenizer.ggml.add_eos_token", "tokenizer.ggml.pre", "tokenizer.chat_template", "tokenizer.ggml.merges",
             "tokenizer.ggml.scores", "tokenizer.ggml.unknown_token_id", "general.alignment",
             "tokenizer.ggml.add_space_prefix"]
    return sorted({k for k in src.metadata if k != "general.architecture"} | set(more))


@DAMAGED_VALUES
@FUZZ
@given(st.sampled_from(["llama", "gemma2", "qwen2"]), st.data())
def test_gguf_metadata_of_any_type(gguf_models, arch, data):
    """Up to three metadata keys (sizes, RoPE, softcaps, the vocabulary's arrays, token ids, flags, the chat
    template, the alignment) given any GGUF type and value, or dropped."""
    models, tmp = gguf_models
    src = models[arch][1]
    keys = _gguf_keys(src, arch)
    replace = {data.draw(st.sampled_from(keys)): data.draw(GGUF_VALUES) for _ in range(data.draw(st.integers(1, 3)))}
    path = tmp / "meta.gguf"
    path.unlink(missing_ok=True)
    try:
        _rewrite(src, path, replace)
    except (ValueError, TypeError, struct.error, OverflowError):
        return   # the writer itself refused the value
    _read(lambda: _read_gguf(path))


@DAMAGED_VALUES
@FUZZ
@given(st.sampled_from(["llama", "gemma2", "qwen2"]),
       st.lists(st.tuples(st.integers(0, 1 << 15), st.integers(0, 255)), min_size=1, max_size=4),
       st.one_of(st.none(), st.integers(0, 1 << 15)))
def test_gguf_bytes_overwritten_or_cut(gguf_models, arch, flips, cut):
    """Bytes of the header (counts, lengths, types, dims, offsets, the vocabulary) overwritten; the file cut."""
    models, tmp = gguf_models
    path = _fresh(tmp, "flip.gguf", _mutated(models[arch][0], flips, cut))
    _read(lambda: _read_gguf(path))


@settings(FUZZ, max_examples=12)
@given(st.integers(1, 300_000) | st.sampled_from([200_000, 300_000]), st.integers(0, 1500), st.booleans())
def test_gguf_vocabulary_of_long_tokens(gguf_models, long_token, runs, merges):
    """A SentencePiece vocabulary with one token of up to 300,000 characters and "a" .. "a" * runs, with or without
    tokenizer.ggml.merges: the merges it implies are bounded work (one such token took seconds, quadratic in its
    length) and bounded memory (runs = 1500 implies 1.1 million pairs holding 1.1e9 characters)."""
    models, tmp = gguf_models
    src = models["llama"][1]
    tokens = list(src.metadata["tokenizer.ggml.tokens"])
    extra = [t for t in dict.fromkeys(["b" * long_token] + ["a" * k for k in range(1, runs + 1)]) if t not in tokens]
    replace = {"tokenizer.ggml.tokens": (tokens + extra, (V.ARRAY, V.STRING)),
               "tokenizer.ggml.scores": (src.metadata["tokenizer.ggml.scores"].tolist() + [0.0] * len(extra),
                                         (V.ARRAY, V.FLOAT32)),
               "tokenizer.ggml.token_type": (src.metadata["tokenizer.ggml.token_type"].tolist() + [1] * len(extra),
                                             (V.ARRAY, V.INT32))}
    if merges:
        replace["tokenizer.ggml.merges"] = (["a a", "aa a", "b b"], (V.ARRAY, V.STRING))
    path = tmp / "vocab.gguf"
    path.unlink(missing_ok=True)
    f = GGUFFile(_rewrite(src, path, replace))
    _bounded(lambda: Tokenizer.from_gguf(f), python_bytes=256 << 20, native_bytes=512 << 20)


BIG = 1 << 62


@pytest.mark.parametrize("fields", [
    {"n_tensors": BIG}, {"n_kv": BIG}, {"n_tensors": (1 << 16) - 1}, {"n_kv": (1 << 16) - 1},
    {"kv": [(b"general.architecture", 8, _str(b"llama")), (b"k", 8, struct.pack("<Q", (1 << 24) - 1))]},
    {"kv": [(b"general.architecture", 8, _str(b"llama")), (b"k", 9, struct.pack("<IQ", 8, (1 << 24) - 1))]},
    {"kv": [(b"general.architecture", 8, _str(b"llama")), (b"k", 9, struct.pack("<IQ", 12, (1 << 24) - 1))]},
    {"kv": [(b"general.architecture", 8, _str(b"llama")), (b"tokenizer.ggml.tokens", 9,
                                                           struct.pack("<IQ", 8, BIG))]},
    {"tensors": [(b"w", (1 << 20, 1 << 20), 0, 0)]}, {"tensors": [(b"w", (2**32, 2**32, 2**32, 2**32), 0, 0)]},
    {"tensors": [(b"w", (32, 1 << 30), 8, 0)]},
])
def test_gguf_huge_declarations_fail_fast(tmp_path, fields):
    """A GGUF file of a few hundred bytes declaring 2^62 tensors or entries, a string or array of 2^24 items, or a
    tensor of 2^40 values is refused naming the field, before it allocates for what it declares."""
    path = _fresh(tmp_path, "huge.gguf", build(**fields))
    assert path.stat().st_size < 1024
    out = _bounded(lambda: GGUFFile(path), python_bytes=1 << 20)
    assert isinstance(out, CheckpointError), out


# ---- tokenizer directory ----

@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tokdir")


def _read_tokenizer(root: Path) -> Tokenizer:
    """A tokenizer directory read, encoding, decoding (streamed too) and rendering its chat template."""
    tok = Tokenizer.from_directory(root)
    ids = tok.encode("Hello world <|im_end|> ünï")
    assert all(0 <= i < tok.vocab_size for i in ids) and all(0 <= i < tok.vocab_size for i in tok.stop_ids)
    tok.decode(ids)
    stream = tok.stream_decoder()
    assert "".join(stream.push([i]) for i in ids) + stream.flush() == tok.decode(ids)
    if tok.chat_template is not None:
        for name in tok.chat_template.names:
            _read(lambda: tok.apply_chat_template([{"role": "user", "content": "hi"}], template=name))
    return tok


TEMPLATES = st.sampled_from(["{{ messages[0]['content'] }}", "{% for m in messages %}{{ m.content }}{% endfor %}",
                             "{{ bos_token * 99999999 }}", "{{ raise_exception('no') }}", "{%", "{{ 1/0 }}",
                             "{{ 7 ** 999999999 }}", "{% for i in range(999999) %}{{ i }}{% endfor %}",
                             "{{ ''.__class__ }}", ""])
CHAT_TEMPLATE_VALUES = st.one_of(
    TEMPLATES, JSON_VALUES, st.lists(st.fixed_dictionaries({"name": JSON_VALUES | st.sampled_from(["default"]),
                                                            "template": TEMPLATES | JSON_SCALARS}), max_size=3))


@FUZZ
@given(st.data())
def test_tokenizer_directory_configs(tokenizer_dir, data):
    """tokenizer_config.json's special tokens, chat templates (a string, named lists, any JSON) and flags, and the eos
    ids of generation_config.json, given any value."""
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_files.TINY_TOKENIZER / name, tokenizer_dir / name)
    config = json.loads((tiny_files.TINY_TOKENIZER / "tokenizer_config.json").read_text())
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(["bos_token", "eos_token", "unk_token", "pad_token", "chat_template",
                                         "clean_up_tokenization_spaces", "generation_config"]))
        if key == "chat_template":
            config[key] = data.draw(CHAT_TEMPLATE_VALUES)
        elif key == "generation_config":
            eos = data.draw(JSON_VALUES | st.sampled_from([3, [3, 6], 2**70, -1, [True]]))
            _fresh(tokenizer_dir, "generation_config.json", json.dumps({"eos_token_id": eos}))
        else:
            config[key] = data.draw(JSON_VALUES | st.sampled_from(["<|im_end|>", {"content": "<s>"}, "$A", "<s> x"]))
    text = json.dumps(config)
    if data.draw(st.integers(0, 9)) == 0:   # not JSON, or JSON nested deeper than the parser goes
        text = data.draw(st.sampled_from(["[" * 100000 + "]" * 100000, '{"a": ' + "{" * 5000, "", "\ufeff{}", "1e999"]))
        if data.draw(st.booleans()):
            _fresh(tokenizer_dir, "generation_config.json", text)
            text = json.dumps(config)
    _fresh(tokenizer_dir, "tokenizer_config.json", text)
    _read(lambda: _read_tokenizer(tokenizer_dir), seconds=15.0)   # a template's render may run up to its 10 s limit
    (tokenizer_dir / "generation_config.json").unlink(missing_ok=True)


@settings(FUZZ, max_examples=30)
@given(st.lists(st.tuples(st.integers(0, 36450), st.sampled_from(b'{}[]":,0\\ax')), min_size=1, max_size=3),
       st.one_of(st.none(), st.integers(0, 36450)))
def test_tokenizer_json_bytes_overwritten_or_cut(tokenizer_dir, flips, cut):
    """tokenizer.json with JSON syntax overwritten or cut: tokenizers' errors (and panics) are CheckpointErrors."""
    shutil.copy(tiny_files.TINY_TOKENIZER / "tokenizer_config.json", tokenizer_dir / "tokenizer_config.json")
    _fresh(tokenizer_dir, "tokenizer.json", _mutated((tiny_files.TINY_TOKENIZER / "tokenizer.json").read_bytes(),
                                                     flips, cut))
    _read(lambda: _read_tokenizer(tokenizer_dir))


# ---- graph JSON ----

@pytest.fixture(scope="module")
def graph_json() -> dict:
    """A graph file of inputs, consts, a state and ten ops (norm, linear, views, RoPE, attention, elementwise)."""
    g = wg.Graph("fuzz")
    x, pos = g.input("x", (3, 32), "f32"), g.input("pos", (1,), "u32")
    w, b, nw = (g.const(n, np.ones(s, np.float32)) for n, s in (("w", (32, 32)), ("b", (32,)), ("nw", (32,))))
    cos, sin = wg.ops.rope_tables(16, 8)
    c, s = g.const("cos", cos), g.const("sin", sin)
    q = wg.ops.rope(wg.ops.reshape(wg.ops.linear(wg.ops.rmsnorm(x, nw, eps=1e-6), w, b), (3, 4, 8)), c, s, pos=pos)
    y = wg.ops.add(wg.ops.reshape(wg.ops.attention(q, q, q, causal=True), (3, 32)), x)
    y = wg.ops.scale(wg.ops.silu(y), 0.5)
    g.output("y", wg.ops.softmax(y))
    g.output("i", wg.ops.argmax(y))
    g.state("kc", (8, 4, 8), "f32")
    return json.loads(g.to_json())


def _read_graph(text: str) -> wg.Graph:
    """A graph file read; one that reads writes itself out and reads back the same."""
    g = wg.Graph.from_json(text)
    again = g.to_json()
    assert wg.Graph.from_json(again).to_json() == again
    return g


OP_NAMES = sorted(OPS) + ["input", "state", "nope", ""]
SHAPE_VALUES = st.sampled_from([[2**32 - 1] * 4, [2**31, 2**31], [0], [], [-1], [1.5], ["a"], [True], [2**40],
                                [3, 32, 1, 1, 1, 1, 1, 1, 1], "abcd", None])


def _graph_edit(data, d: dict) -> None:
    """One edit of a graph file: an op renamed, a param set to any value or another class, an input pointed at a
    missing, later or own value, inputs added or dropped, a field replaced or removed, nodes swapped (a value used
    before its node), a shape or dtype changed, an out= into anything, the outputs replaced."""
    nodes = d["nodes"]
    i = data.draw(st.integers(0, len(nodes) - 1))
    n = nodes[i]
    values = sorted(v for m in nodes if isinstance(m.get("outputs"), list) for v in m["outputs"] if isinstance(v, str))
    inputs = n.get("inputs") if isinstance(n.get("inputs"), list) else []
    kind = data.draw(st.sampled_from(["op", "param", "class", "input", "more", "fewer", "field", "drop", "swap",
                                      "shape", "dtype", "writes", "outputs"]))
    params = n.get("params")
    if kind == "op":
        n["op"] = data.draw(st.sampled_from(OP_NAMES))
    elif kind == "param" and isinstance(params, dict) and params.get("fields"):
        params["fields"][data.draw(st.sampled_from(sorted(params["fields"])))] = data.draw(
            JSON_VALUES | st.sampled_from([{"__tuple__": [1, 2]}, {"__tuple__": 5}, {"__dict__": [[[1], 2]]},
                                           {"__attrs__": "os:system", "fields": {}}]))
    elif kind == "class" and isinstance(params, dict):
        params["__attrs__"] = data.draw(st.sampled_from(sorted(param_classes()) + ["os:system", 7]))
    elif kind == "input" and inputs:
        inputs[data.draw(st.integers(0, len(inputs) - 1))] = data.draw(
            st.sampled_from(values + [None, "ghost", str(n.get("name"))]))
    elif kind == "more":
        n["inputs"] = inputs + [data.draw(st.sampled_from(values + [None]))]
    elif kind == "fewer" and inputs:
        n["inputs"] = inputs[:-1]
    elif kind == "field" and n:
        n[data.draw(st.sampled_from(sorted(n)))] = data.draw(JSON_VALUES)
    elif kind == "drop" and n:
        del n[data.draw(st.sampled_from(sorted(n)))]
    elif kind == "swap":
        j = data.draw(st.integers(0, len(nodes) - 1))
        nodes[i], nodes[j] = nodes[j], nodes[i]
    elif kind == "shape" and "shape" in n:
        n["shape"] = data.draw(SHAPE_VALUES)
    elif kind == "dtype":
        n["dtype"] = data.draw(st.sampled_from(["f32", "f16", "bf16", "u32", "i32", "q8", "float64", 5, None]))
    elif kind == "writes":
        n["writes"], n["outputs"] = [data.draw(st.sampled_from(values + ["ghost"]))], []
    elif kind == "outputs":
        d["outputs"] = data.draw(st.sampled_from([{}, {"a": "x"}, {"a": None}, {"a": ["x"]}, [], None, {"y": "pos"},
                                                  {"y": "kc"}]))


@settings(FUZZ, max_examples=400)
@given(st.data())
def test_graph_json_structure(graph_json, data):
    """Up to four edits of a graph file (unknown ops, params of the wrong type or class, inputs naming missing or
    later values or the node's own output, cycles, huge or malformed shapes)."""
    d = json.loads(json.dumps(graph_json))
    for _ in range(data.draw(st.integers(1, 4))):
        _graph_edit(data, d)
    _read(lambda: _read_graph(json.dumps(d)))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 1 << 14), st.sampled_from(b'{}[]":,0-1.ex\\ ')), min_size=1, max_size=3),
       st.one_of(st.none(), st.integers(0, 1 << 14)))
def test_graph_json_text_overwritten_or_cut(graph_json, flips, cut):
    text = json.dumps(graph_json, indent=1).encode()
    _read(lambda: _read_graph(_mutated(text, flips, cut)))


def test_graph_json_huge_shapes_allocate_nothing(graph_json):
    """A graph file declaring a state of (2^32 - 1)^4 f32 reads (a graph holds no data) without allocating for it;
    compiling it is refused by the device's limits (tests/test_graph.py)."""
    d = json.loads(json.dumps(graph_json))
    state = [n for n in d["nodes"] if n["name"] == "kc"][0]
    state["shape"] = [2**32 - 1] * 4
    g = _bounded(lambda: _read_graph(json.dumps(d)), python_bytes=4 << 20)
    assert g.states["kc"].spec.shape == (2**32 - 1,) * 4
    state["init"] = "AAAA"
    assert isinstance(_bounded(lambda: _read_graph(json.dumps(d)), python_bytes=4 << 20), wg.GraphError)
