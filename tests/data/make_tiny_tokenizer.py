"""Make the tiny tokenizers under tests/data ONCE (committed; rerun only to change them), with `tokenizers`:

- tiny_tokenizer/: a byte-level BPE tokenizer.json (Llama 3's split regex, a BOS-adding post-processor) trained on
  the text below, and a tokenizer_config.json with a ChatML template (default) and a Llama 3 style one ("llama3");
- tiny_spm_vocab.json: a SentencePiece-style vocabulary (<unk> <s> </s>, 256 byte pieces, "▁" words, scores) that
  the tests write into GGUF files (tokenizer.ggml.model "llama").
"""

import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = Path(__file__).resolve().parent
TEXT = [
    "The quick brown fox jumps over the lazy dog. A graph of GPU ops runs on WebGPU through wgpu-py.",
    "What is the capital of France? The capital of France is Paris. Hello world! How are you today?",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 123 2024 3.14159 and 1,000,000. Tabs\tand\nnew lines\r\n  spaces.",
    "Attention is all you need: queries, keys and values; softmax(QK^T / sqrt(d)) V. def f(x): return x * 2",
    "Héllo wörld, ça va? Ünïcödé façade naïve café. Größe, Straße, élève, año, señor, smørrebrød.",
    "日本語のテキストです。中文文本。한국어 텍스트. Привет, мир! Γειά σου κόσμε. مرحبا بالعالم",
    "Emoji: 🙂 😀 🚀 ✓ ★ ❤️ 👍🏽 🇫🇷 and symbols → ← ≤ ≥ ≠ ∞ ∑ ∫ © ® ™ € £ ¥.",
    "You are a helpful assistant. Answer briefly. The user asks a question and the assistant answers it.",
] * 3
SPECIAL = ["<|endoftext|>", "<|begin_of_text|>", "<|im_start|>", "<|im_end|>", "<|start_header_id|>",
           "<|end_header_id|>", "<|eot_id|>"]
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3 = ("{{ bos_token }}{% for message in messages %}{% if message['role'] not in ['system', 'user', 'assistant'] %}"
          "{{ raise_exception('role ' + message['role'] + ' is not supported') }}{% endif %}"
          "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + "
          "'<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")


def byte_level() -> None:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TEXT, trainer)
    tok.add_tokens([AddedToken("<think>", normalized=False, special=False)])
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A $B",
                                                       special_tokens=[("<|begin_of_text|>", 1)])
    out = HERE / "tiny_tokenizer"
    out.mkdir(exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>", "clean_up_tokenization_spaces": False, "model_max_length": 2048,
              "chat_template": [{"name": "default", "template": CHATML}, {"name": "llama3", "template": LLAMA3}]}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def sentencepiece_style() -> None:
    byte_pieces = [f"<0x{i:02X}>" for i in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<s>", "</s>"] + byte_pieces,
                                  show_progress=False)
    tok.train_from_iterator(TEXT, trainer)
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in vocab] + ["<think>"]
    assert [i for _, i in vocab] == list(range(len(vocab)))
    types = [2, 3, 3] + [6] * 256 + [1] * (len(vocab) - 259) + [4]  # unknown, control, byte, normal, user-defined
    scores = [0.0] * 259 + [-float(i) for i in range(len(vocab) - 259)] + [0.0]  # earlier merges score higher
    data = {"tokens": tokens, "scores": scores, "token_types": types, "bos_token_id": 1, "eos_token_id": 2,
            "unknown_token_id": 0}
    (HERE / "tiny_spm_vocab.json").write_text(json.dumps(data, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    byte_level()
    sentencepiece_style()
