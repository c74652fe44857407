"""A GGUF file as a checkpoint: for each architecture (llama, qwen2, qwen3, gemma2) a tiny random model written
as llama.cpp's converter writes it reads back as the Hugging Face config and tensors it came from; a llama GGUF
runs to the same logits as the same weights loaded from a Hugging Face directory; Llama 3's rope_freqs becomes
the rope_scaling it was made from; what does not fit is refused by name. (qwen2, qwen3 and gemma2 models are
built by the architecture-aware decoder builder; here their mapping of names and config is what is checked.)"""

import re

import gguf
import numpy as np
import pytest

import tiny_files
from llama_reference import inv_freq
from wgraph.errors import ArgumentError, CheckpointError
from wgraph.ggml_blocks import FORMATS
from wgraph.models import from_pretrained
from wgraph.models.config import LlamaConfig
from wgraph.models.gguf_checkpoint import GEMMA2_LAYER_NAMES, LAYER_NAMES, GGUFCheckpoint
from wgraph.models.random_checkpoint import write_checkpoint
from wgraph.models.tokenizer import Tokenizer

ARCHS = ("llama", "qwen2", "qwen3", "gemma2")


def _expected_config(arch: str, cfg: dict) -> dict:
    """What the metadata written from `cfg` must read back as (keys of transformers' config for `arch`)."""
    want = {"model_type": arch, "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                                                   "qwen3": "Qwen3ForCausalLM", "gemma2": "Gemma2ForCausalLM"}[arch]],
            **{k: cfg[k] for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                   "num_attention_heads", "num_key_value_heads", "head_dim", "rope_theta",
                                   "max_position_embeddings", "tie_word_embeddings")},
            "rms_norm_eps": float(np.float32(cfg["rms_norm_eps"]))}  # GGUF stores it as FLOAT32
    if arch == "llama":
        want.update(hidden_act="silu", attention_bias=False, mlp_bias=False)
    if arch == "qwen2":
        del want["head_dim"]
        want.update(hidden_act="silu", use_sliding_window=False, sliding_window=None)
    if arch == "qwen3":
        want.update(hidden_act="silu", attention_bias=False, use_sliding_window=False, sliding_window=None)
    if arch == "gemma2":
        want.update(hidden_activation="gelu_pytorch_tanh", attention_bias=False, query_pre_attn_scalar=cfg["head_dim"],
                    sliding_window=cfg["sliding_window"], attn_logit_softcapping=cfg["attn_logit_softcapping"],
                    final_logit_softcapping=cfg["final_logit_softcapping"],
                    layer_types=["sliding_attention", "full_attention"])
    return want


@pytest.mark.parametrize("arch", ARCHS)
def test_architecture_round_trip(tmp_path, arch):
    cfg = tiny_files.tiny_model_config(arch)
    weights = tiny_files.arch_weights(arch, cfg, seed=2)
    path = tiny_files.write_model(tmp_path / f"{arch}.gguf", arch, cfg, weights)
    ckpt = GGUFCheckpoint(path)
    assert ckpt.config == _expected_config(arch, cfg)
    for name, w in weights.items():
        got = ckpt.get(name, w.shape)
        assert got.dtype == np.float32
        if arch == "gemma2" and name.endswith("norm.weight"):  # llama.cpp's +1, then transformers' -1, in float32
            w = (w + np.float32(1)) - np.float32(1)
        assert np.array_equal(got, w), name
    assert ckpt.unused() == []
    with pytest.raises(CheckpointError, match=r"output_norm.weight.*has shape \[64\], the config needs \[4, 4\]"):
        GGUFCheckpoint(path).get("model.norm.weight", (4, 4))


@pytest.mark.parametrize("arch", ARCHS)
def test_names_agree_with_the_gguf_package(arch):
    """Our HF -> GGUF table against the gguf package's own tensor name map for the architecture."""
    ref = gguf.get_tensor_name_map(next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch), 3)
    names = GEMMA2_LAYER_NAMES if arch == "gemma2" else LAYER_NAMES
    for hf, ours in names.items():
        theirs = ref.get_name(f"model.layers.2.{hf}")
        if theirs is not None:
            assert theirs == f"blk.2.{ours}", hf
        else:
            assert arch != "qwen3" or "norm" not in hf, hf


