"""The API fuzz: test_api_walk.py checks that bad values are refused; this module checks that valid values given in
another spelling are the same value. For every public callable of the walk's table (its good call), each scalar,
shape, name or id-list parameter is given a few canonical values (its good call's, small ints, reals, pairs, names);
where the canonical call succeeds, numpy's spellings of the value (np.int64 / np.uint8 / np.int16 / np.float32 /
np.bool_ / np.str_ scalars, a tuple of numpy integers, a list for a tuple) must give the same result: equal tensors
and arrays, equal plain Python fields (a record that keeps np.int16(200) where 200 was checked is not the same: later
arithmetic on it wraps). Where the spelling is refused, the refusal must be a WgraphError naming the parameter.

Plus the composite arguments the table-driven walk cannot reach (kernel_path's layer keys; QuantizedWeight's shape
held past its checks)."""

from __future__ import annotations

import inspect

import attrs
import numpy as np
import pytest

import wgraph as wg
from wgraph import ggml_blocks
from wgraph.ggml_blocks import QuantizedWeight

from test_api_walk import CASES, Env, _names

# Calls whose result depends on more than their arguments (a decoder's position, a timing): not compared.
STATEFUL = ("run_steps", "run_many", "Llama.step", "BatchedDecoder.step", "profile", "Llama.generate",
            "BatchedDecoder.generate", "Llama.prefill", "BatchedDecoder.prefill", "generate_text", "stream_text")
# Canonical values tried for every parameter (besides the good call's own); each is only compared where the
# canonical call itself succeeds.
CANONICAL = [0, 1, 3, 0.5, 2.0, True, False, (2, 8), (8, 32), (-1, 0), (2,), [1, 2], "f32", "int4", "paged",
             "swiglu", "tanh", "Q4_K"]


def _spellings(v) -> list:
    """numpy's spellings of the canonical value `v` (each exactly `v`)."""
    if type(v) is bool:
        return [np.bool_(v)]
    if type(v) is str:   # a name: numpy's str subclass is the same characters
        return [np.str_(v)]
    if type(v) is int:
        kinds = (np.int64, np.uint64, np.int32, np.uint32, np.int16, np.uint8)
        return [k(v) for k in kinds if np.iinfo(k).min <= v <= np.iinfo(k).max]
    if type(v) is float:
        return [k(v) for k in (np.float64, np.float32, np.float16) if float(k(v)) == v]
    if isinstance(v, (tuple, list)) and v and all(type(x) is int for x in v):
        out = [type(v)(k(x) for x in v) for k in (np.int64, np.int16, np.uint8)
               if all(np.iinfo(k).min <= x <= np.iinfo(k).max for x in v)]
        return out + [list(v) if type(v) is tuple else tuple(v)]
    return []


def _result(r, depth=0):
    """A call's result as comparable data: tensors and arrays by shape, dtype and bytes, records by field, plain
    values with their type (np.int64(8) is not 8 here)."""
    if isinstance(r, wg.Tensor):
        return ("Tensor", r.shape, r.dtype, r.numpy().tobytes())
    if isinstance(r, np.ndarray):
        return ("array", r.shape, str(r.dtype), r.tobytes())
    if isinstance(r, (tuple, list)):
        return (type(r).__name__,) + tuple(_result(x, depth + 1) for x in r)
    if isinstance(r, dict):
        return ("dict",) + tuple((k, _result(v, depth + 1)) for k, v in r.items())
    if attrs.has(type(r)) and depth < 3:
        return (type(r).__name__,) + tuple((f.name, _result(getattr(r, f.name), depth + 1))
                                           for f in attrs.fields(type(r)))
    if r is None or isinstance(r, (int, float, str, bytes, np.generic)):
        return (type(r).__name__, r)
    return (type(r).__name__,)   # an object of its own (a Graph value, a model): its type only


@pytest.fixture(scope="module")
def env(dev, tmp_path_factory):
    return Env(dev, tmp_path_factory.mktemp("fuzz"))


FUZZED = sorted(n for n, c in CASES.items() if c.build is not None and not c.skip_good
                and not any(s in n for s in STATEFUL))


