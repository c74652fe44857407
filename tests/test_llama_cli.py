"""`python -m wgraph generate` and the bench's model row, in-process on tiny models."""

import re

import pytest

from wgraph.__main__ import main as cli_main
from wgraph.bench import main as bench_main
from wgraph.models.config import STEPS_PER_SUBMIT
from wgraph.models.random_checkpoint import random_weights, tiny_config, write_checkpoint

import llama_reference as ref


def test_generate_command(tmp_path, capsys):
    cfg = tiny_config()
    w = random_weights(cfg, seed=0)
    path = write_checkpoint(tmp_path, cfg, w, storage="f16")
    from wgraph.models.random_checkpoint import stored_values

    want, _ = ref.greedy(cfg, {k: stored_values(v, "f16") for k, v in w.items()}, [3, 4], 8)
    assert cli_main(["generate", str(path), "--prompt-ids", "3,4", "--max-new-tokens", "8", "--dtype", "f32",
                     "--read-every", "4"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == ",".join(map(str, want))
    assert "4/8 tokens" in err and "8/8 tokens" in err and "2 readbacks" in err  # reads at 4 and 8
    # stderr is not a terminal here: plain lines (a log gets no carriage returns), and what it was doing
    assert "\r" not in err and f"loading {path} on " in err and "loaded in " in err
    assert "a KV cache of 10 positions" in err   # no --max-seq: the 2 prompt ids and the 8 new ones
    assert cli_main(["generate", str(tmp_path / "nope"), "--prompt-ids", "1"]) == 1
    assert "config.json" in capsys.readouterr().err
    # --prompt without a tokenizer (the directory has none): refused before the weights are read (it loaded the
    # whole model first)
    assert cli_main(["generate", str(path), "--prompt", "hello", "--max-new-tokens", "2"]) == 1
    err = capsys.readouterr().err
    assert "generate: the model has no tokenizer" in err and "loaded in " not in err


def test_bench_model_row(dev):
    row = bench_main(["--only", "model", "--quick", "--no-torch"])["model"]["rows"][0]
    assert row["status"] == "ok", row
    assert row["submits_per_token"] == pytest.approx(1 / STEPS_PER_SUBMIT)
    assert row["model"] == "tiny-llama" and row["dispatches_per_token"] > 0
    assert row["weight_bytes_per_token"] > 0 and row["ms_per_token"] > 0 and 0 < row["host_ms_per_token"]


def test_cache_positions_follow_the_request(tmp_path):
    """generate's KV cache: --max-seq as given; else prompt + new tokens within the default cache (the tiny config's
    max_position_embeddings, 256); beyond it the default (None), which the model then holds the request to."""
    from wgraph.models import open_pretrained
    from wgraph.models.cli import cache_positions, parser

    path = write_checkpoint(tmp_path, tiny_config(), random_weights(tiny_config(), seed=0), storage="f16")
    files = open_pretrained(path)
    assert files.config.max_position_embeddings == 256 and files.tokenizer is None

    def positions(*argv, ids=None):
        return cache_positions(parser().parse_args([str(path), *argv]), files, ids)

    assert positions("--prompt-ids", "3,4,5", "--max-new-tokens", "40") == 43
    assert positions("--prompt-ids", "3,4", "--max-new-tokens", "254") == 256
    assert positions("--prompt-ids", "3,4", "--max-new-tokens", "255") is None
    assert positions("--prompt-ids", "3", "--max-new-tokens", "0") == 2    # a cache has 2 positions at least
    assert positions("--prompt-ids", "3,4", "--max-new-tokens", "8", "--max-seq", "100") == 100
    assert positions("--prompt", "x") is None     # no tokenizer in the directory: the text API says so
    assert positions("--prompt", "x y", "--max-new-tokens", "5", ids=[1, 7, 9]) == 8   # --prompt's ids, made once


def test_chat_options_need_a_text_prompt(capsys):
    """--system (or --chat) with --prompt-ids was ignored silently: the ids are the whole prompt."""
    from wgraph.__main__ import main as cli_main

    with pytest.raises(SystemExit) as info:
        cli_main(["generate", "model.gguf", "--prompt-ids", "1,2", "--system", "be brief"])
    assert info.value.code == 2
    assert "--chat and --system need --prompt" in capsys.readouterr().err


def test_system_needs_chat(capsys):
    """--system with a plain --prompt was refused only after the device and files were opened, as
    'error: generate: system=... needs chat=True', naming the Python option instead of --chat."""
    from wgraph.__main__ import main as cli_main

    with pytest.raises(SystemExit) as info:
        cli_main(["generate", "model.gguf", "--prompt", "hi", "--system", "be brief"])
    assert info.value.code == 2
    assert "--system needs --chat" in capsys.readouterr().err


@pytest.mark.parametrize("option, value, rule", [
    ("--temperature", "nan", "a finite real in [0, 3.4028235e+38]"),
    ("--temperature", "1e400", "a finite real in [0, 3.4028235e+38]"),   # float() makes it inf
    ("--temperature", "-1", "a finite real in [0, 3.4028235e+38]"),
    ("--top-p", "0", "a finite real in (0, 1]"), ("--top-p", "-inf", "a finite real in (0, 1]"),
    ("--top-k", "-1", "an integer in [0, 4294967295]"), ("--top-k", "4294967296", "an integer in [0, 4294967295]"),
    ("--seed", "-1", "an integer in [0, 18446744073709551615]"),
    ("--seed", str(2**64), "an integer in [0, 18446744073709551615]"),
    ("--max-seq", "1", "an integer in [2, 1048576]"), ("--max-new-tokens", "-1", "an integer in [0, 1048576]"),
    ("--max-new-tokens", "2.7", "an integer in [0, 1048576]"), ("--in-flight", "0", "an integer in [1, 1048576]"),
    ("--read-every", "0", "an integer in [1, 1048576]"),
    ("--stop-ids", "2,-1", "comma-separated integers in [0, 4294967295]"),
    ("--prompt-ids", str(2**32), "comma-separated integers in [0, 4294967295]"),
    ("--prompt-ids", "", "at least one token id"), ("--stop-ids", " ", "at least one token id"),
    ("--prompt-ids", ",", "comma-separated integers in [0, 4294967295]"),
    ("--stop-ids", "1,,2", "comma-separated integers in [0, 4294967295]"),   # it was 1,2 without a word
    ("--max-new-tokens", "1_0", "an integer in [0, 1048576]"),   # int() took it as 10, a fullwidth 4 as 4
    ("--max-new-tokens", "\uff14", "an integer in [0, 1048576]"),
    ("--prompt-ids", "1_0", "comma-separated integers in [0, 4294967295]"),
])
def test_numeric_options_are_checked_as_parsed(capsys, option, value, rule):
    """A numeric option outside the rule of the Python argument it becomes was refused only after the device was
    opened and the weights read ('error: generate: temperature=inf must be ...', exit 1), naming the Python
    argument and showing 1e400 as inf: now argparse refuses it at once (exit 2), naming the option and the text."""
    prompt = [] if option == "--prompt-ids" else ["--prompt-ids", "1,2"]
    with pytest.raises(SystemExit) as info:
        cli_main(["generate", "model.gguf", *prompt, f"{option}={value}"])
    assert info.value.code == 2
    assert f"argument {option}: expected {rule}, got {value!r}" in capsys.readouterr().err


def test_sampling_options_without_a_temperature_are_refused(capsys):
    """--seed, --top-k and --top-p with the default --temperature 0 (greedy) were ignored without a word: the same
    ids whatever the seed. Refused at once (exit 2), naming them; with a temperature they parse."""
    from wgraph.models.cli import parser

    with pytest.raises(SystemExit) as info:
        cli_main(["generate", "model.gguf", "--prompt-ids", "1,2", "--seed", "7", "--top-k", "5"])
    assert info.value.code == 2
    assert "--top-k, --seed only shape sampling, and --temperature 0 is greedy" in capsys.readouterr().err
    a = parser().parse_args(["m.gguf", "--prompt-ids", "1", "--temperature", "0.7", "--seed", "7"])
    assert (a.temperature, a.seed, a.top_k, a.top_p) == (0.7, 7, None, None)   # defaults set by _main (SAMPLING)
    assert parser().parse_args(["m.gguf", "--prompt-ids", "1", "--stop-ids", "none"]).stop_ids == []


def test_ids_past_the_vocabulary_are_refused_before_the_weights(tmp_path, capsys):
    """--prompt-ids / --stop-ids past the vocabulary were refused after every weight was read, naming the Python
    argument (stop_ids=[701] 'must be a list of integers', 'outside the table's 701 rows'): now before the load,
    naming the option (exit 1, no 'loaded in')."""
    cfg = tiny_config()
    path = write_checkpoint(tmp_path, cfg, random_weights(cfg, seed=0), storage="f16")
    vocab = cfg["vocab_size"]
    for option, ids in (("--prompt-ids", f"1,{vocab}"), ("--stop-ids", f"{vocab + 3}")):
        prompt = [] if option == "--prompt-ids" else ["--prompt-ids", "1,2"]
        assert cli_main(["generate", str(path), *prompt, option, ids, "--dtype", "f32"]) == 1
        err = capsys.readouterr().err
        bad = ids.split(",")[-1]
        assert f"generate: {option} holds id {bad}, past the model's vocabulary of {vocab} ids (0 to {vocab - 1})" \
            in err and "loaded in" not in err


def test_numeric_options_keep_their_values():
    from wgraph.models.cli import parser

    a = parser().parse_args(["m.gguf", "--prompt-ids", "1", "--temperature", "-0.0", "--top-p", "1", "--seed",
                             str(2**64 - 1), "--max-seq", "2", "--top-k", "4294967295", "--stop-ids", "0,4294967295"])
    assert (a.temperature, a.top_p, a.seed, a.max_seq, a.top_k, a.stop_ids) == (0.0, 1.0, 2**64 - 1, 2, 2**32 - 1,
                                                                                [0, 2**32 - 1])
    assert str(a.temperature) == "0.0" and (a.max_new_tokens, a.in_flight, a.read_every) == (32, 8, 4)


@pytest.mark.parametrize("path, said", [("/nonexistent.gguf", " (no such file or directory)"), ("/dev/null", "")])
def test_a_missing_path_is_refused_before_the_device(capsys, monkeypatch, path, said):
    """A path that is neither a directory nor a file printed 'loading ... compiling the decode program, then reading
    the weights' and started the device before the error: now the error line at once, exit 1, no device."""
    import wgraph

    def no_device():
        raise AssertionError("the device was started")

    monkeypatch.setattr(wgraph, "default_device", no_device)
    assert cli_main(["generate", path, "--prompt", "hi"]) == 1
    err = capsys.readouterr().err
    assert err == (f"error: generate: {path} is neither a checkpoint directory (config.json, *.safetensors) nor a "
                   f".gguf file{said}\n")


def test_a_request_past_the_cache_is_refused_before_the_weights(tmp_path, capsys, monkeypatch):
    """A prompt plus --max-new-tokens past --max-seq (or past the default cache, the tiny config's 256 positions)
    was refused only after every weight was read and the decode program compiled, saying 'load the model with a
    larger max_seq=', the Python argument: now before the load, naming both counts, the cache and --max-seq."""
    import shutil

    import tiny_files
    from wgraph.models.pretrained import PretrainedFiles
    from wgraph.models.tokenizer import Tokenizer

    path = write_checkpoint(tmp_path, tiny_config(vocab_size=701), random_weights(tiny_config(vocab_size=701), seed=0))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_files.TINY_TOKENIZER / name, path / name)
    hello = len(Tokenizer.from_directory(path).encode("Hello"))

    def no_load(*a, **kw):
        raise AssertionError("the weights were read")

    monkeypatch.setattr(PretrainedFiles, "load", no_load)
    for argv, prompt, n, room, whose in [
        (["--prompt-ids", "3,4,5", "--max-new-tokens", "10", "--max-seq", "8"], 3, 10, 8, "--max-seq"),
        (["--prompt-ids", "3,4", "--max-new-tokens", "255"], 2, 255, 256, "the default"),
        (["--prompt", "Hello", "--max-new-tokens", "7", "--max-seq", str(hello + 6)], hello, 7, hello + 6,
         "--max-seq"),
        (["--prompt", "Hello", "--chat", "--max-new-tokens", "256"], None, 256, 256, "the default"),
    ]:
        assert cli_main(["generate", str(path), *argv]) == 1
        err = capsys.readouterr().err
        said = r"\d+" if prompt is None else str(prompt)   # a chat's prompt: the template's tokens
        counts = rf"{said} prompt \+ {n} new tokens exceed the KV cache of {room}"
        assert re.search(counts + rf" positions \({whose}.*\): give --max-seq \d+ or more", err), err


def test_a_prompt_of_no_tokens_is_refused_before_the_weights(tmp_path, capsys, monkeypatch):
    """--prompt "" on a tokenizer that adds no BOS (a qwen2 GGUF's) encodes to no ids: it was refused only after
    every weight was read ('generate: the prompt encodes to no tokens'); now before the load."""
    import tiny_files
    from wgraph.models.pretrained import PretrainedFiles

    cfg = tiny_files.tiny_model_config("llama", vocab_size=701)
    path = tiny_files.write_model(tmp_path / "m.gguf", "llama", cfg, tiny_files.arch_weights("llama", cfg, seed=4),
                                  tokenizer=tiny_files.byte_level_tokenizer("qwen2"))

    def no_load(*a, **kw):
        raise AssertionError("the weights were read")

    monkeypatch.setattr(PretrainedFiles, "load", no_load)
    assert cli_main(["generate", str(path), "--prompt", "", "--max-new-tokens", "2"]) == 1
    assert "generate: --prompt '' encodes to no tokens (this tokenizer adds no BOS)" in capsys.readouterr().err