def test_llama_gguf_runs_like_the_directory(tmp_path, dev):
    cfg = tiny_files.tiny_model_config("llama", vocab_size=701)
    weights = tiny_files.arch_weights("llama", cfg, seed=4)
    path = tiny_files.write_model(tmp_path / "m.gguf", "llama", cfg, weights,
                                  tokenizer=tiny_files.byte_level_tokenizer())
    from_dir = from_pretrained(write_checkpoint(tmp_path / "dir", dict(cfg, model_type="llama"), weights), dev,
                               dtype="f32", max_seq=32)
    from_gguf = from_pretrained(path, dev, dtype="f32", max_seq=32)
    ids = [5, 17, 300, 2, 41]
    a = from_dir.prefill(ids, all_logits=True).numpy()
    b = from_gguf.prefill(ids, all_logits=True).numpy()
    assert np.array_equal(a, b)  # the same float32 weights after un-permuting Q and K: the same numbers
    assert from_gguf.generate(ids, 6) == from_dir.generate(ids, 6)
    tok = from_gguf.tokenizer  # the file's vocabulary (test_tokenizer.py checks it against transformers)
    ids = tok.encode("Hello")
    assert ids == Tokenizer.from_directory(tiny_files.TINY_TOKENIZER).encode("Hello", add_special_tokens=False)
    text = from_gguf.generate_text("Hello", 4, stop_ids=[])
    assert from_gguf.last_stats["ids"] == from_dir.generate(ids, 4) and text == tok.decode(from_gguf.last_stats["ids"])


