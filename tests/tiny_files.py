"""Small model and tokenizer files for the tests and the golden scripts. GGUF files are written with the `gguf`
package's GGUFWriter: a model converted from Hugging Face weights as llama.cpp's convert_hf_to_gguf.py converts it
(Q/K rows of `llama` permuted, Gemma 2's norms plus one), tokenizer metadata from tests/data/tiny_tokenizer or the
tiny SentencePiece-style vocabulary; and a variant of the tiny tokenizer directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gguf
import numpy as np

from wgraph.ggml_blocks import quantize

DATA = Path(__file__).resolve().parent / "data"
TINY_TOKENIZER = DATA / "tiny_tokenizer"
TINY_SPM = DATA / "tiny_spm_vocab.json"
GGUF_GOLDENS = DATA / "gguf_goldens.npz"
GGUF_GOLDEN_PROMPT = [5, 17, 42, 91, 3, 64, 21, 77, 12, 250]


def permute(w: np.ndarray, n_head: int, n_head_kv: int | None = None) -> np.ndarray:
    """llama.cpp's LlamaModel.permute (convert_hf_to_gguf.py): HF's rotate-half Q/K rows -> GGML's pairs."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def gguf_tensors(arch: str, cfg: dict, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """HF-named float32 weights -> GGUF-named arrays, transformed as llama.cpp's converter transforms them."""
    name_map = gguf.get_tensor_name_map(next(k for k, v in gguf.MODEL_ARCH_NAMES.items() if v == arch),
                                        cfg["num_hidden_layers"])
    out = {}
    for hf, w in weights.items():
        base, suffix = hf.rsplit(".", 1)
        name = name_map.get_name(base)
        assert name is not None, hf
        w = np.asarray(w, np.float32)
        if arch == "llama" and base.endswith("q_proj"):
            w = permute(w, cfg["num_attention_heads"], cfg["num_attention_heads"])
        if arch == "llama" and base.endswith("k_proj"):
            w = permute(w, cfg["num_attention_heads"], cfg.get("num_key_value_heads"))
        if arch == "gemma2" and hf.endswith("norm.weight"):
            w = w + np.float32(1)
        out[f"{name}.{suffix}"] = w
    return out


def write_model(path, arch: str, cfg: dict, weights: dict[str, np.ndarray], *, qtype=None, extra=None,
                tokenizer: dict | None = None, extra_tensors: dict | None = None, split_max_tensors: int = 0) -> Path:
    """A GGUF model file: metadata from the HF config `cfg` (keys as llama.cpp writes them), the weights as
    `qtype` (default F32; a function of the GGUF tensor name for one type a tensor; 1-D tensors stay F32 as
    llama.cpp keeps them; the K-quants and IQs by wgraph's quantizers, gguf has none), `extra` metadata {key: value},
    `extra_tensors` {GGUF name: float32 array} written as they are; split_max_tensors > 0: split as llama.cpp's
    gguf-split splits, that many tensors a shard, into `<stem>-00001-of-0000n.gguf`, ... (the first one's path is
    returned)."""
    heads = cfg["num_attention_heads"]
    u32, f32 = gguf.GGUFValueType.UINT32, gguf.GGUFValueType.FLOAT32
    meta = {"context_length": (cfg["max_position_embeddings"], u32), "embedding_length": (cfg["hidden_size"], u32),
            "block_count": (cfg["num_hidden_layers"], u32), "feed_forward_length": (cfg["intermediate_size"], u32),
            "attention.head_count": (heads, u32), "attention.head_count_kv": (cfg.get("num_key_value_heads", heads), u32),
            "attention.layer_norm_rms_epsilon": (cfg["rms_norm_eps"], f32),
            "rope.freq_base": (cfg.get("rope_theta", 10000.0), f32), "vocab_size": (cfg["vocab_size"], u32)}
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    if arch == "llama":
        meta["rope.dimension_count"] = (head_dim, u32)
    else:
        meta["attention.key_length"] = meta["attention.value_length"] = (head_dim, u32)
    if arch == "gemma2":
        meta.update({"attention.sliding_window": (cfg["sliding_window"], u32),
                     "attn_logit_softcapping": (cfg["attn_logit_softcapping"], f32),
                     "final_logit_softcapping": (cfg["final_logit_softcapping"], f32)})
    meta = {f"{arch}.{k}": v for k, v in meta.items()}
    for key, value in (extra or {}).items():  # extra keys replace ours
        meta[key] = (value, gguf.GGUFValueType.get_type(value))
    w = gguf.GGUFWriter(str(path), arch, split_max_tensors=split_max_tensors)
    for key, (value, vtype) in meta.items():
        w.add_key_value(key, value, vtype)
    if tokenizer:
        add_tokenizer(w, tokenizer)
    rope_freqs = weights.pop("rope_freqs.weight", None) if "rope_freqs.weight" in weights else None
    tensors = dict(gguf_tensors(arch, cfg, weights), **(extra_tensors or {}))
    if rope_freqs is not None:
        tensors["rope_freqs.weight"] = rope_freqs
    for name, a in tensors.items():
        q = qtype(name) if callable(qtype) else qtype
        if q is None or a.ndim == 1 or q == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, a)
        elif q.name in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "IQ2_XXS", "IQ2_XS", "IQ2_S",
                        "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"):
            w.add_tensor(name, quantize(np.ascontiguousarray(a, np.float32), q.name).raw(), raw_dtype=q)
        else:
            w.add_tensor(name, gguf.quants.quantize(a, q), raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if split_max_tensors:
        return Path(path).with_name(f"{Path(path).stem}-00001-of-{len(w.tensors):05d}.gguf")
    return Path(path)


def add_tokenizer(w: gguf.GGUFWriter, t: dict) -> None:
    """Tokenizer metadata from a dict of: model, pre, tokens, token_types, merges, scores, *_token_id, add_bos,
    add_eos, chat_template."""
    w.add_tokenizer_model(t["model"])
    if "pre" in t:
        w.add_tokenizer_pre(t["pre"])
    w.add_token_list(t["tokens"])
    w.add_token_types(t["token_types"])
    if "merges" in t:
        w.add_token_merges(t["merges"])
    if "scores" in t:
        w.add_token_scores(t["scores"])
    for key in ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id"):
        if key in t:
            w.add_uint32(f"tokenizer.ggml.{key}", t[key])
    if "add_bos" in t:
        w.add_add_bos_token(t["add_bos"])
    if "add_eos" in t:
        w.add_add_eos_token(t["add_eos"])
    if "chat_template" in t:
        w.add_chat_template(t["chat_template"])


def byte_level_tokenizer(pre: str = "llama-bpe") -> dict:
    """GGUF tokenizer metadata ("gpt2") from tests/data/tiny_tokenizer: tokens in id order, merges, types
    (CONTROL for special added tokens, USER_DEFINED for other added ones), ids and the ChatML template."""
    j = json.loads((TINY_TOKENIZER / "tokenizer.json").read_text())
    config = json.loads((TINY_TOKENIZER / "tokenizer_config.json").read_text())
    vocab = dict(j["model"]["vocab"])
    types = {i: 1 for i in vocab.values()}
    for added in j["added_tokens"]:
        vocab[added["content"]] = added["id"]
        types[added["id"]] = 3 if added["special"] else 4
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    return {"model": "gpt2", "pre": pre, "tokens": tokens, "token_types": [types[i] for i in range(len(tokens))],
            "merges": merges, "bos_token_id": vocab["<|begin_of_text|>"], "eos_token_id": vocab["<|im_end|>"],
            "padding_token_id": vocab["<|endoftext|>"], "add_bos": False,
            "chat_template": config["chat_template"][0]["template"]}


def spm_tokenizer() -> dict:
    """GGUF tokenizer metadata ("llama", SentencePiece-style) from tests/data/tiny_spm_vocab.json."""
    v = json.loads(TINY_SPM.read_text())
    return {"model": "llama", "tokens": v["tokens"], "token_types": v["token_types"], "scores": v["scores"],
            "bos_token_id": v["bos_token_id"], "eos_token_id": v["eos_token_id"],
            "unknown_token_id": v["unknown_token_id"]}


def tiny_model_config(arch: str = "llama", vocab_size: int = 100) -> dict:
    """A config.json dict for a 2-layer model of `arch` small enough for a GGUF written in a test."""
    cfg = {"model_type": arch, "vocab_size": vocab_size, "hidden_size": 64, "intermediate_size": 128,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 256, "tie_word_embeddings": False}
    if arch == "gemma2":
        cfg.update(tie_word_embeddings=True, sliding_window=32, attn_logit_softcapping=50.0,
                   final_logit_softcapping=30.0, head_dim=16)
    return cfg


def write_tokenizer_gguf(path, tokenizer: dict, arch: str = "llama") -> Path:
    """A GGUF holding only the metadata of a tiny model of `arch` and `tokenizer` (no tensors)."""
    cfg = tiny_model_config(arch, len(tokenizer["tokens"]))
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_vocab_size(cfg["vocab_size"])
    add_tokenizer(w, tokenizer)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


def write_tokenizer_variant(dest) -> Path:
    """tests/data/tiny_tokenizer with add_bos_token/add_eos_token set in tokenizer_config.json (transformers 5
    ignores them when a tokenizer.json is present), a chat_template.jinja (which wins over the config's
    templates) and a generation_config.json naming two eos ids."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(TINY_TOKENIZER / "tokenizer.json", dest / "tokenizer.json")
    config = json.loads((TINY_TOKENIZER / "tokenizer_config.json").read_text())
    config.update(add_bos_token=True, add_eos_token=True)
    (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (dest / "chat_template.jinja").write_text(config["chat_template"][1]["template"])  # the Llama 3 style one
    (dest / "generation_config.json").write_text(json.dumps({"eos_token_id": [3, 6]}))
    return dest


def write_unigram_tokenizer(dest) -> Path:
    """A tiny SentencePiece-style Unigram tokenizer.json (pieces of words, contractions and punctuation after a
    space) with tokenizer_config.json's clean_up_tokenization_spaces=True: the one kind of tokenizer whose decoded
    text transformers cleans up (" ." -> ".", " n't" -> "n't"; never for BPE)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    specials = ["<unk>", "<s>", "</s>"]
    words = ["▁Hello", "▁world", "▁do", "▁it", "▁n't", "▁'s", "▁'m", "▁'re", "▁'ve", "▁'", "▁.", "▁,", "▁!", "▁?",
             "▁The", "▁capital", "▁of", "▁France", "▁is", "▁Paris"]
    chars = [chr(c) for c in range(33, 127)] + ["▁"]
    vocab = [(t, 0.0) for t in specials] + [(w, -1.0) for w in words] + [(c, -5.0) for c in chars]
    tok = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.save(str(dest / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
              "unk_token": "<unk>", "clean_up_tokenization_spaces": True}
    (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return dest


def arch_weights(arch: str, cfg: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Random float32 weights named as transformers names them for `arch` (llama, qwen2, qwen3, gemma2)."""
    from wgraph.models.random_checkpoint import random_weights

    w = random_weights(cfg, seed)
    rng = np.random.default_rng(seed + 1)
    d = cfg["head_dim"]
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        if arch == "qwen2":
            for proj, heads in (("q", cfg["num_attention_heads"]), ("k", cfg["num_key_value_heads"]),
                                ("v", cfg["num_key_value_heads"])):
                w[p + f"self_attn.{proj}_proj.bias"] = 0.1 * rng.standard_normal(heads * d).astype(np.float32)
        if arch == "qwen3":
            for norm in ("q_norm", "k_norm"):
                w[p + f"self_attn.{norm}.weight"] = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
        if arch == "gemma2":
            for norm in ("pre_feedforward_layernorm", "post_feedforward_layernorm"):
                w[p + f"{norm}.weight"] = (0.1 * rng.standard_normal(cfg["hidden_size"])).astype(np.float32)
    return w


def gguf_golden_cases() -> dict:
    """The tiny GGUF files of tests/data/make_gguf_goldens.py (transformers' logits for them: GGUF_GOLDENS):
    name -> (arch, config dict, weights by HF name, write_model keyword arguments)."""
    q = gguf.GGMLQuantizationType
    def cfg(arch, **kw):
        return dict(tiny_model_config(arch, vocab_size=300), model_type=arch, **kw)

    cases = {
        # a llama file with a sliding window key (Mistral's): llama.cpp and transformers attend to every key
        "llama_window": ("llama", cfg("llama"), {}, dict(extra={"llama.attention.sliding_window": 4})),
        "llama_q4_k": ("llama", cfg("llama", hidden_size=256, intermediate_size=256, head_dim=64), {},
                       dict(qtype=q.Q4_K)),
        "qwen2_tied_q8_0": ("qwen2", cfg("qwen2", tie_word_embeddings=True), {"embed_scale": 0.3},
                            dict(qtype=q.Q8_0)),
        "qwen3_q8_0": ("qwen3", cfg("qwen3", head_dim=128), {}, dict(qtype=q.Q8_0)),  # transformers reads 128
        # transformers reads the window but not the softcaps (its defaults 50 / 30, written here) nor
        # query_pre_attn_scalar (its default 256 = head_dim here, as llama.cpp scales)
        "gemma2_window_q8_0": ("gemma2", cfg("gemma2", head_dim=256, num_attention_heads=2, num_key_value_heads=1,
                                             sliding_window=4), {"embed_scale": 0.05}, dict(qtype=q.Q8_0)),
    }
    out = {}
    for name, (arch, c, opts, kwargs) in cases.items():
        w = arch_weights(arch, c, seed=1)
        if c["tie_word_embeddings"]:
            w.pop("lm_head.weight", None)
        if "embed_scale" in opts:  # a smaller tied table: greedy ids that do not just repeat the last token
            w["model.embed_tokens.weight"] = w["model.embed_tokens.weight"] * np.float32(opts["embed_scale"])
        out[name] = (arch, c, w, kwargs)
    return out
