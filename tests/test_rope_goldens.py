"""RoPE at long-context positions (up to 131071) against transformers' own rotary embedding
(tests/data/rope_goldens.npz, made by tests/data/make_rope_goldens.py) and against float64 numpy written from the
formulas (RoFormer's theta ** (-2i / d), linear interpolation's division, Llama 3's bands: llama_reference.py).

wgraph computes the frequencies and the angles position x frequency in float64 and rounds cos and sin once to f32
(Llama.rope_tables); the kernels only index the table by the u32 position, so no position is ever an f32.
transformers computes inv_freq and the angles in float32: at position 131071 its rotation is off the exact one by
~1e-3 (measured here), wgraph's by ~1e-7. wgraph follows float64, and so is within transformers' own error of
transformers' result."""

from pathlib import Path
from types import SimpleNamespace

import attrs
import numpy as np
import pytest

import wgraph as wg
from llama_reference import _rope
from llama_reference import inv_freq as llama3_inv_freq
from wgraph.models import DecoderConfig
from wgraph.models.llama import Llama

with np.load(Path(__file__).parent / "data" / "rope_goldens.npz") as _g:
    GOLDEN = {k: _g[k] for k in _g.files}
POSITIONS = GOLDEN["positions"]
CASES = sorted(k[:-len("_inv_freq")] for k in GOLDEN if k.endswith("_inv_freq"))
# make_rope_goldens.py's rope types
TYPES = {"default": {}, "linear": {"factor": 4.0},
         "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 8192}}


def case(name: str) -> tuple[float, int, str, int]:
    """(rope_theta, head_dim, rope_type, rotary dims) of a golden case, from its name."""
    kind, theta, head_dim, *quarter = name.split("_")
    return float(theta), int(head_dim), kind, int(head_dim) // (4 if quarter else 1)


def config(name: str) -> DecoderConfig:
    theta, head_dim, kind, rd = case(name)
    cfg = DecoderConfig.from_dict({
        "model_type": "llama", "vocab_size": 8, "hidden_size": 2 * head_dim, "intermediate_size": 8,
        "num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": head_dim, "max_position_embeddings": 131072,
        "rope_parameters": {"rope_type": kind, "rope_theta": theta, **TYPES[kind]}})
    # a part of each head rotates only in code (config.json's partial_rotary_factor has no one meaning)
    return cfg if rd == head_dim else attrs.evolve(cfg, rotary_dim=rd)


def exact_inv_freq(name: str) -> np.ndarray:
    """float64 frequencies from the formulas, over the rotary dims."""
    theta, _, kind, rd = case(name)
    if kind == "llama3":
        return llama3_inv_freq({"head_dim": rd, "hidden_size": rd, "num_attention_heads": 1, "rope_theta": theta,
                                "rope_scaling": TYPES["llama3"]})
    inv = theta ** (-np.arange(0, rd, 2, dtype=np.float64) / rd)
    return inv / TYPES[kind].get("factor", 1.0)


def x_vector(head_dim: int) -> np.ndarray:
    return np.random.default_rng(head_dim).standard_normal(head_dim).astype(np.float32)  # make_rope_goldens.py's


def exact_q(name: str) -> np.ndarray:
    """x_vector rotated at each of POSITIONS, in float64 [P, head_dim]."""
    _, head_dim, _, _ = case(name)
    x = np.tile(x_vector(head_dim).astype(np.float64), (len(POSITIONS), 1))[:, None, :]
    return _rope(x, POSITIONS.astype(np.float64), exact_inv_freq(name))[:, 0]


def test_the_golden_cases_are_read():
    assert len(CASES) == 14 and list(POSITIONS) == [1, 8191, 32767, 131071]
    assert {case(n)[2] for n in CASES} == set(TYPES) and {case(n)[3] for n in CASES} == {32, 64, 128}


@pytest.mark.parametrize("name", CASES)
def test_frequencies_are_transformers_and_the_formulas(name):
    """default / linear / llama3 frequencies for bases 1e4, 5e5 and 1e6, head dims 64 and 128 and a quarter of the
    head rotating: transformers' (float32) to its rounding, the float64 formulas' exactly."""
    ours = config(name).inv_freq()
    assert ours.dtype == np.float64 and ours.shape == GOLDEN[f"{name}_inv_freq"].shape
    np.testing.assert_allclose(ours, GOLDEN[f"{name}_inv_freq"], rtol=6e-7, atol=0)
    np.testing.assert_allclose(ours, exact_inv_freq(name), rtol=1e-13, atol=0)


@pytest.mark.parametrize("name", CASES)
def test_transformers_rotation_at_large_positions_is_off_by_its_f32_angles(name):
    """The golden rotations agree with the float64 formulas to transformers' float32 angle error: ~1e-7 at
    position 1, up to ~1e-2 at 131071 (so the file is the formulas' model, and the error below is transformers')."""
    err = np.abs(GOLDEN[f"{name}_q"].astype(np.float64) - exact_q(name)).max(axis=1)
    scale = np.abs(x_vector(case(name)[1])).max()
    assert err[0] < 1e-6 * scale and err[-1] < 2e-2 * scale, err


@pytest.mark.parametrize("name", ["llama3_500000_128", "linear_500000_128_quarter"])
def test_the_models_rotation_at_large_positions_follows_float64(dev, name):
    """The model's cos / sin tables (Llama.rope_tables, 131072 positions) through the rope kernel at positions 1 ..
    131071 (an int position and a GPU one): within f32 rounding of the float64 rotation, and so no farther from
    transformers' result than transformers is from the exact one."""
    cfg = config(name)
    _, head_dim, _, rd = case(name)
    cos, sin = Llama.rope_tables(SimpleNamespace(max_seq=int(POSITIONS[-1]) + 1, config=cfg))
    assert cos.shape == (POSITIONS[-1] + 1, rd // 2) and cos.dtype == np.float32
    tc, ts = dev.tensor(cos), dev.tensor(sin)
    x = dev.tensor(x_vector(head_dim)[None, None, :])
    got = np.stack([wg.ops.rope(x, tc, ts, pos=int(p), rotary_dim=rd).numpy()[0, 0] for p in POSITIONS])
    at = dev.tensor(np.array([POSITIONS[-1] - 5], np.uint32))
    on_gpu = wg.ops.rope(x, tc, ts, pos=at, pos_offset=5, rotary_dim=rd).numpy()[0, 0]
    assert on_gpu.tobytes() == got[-1].tobytes()
    exact, theirs = exact_q(name), GOLDEN[f"{name}_q"].astype(np.float64)
    scale = np.abs(x_vector(head_dim)).max()
    err = np.abs(got - exact)
    assert err.max() < 2e-6 * scale, err.max(axis=1)
    their_err = np.abs(theirs - exact)
    assert their_err[-1].max() > 50 * err[-1].max()   # transformers' f32 angles, not wgraph's, carry the error
    assert np.all(np.abs(got - theirs) <= their_err + 2e-6 * scale)