def _bound(case, env):
    """The case's signature and its good call's arguments bound to it."""
    fn, args, kwargs = case.build(env)
    sig = inspect.signature(fn)
    return sig, sig.bind(*args, **kwargs)


def _call_with(case, env, name: str, value):
    """The case's call, made afresh, with parameter `name` given `value`: its result."""
    fn, args, kwargs = case.build(env)
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.arguments[name] = value
    return fn(*bound.args, **bound.kwargs)


@pytest.mark.parametrize("name", FUZZED)
def test_numpy_spellings_of_valid_values_are_the_same_value(env, name):
    case = CASES[name]
    sig, good = _bound(case, env)
    failures = []
    for p in sig.parameters.values():
        if p.name in case.tensors or p.name in case.data or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        own = good.arguments.get(p.name, p.default)
        values = ([] if own is p.empty else [own]) + [c for c in CANONICAL if not (type(c) is type(own) and c == own)]
        for canonical in values:
            def call(value):
                out = _result(_call_with(case, env, p.name, value))
                env.dev.sync()
                return out
            try:
                want = call(canonical)
            except wg.WgraphError:
                continue   # not a valid value here: the walk checks refusals
            for spelled in _spellings(canonical):
                try:
                    got = call(spelled)
                except wg.WgraphError as e:
                    if not _names(str(e), p.name):
                        failures.append(f"{p.name}={spelled!r}: refused without naming {p.name!r}: {e}")
                    continue
                except Exception as e:  # noqa: BLE001 - a raw error is what this test finds
                    failures.append(f"{p.name}={spelled!r} ({canonical!r} runs): {type(e).__name__}: {e}")
                    continue
                if got != want:
                    failures.append(f"{p.name}={spelled!r} gives another result than {canonical!r}")
    assert not failures, f"{name}:\n" + "\n".join(failures)


def _hostile_elements(v) -> dict:
    """A list / tuple parameter's good value `v` with one element made hostile (a bool, a float, None, a str, -1,
    2**64, NaN, a list, numpy's float and bool scalars, a complex, 2.0), made ragged or nested, or given as a
    bool, float or 2-D array, or empty; for a list of lists, an inner list made ragged or holding a bad value."""
    kind = type(v)
    if kind not in (list, tuple):
        return {}
    if v and all(type(x) is int for x in v):
        out = {f"[{b!r}, ...]": kind([b] + list(v[1:])) for b in (True, 1.5, None, "1", -1, 2**64, float("nan"), [1],
                                                                  np.float32(1), np.bool_(True), 1j, 2.0)}
        return out | {"ragged": kind([list(v)] + list(v[1:])) if len(v) > 1 else kind([[v[0]], [v[0], v[0]]]),
                      "nested": kind([list(v)]), "bool array": np.array([True] * len(v)),
                      "float array": np.array(v, float), "2-D array": np.array([v]), "empty": kind()}
    if v and all(isinstance(x, list) and x for x in v):
        return {"ragged inner": [x + [1] if i == 0 else x for i, x in enumerate(v)],
                **{f"inner [{b!r}, ...]": [[b] + x[1:] for x in v] for b in (True, 1.5, None)}}
    return {}


# The hostile spellings that are valid for a parameter ("callable parameter", else any callable's parameter of
# that name), with the reason.
_ANY_SHAPE = ({"nested", "2-D array", "empty"}, "embedding ids of any shape ([B, S] gives rows [B, S, H])")
ELEMENT_VALID = {
    "window": ({"[-1, ...]"}, "-1 is an unbounded side"),
    "ops.embedding ids": _ANY_SHAPE, "ops.embedding_q ids": _ANY_SHAPE,
    "ids": ({"empty"}, "no ids: decode([]) is ''"),   # one sequence: a batch [[...]] ran its rows together
    "shape": ({"empty"}, "() is a 0-d tensor's shape"),
    "prompts": ({"ragged inner"}, "prompts of different lengths"),
}