def test_quantized_tensors_are_dequantized_then_unpermuted(tmp_path):
    cfg = tiny_files.tiny_model_config("llama")
    weights = tiny_files.arch_weights("llama", cfg, seed=6)
    path = tiny_files.write_model(tmp_path / "q.gguf", "llama", cfg, weights, qtype=gguf.GGMLQuantizationType.Q8_0)
    ckpt = GGUFCheckpoint(path)
    q8 = gguf.GGMLQuantizationType.Q8_0
    for name in ("model.layers.1.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                 "model.layers.0.mlp.down_proj.weight", "model.embed_tokens.weight"):
        w = weights[name]
        # quantization blocks run along a row, so a permutation of rows commutes with it
        assert np.array_equal(ckpt.get(name, w.shape), gguf.quants.dequantize(gguf.quants.quantize(w, q8), q8))
    assert ckpt.file.tensors["blk.0.attn_q.weight"].type_name == "Q8_0"
    assert np.array_equal(ckpt.get("model.norm.weight", (64,)), weights["model.norm.weight"])  # 1-D stays F32


def q4_k_m_type(name: str) -> gguf.GGMLQuantizationType:
    """llama.cpp's Q4_K_M choice of type on a 2-layer model (layer 1 its one use_more_bits layer): the output
    (here the tied token_embd) Q6_K, attn_v and ffn_down Q6_K in layer 1, every other matrix Q4_K."""
    t = gguf.GGMLQuantizationType
    if name == "token_embd.weight" or name in ("blk.1.attn_v.weight", "blk.1.ffn_down.weight"):
        return t.Q6_K
    return t.Q4_K


def test_a_q4_k_m_file_keeps_its_k_quant_blocks(tmp_path, dev):
    """A file laid out as llama.cpp's most common type, Q4_K_M: its Q4_K and Q6_K matrices stay blocks on the GPU,
    the one stack of two formats ([q; k; v] of layer 1) is dequantized to f32, and the model decodes as the same
    file dequantized to f32 does."""
    cfg = dict(tiny_files.tiny_model_config("llama", vocab_size=300), hidden_size=256, intermediate_size=512,
               head_dim=64, tie_word_embeddings=True)
    weights = tiny_files.arch_weights("llama", cfg, seed=8)
    weights["model.embed_tokens.weight"] *= 0.1  # else a tied random model repeats the prompt's last token
    path = tiny_files.write_model(tmp_path / "q4_k_m.gguf", "llama", cfg, weights, qtype=q4_k_m_type)
    assert GGUFCheckpoint(path).file.tensors["blk.1.attn_v.weight"].type_name == "Q6_K"
    model = from_pretrained(path, dev, max_seq=32)
    assert model.block_formats == ("Q4_K", "Q6_K")
    assert model.mixed_stacks == {"l1.w_qkv": ("Q4_K", "Q6_K")}
    twin = from_pretrained(path, dev, dtype="f32", max_seq=32)
    ids = [7, 250, 31, 4]
    assert model.generate(ids, 10) == twin.generate(ids, 10)
    np.testing.assert_allclose(model.prefill(ids).numpy(), twin.prefill(ids).numpy(), rtol=1e-4, atol=1e-4)
    # x_int8: no Q4_K or Q6_K GEMV that rounds x is planned (the H200 measured them slower), so the step keeps
    # its kernels and its logits; float weights refuse the option
    rounded = from_pretrained(path, dev, max_seq=32, x_int8=True)
    assert rounded.x_int8 and not model.x_int8
    assert [r.variant for r in rounded.program.rows] == [r.variant for r in model.program.rows]
    assert rounded.x_int8_gemvs == 0
    from wgraph.models.cli import weights_label  # what the generate command says of it

    assert weights_label(rounded) == ("Q4_K/Q6_K blocks, x_int8 asked: no GEMV of this model rounds x (none is "
                                      "faster for its formats and shapes), the rest f32")
    assert np.array_equal(model.prefill(ids, all_logits=True).numpy(), rounded.prefill(ids, all_logits=True).numpy())
    with pytest.raises(ArgumentError, match="x_int8=True rounds x for the GEMVs of a GGUF file's block matrices; "
                                            "q4_k_m.gguf loads as float weights"):
        from_pretrained(path, dev, dtype="f32", x_int8=True)


def test_x_int8_rounds_x_for_the_wide_q4_0_gemv(tmp_path, dev, capsys):
    """A Q4_0 file loaded with x_int8: its one matrix of >= 8192 rows (the lm_head over a vocabulary of 8192) runs on
    the GEMV that rounds x to int8 (quant.toml's x_int8 entry for wide outputs below 65536 rows,
    quant_gemv_r1_wide_i8: no pre-pass, so the step keeps its dispatch count; ahead of a CPU adapter's own class
    too), every other on the plain model's
    kernel; the logits near the plain model's (x rounded per 32 weights) and not equal to them."""
    cfg = tiny_files.tiny_model_config("llama", vocab_size=8192)
    weights = tiny_files.arch_weights("llama", cfg, seed=9)
    path = tiny_files.write_model(tmp_path / "q4_0.gguf", "llama", cfg, weights, qtype=gguf.GGMLQuantizationType.Q4_0)
    model = from_pretrained(path, dev, max_seq=32)
    rounded = from_pretrained(path, dev, max_seq=32, x_int8=True)
    changed = [(a.variant, b.variant) for a, b in zip(model.program.rows, rounded.program.rows)
               if a.variant != b.variant]
    assert len(model.program.rows) == len(rounded.program.rows)
    plain = "quant_gemv_r1_cpu_q4_0" if dev.caps.is_cpu else "quant_gemv_r1_wide_q4_0"  # a CPU adapter's own class
    assert changed == [(plain, "quant_gemv_r1_wide_i8_q4_0")]
    assert (model.x_int8_gemvs, rounded.x_int8_gemvs) == (0, 1)
    # the logits of one row of x (the prompt's last position, then decode steps: the one-row GEMVs)
    a, b = ([m.prefill([7, 250, 31, 4]).numpy()] + [m.step().numpy() for _ in range(3)] for m in (model, rounded))
    a, b = np.concatenate(a), np.concatenate(b)
    assert 0 < np.abs(a - b).max() <= 0.05 * np.abs(a).max(), (np.abs(a - b).max(), np.abs(a).max())
    # the generate command says how many GEMVs round x (a Q4_0 file: the lm_head)
    from wgraph.__main__ import main as cli_main

    assert cli_main(["generate", str(path), "--prompt-ids", "3,4", "--max-new-tokens", "2", "--x-int8"]) == 0
    assert "(Q4_0 blocks, x rounded to int8 in 1 GEMV(s) of a step, the rest f32 weights)" in capsys.readouterr().err


SLOTS = {"attn_q": 0, "attn_k": 0, "attn_v": 0, "attn_output": 1, "ffn_gate": 2, "ffn_up": 2, "ffn_down": 3}
HF_SLOTS = {"q_proj": 0, "k_proj": 0, "v_proj": 0, "o_proj": 1, "gate_proj": 2, "up_proj": 2, "down_proj": 3}


@pytest.mark.parametrize("formats", [("Q3_K", "Q2_K", "IQ4_XS", "IQ4_NL", "IQ3_XXS", "IQ2_XXS", "IQ3_S", "IQ2_XS"),
                                     ("IQ2_S", "IQ1_M", "IQ1_S", "Q5_K")])
def test_small_and_non_uniform_formats_keep_their_blocks(tmp_path, dev, formats):
    """The formats of llama.cpp's Q2_K, Q3_K_S / Q3_K_M, IQ4 and IQ1-IQ3 files stay blocks on the GPU (they were
    dequantized to f32 on load: 5-20x their bytes): 4 formats a layer (its [q; k; v], o_proj, [gate; up] and
    down_proj, each a stack of one format), the tied output Q6_K; the model decodes as the same file dequantized
    to f32 does, and reads each matrix's own bytes a token."""
    cfg = dict(tiny_files.tiny_model_config("llama", vocab_size=300), hidden_size=256, intermediate_size=512,
               head_dim=64, tie_word_embeddings=True, num_hidden_layers=len(formats) // 4)
    weights = tiny_files.arch_weights("llama", cfg, seed=9)
    weights["model.embed_tokens.weight"] *= 0.1
    t = gguf.GGMLQuantizationType

    def layered(name):   # token_embd (the output) and the 1-D norms, which stay F32 whatever this says: Q6_K
        if not name.startswith("blk."):
            return t.Q6_K
        _, layer, role, _ = name.split(".")
        return t[formats[4 * int(layer) + SLOTS[role]]] if role in SLOTS else t.Q6_K

    path = tiny_files.write_model(tmp_path / "m.gguf", "llama", cfg, weights, qtype=layered)
    model = from_pretrained(path, dev, max_seq=32)
    assert model.block_formats == tuple(sorted({*formats, "Q6_K"})) and model.mixed_stacks == {}
    twin = from_pretrained(path, dev, dtype="f32", max_seq=32)
    ids = [7, 250, 31, 4]
    assert model.generate(ids, 10) == twin.generate(ids, 10)
    np.testing.assert_allclose(model.prefill(ids).numpy(), twin.prefill(ids).numpy(), rtol=1e-4, atol=1e-4)

    def nbytes(name, w):   # the norms f32; a matrix its format's blocks
        if w.ndim == 1:
            return 4 * w.size
        fmt = FORMATS[formats[4 * int(name.split(".")[2]) + HF_SLOTS[name.split(".")[4]]]]
        return w.size // fmt.block_weights * fmt.block_bytes

    want = sum(nbytes(name, w) for name, w in weights.items() if name.startswith("model.layers."))
    want += weights["model.norm.weight"].size * 4 + weights["model.embed_tokens.weight"].size // 256 * 210
    assert model.weight_bytes_per_token == want


def _llama3_factors(theta, d, factor, low, high, orig):
    """llama.cpp's convert_hf_to_gguf.py rope_freqs for rope_type llama3 (float32 frequencies, as it computes)."""
    freqs = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float32) / d))
    out = []
    for f in freqs.astype(np.float64):
        wavelen = 2 * np.pi / f
        if wavelen < orig / high:
            out.append(1.0)
        elif wavelen > orig / low:
            out.append(factor)
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


