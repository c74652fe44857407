"""A `tokenizers.Tokenizer` from a GGUF file's vocabulary, built as transformers 5.25 builds it
(transformers/integrations/gguf/gguf_tokenizer_mapping.py): "gpt2" files are byte-level BPE with the file's merges
and a split regex picked by `tokenizer.ggml.pre`; "llama" files are SentencePiece-style BPE with byte fallback,
merges rebuilt from the scores (Gemma's from the token order). Control tokens become special added tokens,
user-defined ones plain added tokens. Any other tokenizer model is refused by name."""

from __future__ import annotations

from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
from tokenizers import Tokenizer as Backend

from wgraph.errors import CheckpointError
from wgraph.models.gguf import GGUFFile, type_name

MODELS = ("gpt2", "llama")
CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types
SPECIAL_IDS = {"bos_token": "bos_token_id", "eos_token": "eos_token_id", "unk_token": "unknown_token_id",
               "pad_token": "padding_token_id"}
STOP_IDS = ("eos_token_id", "eot_token_id", "eom_token_id")  # llama.cpp ends generation at any of these

_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
           r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
           r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
           r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
           r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_GPT4O = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
          r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
          r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# tokenizer.ggml.pre -> the split regex its merges were learned with (transformers' table; others: GPT-2's)
PRE_TOKENIZER_SPLITS = {
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                     "jina-v5-nano", "dbrx", "smaug-bpe"), _LLAMA3),
    "tekken": _TEKKEN,
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"), _QWEN2),
    "qwen35": _QWEN35,
    **dict.fromkeys(("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"), _GPT4O),
}
# tokenizer.ggml.pre names llama.cpp splits every digit off first (its "\p{N}" regex before GPT-2's), as their
# tokenizer.json's Digits(individual_digits=True) + ByteLevel do: GPT-2's regex alone joined whitespace otherwise
# ("\n\n1." was "\n" "\n" "1." where SmolLM2's own tokenizer and llama.cpp give "\n\n" "1.")
DIGITS_FIRST = ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva")
GEMMA_ARCHS = ("gemma", "gemma2", "gemma3")
# tokenizer.ggml.pre names llama.cpp (llama-vocab.cpp) encodes with ignore_merges (a word that is a token is that one
# token, whatever the merges; Llama 3's tokenizer.json says so too) and adds BOS to unless add_bos_token says not
IGNORE_MERGES = ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                 "jina-v5-nano", "tekken")
BOS_BY_DEFAULT = (*IGNORE_MERGES, "chameleon")
# the merges a vocabulary without tokenizer.ggml.merges implies, per token and per character of its tokens: SmolLM2's
# 49,152 tokens (332,367 characters) imply 107,441 pairs holding 758,312 characters, about 2 of each
IMPLIED_MERGES_PER_TOKEN = 64


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table of byte-level BPE."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def _strings(f: GGUFFile, key: str) -> list[str]:
    if f.value_types.get(key) != (9, 8):
        raise CheckpointError(f"GGUF file {f.path.name}: {key} must be an array of strings")
    return f.metadata[key]


def _numbers(f: GGUFFile, key: str, n: int) -> list:
    t = f.value_types.get(key, (0,))
    if t[0] != 9 or t[1] == 8 or len(f.metadata[key]) != n:
        raise CheckpointError(f"GGUF file {f.path.name}: {key} must be an array of {n} numbers")
    return f.metadata[key].tolist()


def _pairs(merges: list[str], name: str) -> list[tuple[str, str]]:
    """Merges "a b" as (a, b); anything else is refused."""
    out = []
    for m in merges:
        parts = m.split(" ")
        if len(parts) != 2:
            raise CheckpointError(f"GGUF file {name}: merge {m!r} is not two tokens separated by a space")
        out.append((parts[0], parts[1]))
    return out


