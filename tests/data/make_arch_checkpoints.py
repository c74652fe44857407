"""Make the tiny checkpoints of tests/data/arch/ with Hugging Face transformers itself (run once; the tests
read the files and never import transformers or torch):

    python tests/data/make_arch_checkpoints.py      # needs torch and transformers (5.25 made the committed files)

For each case: a random model of the architecture saved by `save_pretrained` (model.safetensors and
config.json: transformers 5's format, RoPE settings inside `rope_parameters`), the same config rewritten the
way transformers 4 wrote it (config_v4.json: top-level `rope_theta`/`rope_scaling`, `torch_dtype`, no
`layer_types`), and golden.npz from transformers' own forward in float32 (eager attention) of the saved files:
`prompt`, `greedy` (16 greedy ids after it) and `logits` [len(prompt) + 15, vocab] of the prompt followed by
the greedy ids but the last (rows len(prompt) - 1 onwards are the logits each greedy id was chosen from).
The script checks that transformers reads both config formats to the same logits, bit for bit.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers

ROOT = Path(__file__).resolve().parent / "arch"
PROMPT = [5, 17, 42, 91, 3, 64, 21, 77]
NEW_TOKENS = 16
SHAPE = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64)

# name -> (config class, model class, storage dtype, config arguments). The arguments make each feature
# visible in 24 positions: windows of 4 keys, softcaps near the scores' size, Llama 3 bands within 16.
CASES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", torch.float32, dict(
        head_dim=8, rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 16})),
    "llama_bias": ("LlamaConfig", "LlamaForCausalLM", torch.bfloat16, dict(
        num_hidden_layers=1, attention_bias=True, mlp_bias=True, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 100000.0})),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", torch.bfloat16, dict(
        use_sliding_window=True, sliding_window=4, max_window_layers=1, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", torch.bfloat16, dict(
        head_dim=16, tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "mistral": ("MistralConfig", "MistralForCausalLM", torch.bfloat16, dict(
        head_dim=8, sliding_window=4, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", torch.bfloat16, dict(
        head_dim=16, query_pre_attn_scalar=24, attn_logit_softcapping=5.0, final_logit_softcapping=3.0,
        sliding_window=4, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
}


def randomize(model, one_plus_norms: bool, embed_std: float, seed: int) -> None:
    """Weights with O(1) activations (transformers' init, N(0, 0.02), makes near-uniform logits whose greedy
    ids are near-ties): matrices N(0, 1/fan_in), embeddings N(0, embed_std^2) (small enough that a tied table
    does not just repeat the last token), biases N(0, 0.1^2), norms near 1 (Gemma's norms hold w of (1 + w))."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith("norm.weight"):
                p.copy_(0.1 * r + (0.0 if one_plus_norms else 1.0))
            elif name.endswith(".bias"):
                p.copy_(0.1 * r)
            elif "embed_tokens" in name:
                p.copy_(embed_std * r)
            else:
                p.copy_(r / p.shape[1] ** 0.5)


def v4_config(v5: dict) -> dict:
    """The config as transformers 4 wrote it: top-level rope_theta and rope_scaling (null for default RoPE),
    torch_dtype, no layer_types (added in 4.53; the layers' kinds then follow from the other keys); Gemma 2
    configs of that time also held hidden_act beside hidden_activation, and cache_implementation."""
    d = {k: v for k, v in v5.items() if k not in ("rope_parameters", "dtype", "layer_types")}
    rope = dict(v5["rope_parameters"])
    d["rope_theta"] = rope.pop("rope_theta")
    d["rope_scaling"] = None if rope == {"rope_type": "default"} else rope
    d["torch_dtype"] = v5["dtype"]
    d["transformers_version"] = "4.46.3"
    if v5["model_type"] == "gemma2":
        d.pop("use_bidirectional_attention", None)
        d["hidden_act"] = v5["hidden_activation"]
        d["cache_implementation"] = "hybrid"
    return dict(sorted(d.items()))


def goldens(path: Path, model_cls) -> dict:
    model = model_cls.from_pretrained(path, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                             do_sample=False, pad_token_id=0, eos_token_id=None)
        greedy = out[0, len(PROMPT):].tolist()
        logits = model(torch.tensor([PROMPT + greedy[:-1]])).logits[0].numpy()
    # the full forward agrees with generate's cached decode on every id
    assert logits[len(PROMPT) - 1:].argmax(-1).tolist() == greedy, path
    return {"prompt": np.array(PROMPT, np.int64), "greedy": np.array(greedy, np.int64),
            "logits": logits.astype(np.float32)}


def check_defaults() -> None:
    """wgraph's table of what transformers assumes for an omitted key equals transformers' config classes."""
    from wgraph.models.architectures import ARCHITECTURES

    for arch in ARCHITECTURES.values():
        hf = getattr(transformers, arch.causal_lm.replace("ForCausalLM", "Config"))
        for key, ours in arch.defaults.items():
            theirs = getattr(hf, key, None)  # the class attribute: the value before __post_init__ derives any
            if key == "head_dim" and ours is None:
                probe = getattr(hf(hidden_size=64, num_attention_heads=4), "head_dim", None)  # Qwen2 has none
                theirs = None if probe in (None, 16) else probe
            elif key == "num_key_value_heads" and ours is None:
                theirs = None if hf(hidden_size=48, num_attention_heads=6).num_key_value_heads in (None, 6) else theirs
            assert ours == theirs, f"{arch.model_type}.{key}: wgraph assumes {ours!r}, transformers {theirs!r}"


def forward(case: str, config: dict) -> np.ndarray:
    """transformers' float32 logits of PROMPT from case's committed weights read with `config`."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(ROOT / case / "model.safetensors", tmp)
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        model_cls = getattr(transformers, CASES[case][1])
        model = model_cls.from_pretrained(tmp, dtype=torch.float32, attn_implementation="eager").eval()
        with torch.no_grad():
            return model(torch.tensor([PROMPT])).logits[0].numpy()


def check_refused() -> None:
    """What transformers does with the configs wgraph refuses for it (tests/test_transformers_goldens.py):
    partial_rotary_factor < 1 is ignored with default RoPE (every dim rotates: the same logits, bit for bit) and
    fails with llama3 RoPE; tie_word_embeddings=true over a file whose own lm_head.weight differs from the
    embedding does not tie them (the logits of the untied model, bit for bit)."""
    llama = json.loads((ROOT / "llama" / "config.json").read_text())
    assert not llama["tie_word_embeddings"]
    assert np.array_equal(forward("llama", dict(llama, tie_word_embeddings=True)), forward("llama", llama))
    for case in CASES:
        v5 = json.loads((ROOT / case / "config.json").read_text())
        rope = v5["rope_parameters"]
        partial = dict(v5, rope_parameters=dict(rope, partial_rotary_factor=0.5))
        if rope["rope_type"] == "default":
            assert np.array_equal(forward(case, partial), forward(case, v5)), case
        else:
            try:
                forward(case, partial)
            except RuntimeError:
                continue
            raise AssertionError(f"{case}: transformers ran partial_rotary_factor with {rope['rope_type']} RoPE")


def fails(case: str, config: dict) -> bool:
    """Whether transformers fails to build case's model from `config` (TypeError: it computes with a null)."""
    try:
        forward(case, config)
    except TypeError:
        return True
    return False


def check_nulls() -> None:
    """What transformers does with null fields wgraph refuses (tests/test_model_config.py): a null rope_theta in
    the RoPE object it uses, or at the top level with no theta in the object, and a null partial_rotary_factor in
    a llama3 object fail; a null top-level rope_theta beside the object's theta and a null partial_rotary_factor
    in a default object run as if absent (bit for bit); a null head_dim (Qwen2, Qwen3, Gemma 2) or a null
    num_key_value_heads (Gemma 2, Mistral) fail."""
    v4 = json.loads((ROOT / "llama" / "config_v4.json").read_text())
    for bad in (dict(v4, rope_theta=None, rope_scaling=None), dict(v4, rope_theta=None),
                dict(v4, rope_scaling={"type": "linear", "factor": 2.0, "rope_theta": None}),
                dict(v4, rope_scaling=dict(v4["rope_scaling"], partial_rotary_factor=None))):
        assert fails("llama", bad), bad
    same = dict(v4, rope_theta=None, rope_scaling=dict(v4["rope_scaling"], rope_theta=v4["rope_theta"]))
    assert np.array_equal(forward("llama", same), forward("llama", v4))
    qwen3 = json.loads((ROOT / "qwen3" / "config.json").read_text())
    plain = dict(qwen3, rope_parameters=dict(qwen3["rope_parameters"], partial_rotary_factor=None))
    assert np.array_equal(forward("qwen3", plain), forward("qwen3", qwen3))
    for case, key in (("qwen2", "head_dim"), ("qwen3", "head_dim"), ("gemma2", "head_dim"),
                      ("gemma2", "num_key_value_heads"), ("mistral", "num_key_value_heads")):
        v5 = json.loads((ROOT / case / "config.json").read_text())
        try:
            forward(case, dict(v5, **{key: None}))
        except Exception as e:  # Qwen2: TypeError (None ** ...); the others: StrictDataclassFieldValidationError
            assert isinstance(e, TypeError) or "expected int, got NoneType" in str(e), (case, key, e)
            continue
        raise AssertionError(f"{case}: transformers ran {key}=null")


def build_case(name: str, config_name: str, model_name: str, storage, args: dict, seed: int, out: Path,
               to_v4) -> tuple[dict, dict]:
    """Case `name`: a random transformers model of config class `config_name` with SHAPE and `args`, saved in
    `storage` into `out` with config_v4.json (`to_v4` of the saved config.json) and golden.npz (its logits and
    greedy ids, which transformers must read to the same from the v4 file); (config.json, goldens)."""
    cfg = getattr(transformers, config_name)(**{**SHAPE, **args})
    model_cls = getattr(transformers, model_name)
    torch.manual_seed(seed)
    model = model_cls(cfg)
    gemma = name.startswith("gemma")
    randomize(model, one_plus_norms=gemma, embed_std=0.02 if gemma else 0.1, seed=seed)
    shutil.rmtree(out, ignore_errors=True)
    model.to(storage).save_pretrained(out)
    (out / "generation_config.json").unlink(missing_ok=True)  # not read by wgraph's loader
    v5 = json.loads((out / "config.json").read_text())
    (out / "config_v4.json").write_text(json.dumps(to_v4(v5), indent=2) + "\n")
    gold = goldens(out, model_cls)
    with tempfile.TemporaryDirectory() as tmp:  # transformers reads the v4 file to the same model
        shutil.copy(out / "model.safetensors", tmp)
        shutil.copy(out / "config_v4.json", Path(tmp) / "config.json")
        gold4 = goldens(Path(tmp), model_cls)
    assert np.array_equal(gold["logits"], gold4["logits"]) and np.array_equal(gold["greedy"], gold4["greedy"]), name
    assert len(set(gold["greedy"].tolist())) > 3, f"{name}: a greedy sequence that barely changes: {gold['greedy']}"
    np.savez(out / "golden.npz", **gold)
    return v5, gold


def make(name: str, seed: int) -> None:
    config_name, model_name, storage, args = CASES[name]
    out = ROOT / name
    _, gold = build_case(name, config_name, model_name, storage, args, seed, out, v4_config)
    sizes = sum(p.stat().st_size for p in out.iterdir())
    print(f"{name}: greedy {gold['greedy'].tolist()}, {sizes} bytes", file=sys.stderr)


if __name__ == "__main__":
    print(f"transformers {transformers.__version__}, torch {torch.__version__}", file=sys.stderr)
    check_defaults()
    for i, case in enumerate(CASES):
        make(case, seed=100 + i)
    check_refused()
    check_nulls()