def test_llama3_rope_freqs_become_rope_scaling(tmp_path):
    cfg = dict(tiny_files.tiny_model_config("llama"), hidden_size=128, num_attention_heads=2, num_key_value_heads=1,
               head_dim=64, rope_theta=500000.0)
    weights = tiny_files.arch_weights("llama", cfg, seed=1)
    factors = _llama3_factors(500000.0, 64, 8.0, 1.0, 4.0, 8192)
    path = tiny_files.write_model(tmp_path / "l3.gguf", "llama", cfg, dict(weights, **{"rope_freqs.weight": factors}))
    scaling = GGUFCheckpoint(path).config["rope_scaling"]
    assert scaling == {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192}
    full = dict(cfg, rope_scaling=scaling)
    np.testing.assert_allclose(LlamaConfig.from_dict(dict(full, model_type="llama")).inv_freq(), inv_freq(full),
                               rtol=1e-12)
    bad = factors.copy()
    bad[5] *= 1.5
    path = tiny_files.write_model(tmp_path / "bad.gguf", "llama", cfg, dict(weights, **{"rope_freqs.weight": bad}))
    with pytest.raises(CheckpointError, match="rope_freqs does not follow Llama 3"):
        GGUFCheckpoint(path)


@pytest.mark.parametrize("arch", ["qwen2", "qwen3", "gemma2"])
def test_rope_freqs_outside_llama_are_refused(tmp_path, arch):
    """llama.cpp reads rope_freqs (Llama 3's per-frequency divisors) for its llama architecture only; a qwen2,
    qwen3 or gemma2 file holding it (which llama.cpp's loader refuses: an unexpected tensor) was read as Llama 3
    rope scaling, a model no other reader makes. Refused, naming the tensor and the architecture."""
    cfg = dict(tiny_files.tiny_model_config(arch), hidden_size=128, num_attention_heads=2, num_key_value_heads=1,
               head_dim=64, rope_theta=500000.0)
    factors = _llama3_factors(500000.0, 64, 8.0, 1.0, 4.0, 8192)
    weights = dict(tiny_files.arch_weights(arch, cfg, seed=1), **{"rope_freqs.weight": factors})
    path = tiny_files.write_model(tmp_path / "f.gguf", arch, cfg, weights)
    with pytest.raises(CheckpointError, match=rf"f.gguf: tensor 'rope_freqs.weight' in a {arch} file: only "
                                              rf"llama.cpp's llama architecture reads it"):
        GGUFCheckpoint(path)


