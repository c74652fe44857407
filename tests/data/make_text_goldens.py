"""Make tests/data/text_goldens.json ONCE with transformers (AutoTokenizer, apply_chat_template, decode) for the
tiny tokenizers: the tiny_tokenizer directory, a variant of it, a Unigram directory whose decoded text is cleaned
up (clean_up_tokenization_spaces), and GGUF files built from the tiny vocabularies
(byte-level "gpt2" with several tokenizer.ggml.pre values, SentencePiece-style "llama" for the llama and gemma2
architectures). tests/test_tokenizer.py compares wgraph's Tokenizer with it without importing transformers.
Run from the repository root: `python tests/data/make_text_goldens.py`."""

import json
import sys
import tempfile
from pathlib import Path

from transformers import AutoTokenizer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import tiny_files  # noqa: E402

TEXTS = ["Hello world!", " leading space", "trailing space ", "  two  spaces\tand a tab\nnew line\r\n",
         "Héllo wörld — ünïcödé façade naïve", "日本語のテキスト 中文 한국어", "Emoji: 🙂🚀👍🏽🇫🇷 ❤️ ✓",
         "<|im_start|>user\nhi<|im_end|>", "<think>reasoning</think> done", "numbers 1234567 and 3.14159",
         "", "non\u00a0breaking\u200bzero width ÿ", "The capital of France is Paris."]
CHATS = [
    [{"role": "user", "content": "Hi!"}],
    [{"role": "system", "content": "You are a helpful assistant."},
     {"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a color."},
     {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another one? 🙂"}],
    [{"role": "user", "content": "  spaces around, ünïcödé  "}],
]
# texts whose spaces transformers cleans up for the Unigram tokenizer (clean_up_tokenization_spaces)
CLEANUP_TEXTS = ["Hello world . do n't it 's , ok ?", "a ' ' b", "x n ' t", " ' s  ' m !", "it 're ' ve do n't"]
BAD_CHAT = [{"role": "tool", "content": "x"}]  # the Llama 3 style template raises on this role
SOURCES = {  # name -> how to make it: ("dir", None) or ("gguf", (tokenizer builder, pre or None, arch))
    "directory": ("dir", None),
    "directory_variant": ("variant", None),
    "directory_unigram": ("unigram", None),
    "gguf_gpt2_llama_bpe": ("gguf", ("byte_level", "llama-bpe", "llama")),
    "gguf_gpt2_unknown_pre": ("gguf", ("byte_level", "gpt-2", "llama")),
    "gguf_gpt2_qwen2": ("gguf", ("byte_level", "qwen2", "qwen2")),
    "gguf_spm_llama": ("gguf", ("spm", None, "llama")),
    "gguf_spm_gemma2": ("gguf", ("spm", None, "gemma2")),
}


def make(name: str, tmp: Path):
    """The transformers tokenizer for source `name` (files written under tmp by tests/tiny_files.py)."""
    kind, spec = SOURCES[name]
    if kind == "dir":
        return AutoTokenizer.from_pretrained(str(tiny_files.TINY_TOKENIZER))
    if kind == "variant":
        return AutoTokenizer.from_pretrained(str(tiny_files.write_tokenizer_variant(tmp / name)))
    if kind == "unigram":
        return AutoTokenizer.from_pretrained(str(tiny_files.write_unigram_tokenizer(tmp / name)))
    builder, pre, arch = spec
    meta = tiny_files.byte_level_tokenizer(pre) if builder == "byte_level" else tiny_files.spm_tokenizer()
    path = tiny_files.write_tokenizer_gguf(tmp / f"{name}.gguf", meta, arch)
    return AutoTokenizer.from_pretrained(str(tmp), gguf_file=path.name)


def goldens_of(tok, name: str) -> dict:
    out = {"encode": [], "decode_slices": [], "chat": []}
    for text in TEXTS + (CLEANUP_TEXTS if name == "directory_unigram" else []):
        if name == "gguf_spm_gemma2" and "<" in text:
            continue  # transformers' GemmaTokenizer adds <bos> <eos> <pad> <mask> to this vocabulary (see docs)
        ids = tok(text)["input_ids"]
        out["encode"].append({"text": text, "ids": ids,
                              "decode": tok.decode(ids, skip_special_tokens=True),
                              "decode_special": tok.decode(ids, skip_special_tokens=False)})
    emoji = tok("🙂🚀👍🏽", add_special_tokens=False)["input_ids"]
    for n in range(1, len(emoji) + 1):  # prefixes that end inside a character
        out["decode_slices"].append({"ids": emoji[:n], "text": tok.decode(emoji[:n], skip_special_tokens=True)})
    if tok.chat_template is None:
        return out
    names = [None] if isinstance(tok.chat_template, str) else list(tok.chat_template)
    for template in names:
        for i, chat in enumerate(CHATS):
            for gen in ((True, False) if i == 2 else (True,)):
                kw = {} if template is None else {"chat_template": template}
                text = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=gen, **kw)
                ids = tok.apply_chat_template(chat, tokenize=True, add_generation_prompt=gen, **kw)["input_ids"]
                out["chat"].append({"template": template, "messages": chat, "add_generation_prompt": gen,
                                    "text": text, "ids": ids})
        try:
            kw = {} if template is None else {"chat_template": template}
            tok.apply_chat_template(BAD_CHAT, tokenize=False, **kw)
            out.setdefault("refuses", []).append({"template": template, "messages": BAD_CHAT, "refused": False})
        except Exception as e:  # jinja2's TemplateError from raise_exception
            out.setdefault("refuses", []).append({"template": template, "messages": BAD_CHAT, "refused": True,
                                                  "error": str(e)})
    return out


def main():
    goldens = {"made_by": "tests/data/make_text_goldens.py with transformers", "sources": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in SOURCES:
            tok = make(name, Path(tmp))
            goldens["sources"][name] = {"special_tokens": {k: v for k, v in tok.special_tokens_map.items()
                                                           if isinstance(v, str)},
                                        **goldens_of(tok, name)}
    dest = Path(__file__).with_name("text_goldens.json")
    dest.write_text(json.dumps(goldens, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(dest, dest.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