def generate_merges(vocab: dict[str, int], scores: dict[str, float],
                    name: str = "the vocabulary") -> list[tuple[str, str]]:
    """Merges implied by a vocabulary: every split of a token into two tokens, best score first
    (transformers' generate_merges with vocab_scores). Only splits at lengths some token has are tried (slicing at
    every point of a 200,000-character token took 4.8 s, quadratic in its length), and what the splits hold is
    bounded by the vocabulary's size (IMPLIED_MERGES_PER_TOKEN pairs per token and characters per character: "a" ..
    "a" * k implies k^2 / 2 pairs holding k^3 / 3 characters); `name` names the file in that error."""
    lengths = sorted({len(t) for t in vocab})
    has_length = set(lengths)
    max_pairs = IMPLIED_MERGES_PER_TOKEN * len(vocab)
    max_chars = IMPLIED_MERGES_PER_TOKEN * sum(len(t) for t in vocab)
    merges, chars = [], 0
    for merge, score in scores.items():
        n = len(merge)
        local = []
        for i in lengths:
            if i >= n:
                break
            if n - i in has_length and merge[:i] in vocab and merge[i:] in vocab:
                local.append((merge[:i], merge[i:], score))
        merges.extend(sorted(local, key=lambda x: (vocab[x[0]], vocab[x[1]])))
        chars += n * len(local)
        if len(merges) > max_pairs or chars > max_chars:
            raise CheckpointError(f"GGUF file {name}: the {len(vocab)} tokens of tokenizer.ggml.tokens split into more "
                                  f"than {max_pairs} pairs of tokens or {max_chars} characters of them ("
                                  f"{IMPLIED_MERGES_PER_TOKEN} per token and per character: the merges a vocabulary "
                                  f"without tokenizer.ggml.merges implies; a real one implies about 2)")
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(a, b) for a, b, _ in merges]


def _vocab(spellings: list[str], tokens: list[str], name: str) -> dict[str, int]:
    """{spelling: id}, each spelling once: two ids of one spelling would leave one id without a token (it would
    decode to nothing, and text would encode to the other id)."""
    vocab: dict[str, int] = {}
    for i, s in enumerate(spellings):
        j = vocab.setdefault(s, i)
        if j != i:
            raise CheckpointError(f"GGUF file {name}: tokenizer.ggml.tokens[{j}] = {tokens[j]!r} and [{i}] = "
                                  f"{tokens[i]!r} are the same token{'' if tokens[i] == tokens[j] else ' once spelled in bytes'}")
    return vocab


def _byte_level(tokens: list[str], merges_text: list[str], pre: str | None, name: str) -> Backend:
    spelling = bytes_to_unicode()
    alphabet = set(spelling.values())
    vocab = _vocab([t if set(t) <= alphabet else "".join(spelling[b] for b in t.encode("utf-8")) for t in tokens],
                   tokens, name)
    merges = _pairs(merges_text, name)
    try:
        backend = Backend(models.BPE(vocab=vocab, merges=merges, dropout=None, continuing_subword_prefix="",
                                     end_of_word_suffix="", fuse_unk=False, ignore_merges=pre in IGNORE_MERGES))
    except Exception as e:  # tokenizers raises its own exception type for merges of unknown tokens
        raise CheckpointError(f"GGUF file {name}: the vocabulary and merges do not form a BPE model: {e}") from None
    split = PRE_TOKENIZER_SPLITS.get(pre)
    if split is None and pre in DIGITS_FIRST:
        backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                         pre_tokenizers.ByteLevel(add_prefix_space=False)])
    elif split is None:
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), behavior="isolated"),
                                                         pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                  use_regex=False)])
    backend.decoder = decoders.ByteLevel()
    return backend


def _sentencepiece(tokens: list[str], scores: dict[str, float], merges_text: list[str] | None, gemma: bool,
                   name: str, unk: str | None = None, add_prefix: bool = True) -> Backend:
    """unk: the file's unknown token (a character none of whose bytes has a <0xNN> token becomes it; without
    one it vanished from the ids); add_prefix: tokenizer.ggml.add_space_prefix, whether the text gets a leading
    "▁" (and decoding drops it), as llama.cpp and transformers read it."""
    vocab = _vocab(tokens, tokens, name)
    merges = _pairs(merges_text, name) if merges_text is not None else generate_merges(vocab, scores, name)
    try:
        model = models.BPE(vocab=vocab, merges=merges, fuse_unk=True, byte_fallback=True, dropout=None,
                           **({"unk_token": unk} if unk is not None else {}))
    except Exception as e:  # tokenizers raises its own exception type for merges of unknown tokens
        raise CheckpointError(f"GGUF file {name}: the vocabulary and merges do not form a BPE model: {e}") from None
    if gemma:
        backend = Backend(model)
        backend.normalizer = normalizers.Replace(" ", "▁")
        backend.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
        backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
        return backend
    backend = Backend(model)
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", split=False,
                                                     prepend_scheme="first" if add_prefix else "never")
    backend.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
                                        + ([decoders.Strip(content=" ", left=1)] if add_prefix else []))
    return backend