def test_rope_freqs_whose_fit_has_no_blend_band_are_refused():
    """Factors whose fitted high_freq_factor is 1.0 to the 6 digits kept (a band of width 0) are refused as not Llama
    3's: the check divided by high - 1 = 0 first (a RuntimeWarning, then a comparison with infinities)."""
    import warnings

    from wgraph.models.gguf_checkpoint import _llama3_from_factors

    factors = np.sort(np.exp(np.random.default_rng(5).uniform(0, 80, 64))).astype(np.float32).astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(CheckpointError, match="rope_freqs does not follow Llama 3"):
            _llama3_from_factors(factors, {"head_dim": 128, "rope_theta": 1.0000001}, "x.gguf")


def test_llama_file_with_a_window_is_llama(tmp_path):
    """llama.cpp's llama architecture reads no sliding window (Mistral files run with full attention) and
    transformers' GGUF loader neither: the key is not read (tests/data/make_gguf_goldens.py checks transformers)."""
    cfg = tiny_files.tiny_model_config("llama")
    path = tiny_files.write_model(tmp_path / "mistral.gguf", "llama", cfg, tiny_files.arch_weights("llama", cfg),
                                  extra={"llama.attention.sliding_window": 4096})
    assert GGUFCheckpoint(path).config == _expected_config("llama", cfg)


@pytest.mark.parametrize("case", list(tiny_files.gguf_golden_cases()))
def test_matches_transformers_gguf_loader(case, tmp_path, dev):
    """Tiny GGUF files of each architecture against transformers' logits for them (tests/data/make_gguf_goldens.py):
    the last prompt position's logits within 1e-4 of their largest and 8 greedy ids; llama's Q4_K as blocks."""
    import hashlib

    arch, cfg, weights, kwargs = tiny_files.gguf_golden_cases()[case]
    path = tiny_files.write_model(tmp_path / f"{case}.gguf", arch, cfg, weights, **kwargs)
    golden = np.load(tiny_files.GGUF_GOLDENS)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == str(golden[f"{case}_sha256"])  # the file it was made from
    model = from_pretrained(path, dev, dtype=None if case == "llama_q4_k" else "f32", max_seq=32)
    prompt = [int(i) for i in golden["prompt"]]
    want = golden[f"{case}_logits"]
    got = model.prefill(prompt).numpy().reshape(-1)
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    assert model.generate(prompt, 8) == [int(i) for i in golden[f"{case}_greedy"]]


def test_gemma2_file_with_an_output_tensor_is_refused(tmp_path):
    """llama.cpp's gemma2 has no output tensor (the gguf package's tensor list for it neither: the output is
    token_embd) and transformers' GGUF loader leaves lm_head at its random initialization for such a file
    (tests/data/make_gguf_goldens.py checks it); wgraph used the tensor. Refused, by name."""
    cfg = tiny_files.tiny_model_config("gemma2")
    weights = tiny_files.arch_weights("gemma2", cfg)
    head = weights.pop("lm_head.weight", None)
    head = head if head is not None else np.ones((cfg["vocab_size"], cfg["hidden_size"]), np.float32)
    path = tiny_files.write_model(tmp_path / "g.gguf", "gemma2", cfg, weights, extra_tensors={"output.weight": head})
    with pytest.raises(CheckpointError, match=r"g.gguf: tensor 'output.weight'.*gemma2.*token_embd"):
        GGUFCheckpoint(path)


def test_other_architectures_are_refused(tmp_path):
    path = tiny_files.write_tokenizer_gguf(tmp_path / "phi3.gguf", tiny_files.spm_tokenizer(), "phi3")
    with pytest.raises(CheckpointError, match=r"general.architecture 'phi3' is not supported"):
        GGUFCheckpoint(path)