@pytest.mark.parametrize("name", FUZZED)
def test_hostile_elements_of_list_arguments_are_refused_by_name(env, name):
    """Every list or tuple parameter (ids, shapes, windows, offsets, prompts) with one hostile element, ragged,
    nested or empty: a WgraphError naming the parameter, or a value its ELEMENT_VALID entry declares; never a raw
    numpy / Python error (bdpa_decompose's token_ids [[1], [2, 3], 1, 3] was numpy's ValueError, [None] * 4 a
    TypeError) and never a silent acceptance ([True, 2, 1, 3] were token ids)."""
    case = CASES[name]
    sig, good = _bound(case, env)
    failures = []
    for p in sig.parameters.values():
        if p.name in case.tensors or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        valid = ELEMENT_VALID.get(f"{name} {p.name}", ELEMENT_VALID.get(p.name, (set(), "")))[0]
        for label, value in _hostile_elements(good.arguments.get(p.name, p.default)).items():
            if label in valid:
                continue
            try:
                _call_with(case, env, p.name, value)
            except wg.WgraphError as e:
                if not _names(str(e), p.name):
                    failures.append(f"{p.name} {label}: the message does not name {p.name!r}: {e}")
            except Exception as e:  # noqa: BLE001 - a raw error is what this test finds
                failures.append(f"{p.name} {label}: {type(e).__name__}: {e}")
            else:
                failures.append(f"{p.name} {label}: accepted")
            env.dev.sync()
    assert not failures, f"{name}:\n" + "\n".join(failures)


def test_quantized_weight_holds_its_checked_shape():
    """QuantizedWeight kept the shape as given: (np.int16(200), np.int16(256)) passed check_matrix, and the byte
    counts computed from it later wrapped in int16 (raw() and upload raised numpy's 'cannot reshape' ValueError;
    np.uint8 an OverflowError)."""
    w = np.random.default_rng(3).standard_normal((200, 256)).astype(np.float32)
    q = ggml_blocks.quantize(w, "Q8_0")
    want = q.dequantize()
    assert want.shape == (200, 256) and np.abs(want - w).max() < 0.05   # Q8_0 of N(0, 1): ~0.02 at most
    for kind in (np.int16, np.uint8, np.int64):
        shape = (kind(200), kind(256)) if kind is not np.uint8 else (kind(200), 256)
        qn = QuantizedWeight("Q8_0", shape, q.blocks)
        assert qn.shape == (200, 256) and all(type(d) is int for d in qn.shape), kind
        assert qn.nbytes == 200 * 272   # 8 blocks of 34 bytes a row
        np.testing.assert_array_equal(qn.raw(), q.raw())
        np.testing.assert_array_equal(qn.dequantize(), want)


@pytest.mark.parametrize("key", ["defualt", "layer3", "-1", " 3", True, 3.0, 2**40, "9" * 5000])
def test_kernel_path_refuses_a_layer_key_no_layer_matches(key):
    """A phase table's key that no layer's lookup (str(layer)) matches was kept as str(key): the variant was
    silently never forced ({"prefill": {"defualt": name}} forced nothing, nor {True: name} or {3.0: name})."""
    with pytest.raises(wg.PlanError, match=r"kernel_path: prefill key .* is not 'default' or a layer index"):
        wg.kernel_path({"prefill": {key: "prefill_tiled_small_f32"}})


@pytest.mark.parametrize("key", [3, np.int64(3), "3", "03", np.str_("3")])
def test_kernel_path_layer_keys(key):
    path = wg.kernel_path({"prefill": {key: "prefill_tiled_small_f32", np.str_("default"): "prefill_streaming_f32"}})
    assert path.variant("prefill", 3) == "prefill_tiled_small_f32"
    assert path.variant("prefill", 2) == path.variant("prefill") == "prefill_streaming_f32"