def gguf_tokenizer_parts(f: GGUFFile) -> dict:
    """From a GGUF file's metadata: the backend tokenizer, the special token strings, add_bos/add_eos, the ids
    generation stops at and the chat template (None when the file has none)."""
    name = f.path.name
    model = f.metadata.get("tokenizer.ggml.model")
    if not isinstance(model, str) or model not in MODELS:
        raise CheckpointError(f"GGUF file {name}: tokenizer.ggml.model {model!r} is not supported "
                              f"(supported: {list(MODELS)})")
    tokens = _strings(f, "tokenizer.ggml.tokens")
    n = len(tokens)
    types = _numbers(f, "tokenizer.ggml.token_type", n) if "tokenizer.ggml.token_type" in f.metadata else [1] * n
    merges = _strings(f, "tokenizer.ggml.merges") if "tokenizer.ggml.merges" in f.metadata else None
    arch = f.metadata.get("general.architecture")
    if not isinstance(arch, (str, type(None))):
        raise CheckpointError(f"GGUF file {name}: general.architecture must be a STRING")
    pre = f.metadata.get("tokenizer.ggml.pre")
    if not isinstance(pre, (str, type(None))):   # an array raised numpy's ValueError from `pre in DIGITS_FIRST`
        raise CheckpointError(f"GGUF file {name}: tokenizer.ggml.pre must be a STRING, got {type(pre).__name__}")

    def token_id(key):
        full = f"tokenizer.ggml.{key}"
        if full not in f.metadata:
            return None
        v, types = f.metadata[full], f.value_types[full]
        if types[0] not in (4, 5, 10, 11):   # llama.cpp reads token ids as 32- or 64-bit integers
            raise CheckpointError(f"GGUF file {name}: {full} must be a UINT32, INT32, UINT64 or INT64 token id, got "
                                  f"{' of '.join(type_name(x) for x in types)}")
        if not 0 <= v < n:
            raise CheckpointError(f"GGUF file {name}: {full}={v!r} is not a token id in [0, {n})")
        return v

    if model == "gpt2":
        if merges is None:
            raise CheckpointError(f"GGUF file {name}: a gpt2 (byte-level BPE) tokenizer needs tokenizer.ggml.merges")
        backend = _byte_level(tokens, merges, pre, name)
        alphabet = set(bytes_to_unicode().values())
    else:
        gemma = arch in GEMMA_ARCHS
        if gemma:  # Gemma stores runs of spaces as spaces; its pieces spell them "▁"; merges follow the order
            tokens = ["▁" * len(t) if " " in t and not t.strip() else t for t in tokens]
            scores = {t: -float(i) for i, t in enumerate(tokens)}
        else:
            scores = dict(zip(tokens, _numbers(f, "tokenizer.ggml.scores", n)))
        unk_id = token_id("unknown_token_id")
        add_prefix = f.metadata.get("tokenizer.ggml.add_space_prefix", True)  # llama.cpp: SPM prefixes by default
        if not isinstance(add_prefix, bool):
            raise CheckpointError(f"GGUF file {name}: tokenizer.ggml.add_space_prefix={add_prefix!r} must be a BOOL")
        # a Gemma file that names no unknown token keeps the "<unk>" this module always gave it
        unk = tokens[unk_id] if unk_id is not None else ("<unk>" if gemma else None)
        backend = _sentencepiece(tokens, scores, merges, gemma, name, unk, add_prefix)
        alphabet = None
    # control tokens are special; in a byte-level vocabulary one spelled outside the byte alphabet is a llama.cpp
    # mislabel that would grow the vocabulary, so it is skipped (as transformers does)
    control = [AddedToken(t, normalized=False, special=True) for t, k in zip(tokens, types)
               if k == CONTROL and (alphabet is None or set(t) <= alphabet)]
    backend.add_special_tokens(control)
    vocab = backend.get_vocab()
    backend.add_tokens([AddedToken(t, normalized=False, special=False) for t, k in zip(tokens, types)
                        if k == USER_DEFINED and t in vocab])

    # the string the backend holds at each special id (a byte-level vocabulary respells a token outside its
    # alphabet): the file's text would be a new token with a new id
    special = {ours: backend.id_to_token(i) for ours, key in SPECIAL_IDS.items() if (i := token_id(key)) is not None}
    # llama.cpp's defaults: SPM adds BOS, and so do byte-level vocabularies of the Llama 3 family of splits
    add_bos = f.metadata.get("tokenizer.ggml.add_bos_token", model == "llama" or pre in BOS_BY_DEFAULT)
    add_eos = f.metadata.get("tokenizer.ggml.add_eos_token", False)
    for key, v in (("add_bos_token", add_bos), ("add_eos_token", add_eos)):
        if not isinstance(v, bool):
            raise CheckpointError(f"GGUF file {name}: tokenizer.ggml.{key}={v!r} must be a BOOL")
    template = f.metadata.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, str):
        raise CheckpointError(f"GGUF file {name}: tokenizer.chat_template must be a STRING")
    return {"backend": backend, "special": special, "add_bos": add_bos, "add_eos": add_eos,
            "stop_ids": sorted({i for key in STOP_IDS if (i := token_id(key)) is not None}),
            "chat_template": template}