@pytest.mark.parametrize("extra,match", [
    ({"llama.expert_count": 8}, "mixture-of-experts"),
    ({"llama.rope.dimension_count": 8}, r"rope.dimension_count=8 differs from the head dim 16"),
    # the supported types: the message said 'yarn' was one, which the config rules then refuse
    ({"llama.rope.scaling.type": "longrope"}, r"rope.scaling.type 'longrope' is not supported \(supported: 'none', "
                                              r"'linear' and Llama 3's rope_freqs; 'yarn' is read, then refused"),
    ({"llama.block_count": 0}, r"block_count=0 must be in"),
    ({"llama.context_length": "long"}, "context_length' must be one integer, got STRING"),
    ({"llama.expert_count": [0, 0]}, r"expert_count' must be one integer, got an array"),   # raised ValueError
    ({"llama.attention.causal": False}, r"attention.causal=False: only causal \(decoder\) attention"),
    ({"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 2.0, "llama.rope.scaling.attn_factor": 3.0},
     r"attn_factor=3.0 scales the rotated values \(llama.cpp's mscale\)"),
    # yarn of factor 1 was read as no scaling, its attn_factor dropped with no error (llama.cpp still scales by it)
    ({"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 1.0, "llama.rope.scaling.attn_factor": 0.5,
      "llama.rope.scaling.original_context_length": 64},
     r"attn_factor=0.5 scales the rotated values \(llama.cpp's mscale\); wgraph takes it with yarn scaling \(factor "
     r"!= 1\) only"),
])
def test_bad_metadata_is_refused_by_name(tmp_path, extra, match):
    cfg = tiny_files.tiny_model_config("llama")
    path = tiny_files.write_model(tmp_path / "bad.gguf", "llama", cfg, tiny_files.arch_weights("llama", cfg),
                                  extra=extra)
    with pytest.raises(CheckpointError, match=match):
        GGUFCheckpoint(path)


@pytest.mark.parametrize("extra,want", [
    ({"llama.rope.scaling.factor": 4.0}, {"rope_type": "linear", "factor": 4.0}),    # the type defaults to linear
    ({"llama.rope.scale_linear": 2.0}, {"rope_type": "linear", "factor": 2.0}),      # the older key
    ({"llama.rope.scaling.type": "yarn", "llama.rope.scale_linear": 2.0,              # yarn stays yarn
      "llama.rope.scaling.original_context_length": 64},
     {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64}),
    ({"llama.rope.scaling.type": "none", "llama.rope.scaling.factor": 4.0}, None),
])
def test_rope_scaling_keys_read_as_llama_cpp_reads_them(tmp_path, extra, want):
    """llama.cpp (llama-model.cpp, load_hparams) takes rope.scaling.type as linear when absent and the factor from
    rope.scaling.factor, else rope.scale_linear, whatever the type: a factor without a type was ignored, and
    scale_linear turned yarn into linear."""
    cfg = tiny_files.tiny_model_config("llama")
    path = tiny_files.write_model(tmp_path / "r.gguf", "llama", cfg, tiny_files.arch_weights("llama", cfg),
                                  extra=extra)
    assert GGUFCheckpoint(path).config.get("rope_scaling") == want


def test_config_refusals_of_a_gguf_file_name_the_file(tmp_path, dev):
    """Metadata the config layer refuses (yarn RoPE) was reported as "config.json: rope_scaling ..." for a GGUF
    file, which has no config.json: the message says which file and that its metadata was read as a config."""
    cfg = tiny_files.tiny_model_config("llama")
    path = tiny_files.write_model(tmp_path / "y.gguf", "llama", cfg, tiny_files.arch_weights("llama", cfg),
                                  extra={"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": 2.0,
                                         "llama.rope.scaling.original_context_length": 64})
    with pytest.raises(CheckpointError, match=r"^GGUF file y.gguf: its metadata, read as a Hugging Face config: "
                                              r"config.json: rope_scaling rope_type \"yarn\" is not supported"):
        from_pretrained(path, dev, dtype="f32", max_seq=16)


def test_unused_tensors_are_refused(tmp_path, dev):
    cfg = tiny_files.tiny_model_config("llama")
    weights = dict(tiny_files.arch_weights("llama", cfg), **{"model.layers.0.mlp.up_proj.bias": np.ones(128, "f4")})
    path = tiny_files.write_model(tmp_path / "b.gguf", "llama", cfg, weights)
    assert GGUFCheckpoint(path).config["mlp_bias"] is True  # the tensor says so: every MLP projection has one
    with pytest.raises(CheckpointError, match=r"gate_proj.bias' \(blk.0.ffn_gate.bias\) is missing"):
        from_pretrained(path, dev, dtype="f32", max_seq=16)
    path = tiny_files.write_model(tmp_path / "n.gguf", "llama", cfg, tiny_files.arch_weights("llama", cfg),
                                  extra_tensors={"blk.0.attn_q_norm.weight": np.ones(16, np.float32)})
    with pytest.raises(CheckpointError, match=r"tensors \['blk.0.attn_q_norm.weight'\].*not used"):
        from_pretrained(path, dev, dtype="f32", max_seq=16)


@pytest.mark.parametrize("extra", [{"blk.0.attn_q_norm.weight": np.ones(16, np.float32)},
                                   {"blk.0.attn_output.bias": np.ones(64, np.float32)}], ids=["q_norm", "o_bias"])
def test_unused_tensors_are_refused_with_blocks_kept(tmp_path, dev, extra):
    """A llama file whose matrices stay Q8_0 blocks (no dtype: a QuantizedLlama): a tensor the config leaves out
    (q_norm; an o_proj bias without the q/k/v ones attention_bias needs) is refused as on the float path. Every
    tensor of the file was read into the weights, so none was left unused, and the model ran without it."""
    cfg = tiny_files.tiny_model_config("llama")
    path = tiny_files.write_model(tmp_path / "n.gguf", "llama", cfg, tiny_files.arch_weights("llama", cfg),
                                  qtype=gguf.GGMLQuantizationType.Q8_0, extra_tensors=extra)
    for dtype in (None, "f32"):
        with pytest.raises(CheckpointError, match=rf"tensors \['{next(iter(extra))}'\].*not used"):
            from_pretrained(path, dev, dtype=dtype, max_seq=16)


@pytest.mark.parametrize("dtype", [None, "f32"])
def test_tensor_shapes_are_checked_before_the_model_allocates(tmp_path, dev, monkeypatch, dtype):
    """Metadata declaring a larger model than the file's tensors (feed_forward_length 8192, 40 blocks, beside
    tensors of 128 and 2) is refused from the header before the program is compiled: it allocated every weight and
    cache of the declared model first (127 MB here for a 300 KB file), as the directory path never does."""
    import wgraph.graph.graph

    cfg = tiny_files.tiny_model_config("llama")
    path = tiny_files.write_model(tmp_path / "big.gguf", "llama", cfg, tiny_files.arch_weights("llama", cfg),
                                  qtype=gguf.GGMLQuantizationType.Q8_0,
                                  extra={"llama.feed_forward_length": 8192, "llama.block_count": 40})

    def compile_(*a, **k):
        raise AssertionError("the program was compiled before the tensors' shapes were checked")

    monkeypatch.setattr(wgraph.graph.graph.Graph, "compile", compile_)
    with pytest.raises(CheckpointError, match=r"gate_proj.weight' \(blk.0.ffn_gate.weight\) in big.gguf has shape "
                                              r"\[128, 64\], the config needs \[8192, 64\]"):
        from_pretrained(path, dev, dtype=dtype, max_seq=16)


def _gemma2_file(tmp_path, extra, layers=5):
    cfg = dict(tiny_files.tiny_model_config("gemma2"), num_hidden_layers=layers)
    return tiny_files.write_model(tmp_path / "g.gguf", "gemma2", cfg, tiny_files.arch_weights("gemma2", cfg),
                                  extra=extra)


@pytest.mark.parametrize("pattern", [None, 0, 1, 2, 3])
def test_gemma2_sliding_window_pattern_is_read(tmp_path, pattern):
    """llama.cpp's gemma2 (src/models/gemma2.cpp) reads attention.sliding_window_pattern (default 2) and makes layer
    il sliding where pattern == 0 or il % pattern < pattern - 1 (llama_hparams::set_swa_pattern); wgraph ignored the
    key and always alternated."""
    extra = {} if pattern is None else {"gemma2.attention.sliding_window_pattern": pattern}
    config = LlamaConfig.from_dict(GGUFCheckpoint(_gemma2_file(tmp_path, extra)).config)
    p = 2 if pattern is None else pattern
    want = tuple(32 if p == 0 or i % p < p - 1 else 0 for i in range(5))
    assert tuple(config.window(i) for i in range(5)) == want


@pytest.mark.parametrize("extra,match", [
    ({"gemma2.rope.freq_base_swa": 1e6}, r"rope.freq_base_swa=1000000.0 .*rope.freq_base 10000.0"),
    ({"gemma2.rope.dimension_count_swa": 8}, r"rope.dimension_count_swa=8 .*16"),
    ({"gemma2.attention.key_length_swa": 8}, r"attention.key_length_swa=8 .*16"),
    ({"gemma2.attention.value_length_swa": 8}, r"attention.value_length_swa=8 .*16"),
    ({"gemma2.attention.sliding_window_pattern": [1, 0, 1, 0, 1]}, r"sliding_window_pattern' must be one integer"),
])
def test_gemma2_sliding_layer_settings_that_differ_are_refused(tmp_path, extra, match):
    """llama.cpp gives a gemma2 file's sliding layers their own RoPE base (rope.freq_base_swa) and head sizes
    (attention.key_length_swa / value_length_swa, rope.dimension_count_swa); wgraph read none of them, so sliding
    layers silently took the full layers' values. Refused unless they equal them."""
    with pytest.raises(CheckpointError, match=match):
        GGUFCheckpoint(_gemma2_file(tmp_path, extra))
    same = {k: 10000.0 if k.endswith("freq_base_swa") else 16 for k in extra if not k.endswith("pattern")}
    if same:
        assert GGUFCheckpoint(_gemma2_file(tmp_path, same)).config["rope_theta"] == 10000.0


@pytest.mark.parametrize("arch", ARCHS)
def test_an_architecture_key_wgraph_does_not_read_is_refused_by_name(tmp_path, arch):
    """llama.cpp reads an architecture's `{arch}.*` keys into the model's math (attention.scale replaces
    1/sqrt(head_dim), logit_scale divides the logits, ...). wgraph read the keys it knows and ignored the rest, so
    such a file loaded as if the key were absent: now a CheckpointError naming the key and its value. Keys with no
    math (rope.scaling.finetuned, expert_used_count) and other namespaces (general.*) still load."""
    cfg = tiny_files.tiny_model_config(arch)
    weights = tiny_files.arch_weights(arch, cfg, seed=2)
    for extra in ({f"{arch}.attention.scale": 0.125}, {f"{arch}.logit_scale": 2.0},
                  {f"{arch}.rope.scaling.yarn_log_multiplier": 0.5}):
        path = tiny_files.write_model(tmp_path / f"{arch}-bad.gguf", arch, cfg, weights, extra=extra)
        ((key, value),) = extra.items()
        with pytest.raises(CheckpointError, match=rf"{re.escape(key)}={value!r} is a key wgraph does not read for "
                                                  rf"{arch} \(llama.cpp reads an architecture's keys into its math\)"):
            GGUFCheckpoint(path)
    fine = {f"{arch}.rope.scaling.finetuned": False, f"{arch}.expert_used_count": 0, "general.anything": 3}
    path = tiny_files.write_model(tmp_path / f"{arch}-fine.gguf", arch, cfg, weights, extra=fine)
    assert GGUFCheckpoint(path).config == _expected_config(arch, cfg)


@pytest.mark.parametrize("layers,hidden,heads,kv_heads,head_dim,scalar", [
    (46, 4608, 32, 16, 128, 144),   # gemma-2-27b: its config.json's query_pre_attn_scalar is hidden / heads
    (42, 3584, 16, 8, 256, 256),    # gemma-2-9b and gemma-2-2b: head_dim
    (26, 2304, 8, 4, 256, 256),
])
def test_gemma2_query_scale_follows_the_published_configs(tmp_path, layers, hidden, heads, kv_heads, head_dim, scalar):
    """A Gemma 2 GGUF has no query_pre_attn_scalar key: llama.cpp scales queries by 1/sqrt(hidden / heads) for the
    46-layer 27B and 1/sqrt(head_dim) otherwise. The expected values are the Hugging Face config.json's of each size
    (metadata of the real sizes, one tiny tensor: no weights are read)."""
    w = gguf.GGUFWriter(str(tmp_path / "g.gguf"), "gemma2")
    for key, value in (("block_count", layers), ("embedding_length", hidden), ("attention.head_count", heads),
                       ("attention.head_count_kv", kv_heads), ("attention.key_length", head_dim),
                       ("attention.value_length", head_dim), ("context_length", 8192),
                       ("feed_forward_length", 4 * hidden)):
        w.add_uint32(f"gemma2.{key}", value)
    w.add_float32("gemma2.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_tensor("token_embd.weight", np.zeros((2, hidden), np.float32))
    for step in (w.write_header_to_file, w.write_kv_data_to_file, w.write_tensors_to_file, w.close):
        step()
    cfg = GGUFCheckpoint(tmp_path / "g.gguf").config
    assert (cfg["query_pre_attn_scalar"], cfg["head_dim"]) == (scalar, head_dim)