def test_quantize_refuses_a_ragged_list_by_name():
    """quantize([[1.0] * 32, [1.0] * 31], "Q8_0") raised numpy's raw 'inhomogeneous shape' ValueError (host data
    follows host_arrays' rule: a DtypeError naming the call); a regular list of float32 values still quantizes."""
    with pytest.raises(wg.DtypeError, match=r"^quantize: cannot view list as a numpy array"):
        ggml_blocks.quantize([[1.0] * 32, [1.0] * 31], "Q8_0")
    w = [[np.float32(i / 8) for i in range(32)]]
    np.testing.assert_array_equal(ggml_blocks.quantize(w, "Q8_0").dequantize(),
                                  ggml_blocks.quantize(np.array(w, np.float32), "Q8_0").dequantize())


def test_from_weights_names_a_ragged_tensor(dev):
    """Llama.from_weights and QuantizedLlama.from_weights viewed each weight with np.asarray / np.shape: a ragged
    list raised numpy's raw 'inhomogeneous shape' ValueError; a malformed weight is a CheckpointError naming the
    tensor (docs/errors.md)."""
    from wgraph.models import Llama
    from wgraph.models.config import LlamaConfig
    from wgraph.models.quantized import QuantizedLlama
    from wgraph.models.random_checkpoint import random_weights, tiny_config

    cfg = tiny_config(num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=16, vocab_size=64)
    weights = random_weights(cfg)
    weights["model.norm.weight"] = [[1.0]] * 16 + [[1.0, 2.0]] * 16
    with pytest.raises(wg.CheckpointError, match=r"^tensor 'model.norm.weight' cannot be viewed as an array"):
        Llama.from_weights(LlamaConfig.from_dict(cfg), weights, dev, dtype="f32", max_seq=8)
    with pytest.raises(wg.CheckpointError, match=r"^tensor 'model.norm.weight' cannot be viewed as an array"):
        QuantizedLlama.from_weights(LlamaConfig.from_dict(cfg), weights, dev, max_seq=8)


def test_a_path_the_system_cannot_look_up_is_a_checkpoint_error(tmp_path):
    """A path with a name past the file system's limit made Path.is_dir() / is_file() raise a raw OSError (File name
    too long) from open_pretrained, from_pretrained, Checkpoint and Tokenizer.from_directory; one holding a NUL byte
    made os.stat's raw ValueError (embedded null byte) from DecoderConfig.from_file, Tokenizer.from_gguf and
    Llama.from_pretrained. Each is a CheckpointError naming the path now."""
    from wgraph.models import Checkpoint, DecoderConfig, Tokenizer, open_pretrained

    calls = (open_pretrained, Checkpoint, Tokenizer.from_directory, Tokenizer.from_gguf, DecoderConfig.from_file)
    for path in (tmp_path / ("y" * 300) / "config.json", "x" * 5000, str(tmp_path / "a\0b")):
        for call in calls:
            with pytest.raises(wg.CheckpointError, match=r"^cannot read .*(File name too long|embedded null byte)"):
                call(path)


def test_tensor_spec_takes_the_dtype_spellings_every_call_takes():
    """TensorSpec((2,), np.float32) (for attention_plan) was refused as "unknown dtype <class 'numpy.float32'>" where
    every call takes numpy's and torch's spellings of a dtype (args.dtype_name); a dtype wgraph lacks is the
    DtypeError naming TensorSpec's dtype."""
    for spelled, name in ((np.float32, "f32"), ("float16", "f16"), (np.dtype("<u4"), "u32"), ("bfloat16", "bf16")):
        assert wg.TensorSpec((2,), spelled) == wg.TensorSpec((2,), name)
        assert type(wg.TensorSpec((2,), spelled).dtype) is str
    q, k = wg.TensorSpec((9, 4, 64), np.float32), wg.TensorSpec((40, 2, 64), "float32")
    assert wg.ops.attention_plan(q, k, k, causal=True) == wg.ops.attention_plan(
        wg.TensorSpec((9, 4, 64), "f32"), wg.TensorSpec((40, 2, 64), "f32"), wg.TensorSpec((40, 2, 64), "f32"),
        causal=True)
    with pytest.raises(wg.DtypeError, match=r"^TensorSpec: dtype=<class 'numpy.float64'> must be one of"):
        wg.TensorSpec((2,), np.float64)
