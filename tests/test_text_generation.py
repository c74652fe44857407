"""Text in, text out on a tiny random Llama with the tiny tokenizer: generate_text / stream_text give the text of
the float64 numpy reference's greedy ids (decoded by the tokenizer, itself checked against transformers in
test_tokenizer.py), stop where the tokenizer's eos or the given stop ids say, refuse bad requests before any GPU
work; and `python -m wgraph generate --prompt` in a subprocess."""

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import llama_reference as ref
import tiny_files
from thread_runner import run_together
from wgraph.errors import ArgumentError, LimitError, NoTokenizerError, RecordingError
from wgraph.models import from_pretrained
from wgraph.models.random_checkpoint import random_weights, tiny_config, write_checkpoint

ROOT = Path(__file__).resolve().parent.parent
VOCAB = 701  # the tiny tokenizer's


def _write(path, with_tokenizer=True) -> tuple[Path, dict, dict]:
    cfg = tiny_config(vocab_size=VOCAB, eos_token_id=3)
    w = random_weights(cfg, seed=5)
    write_checkpoint(path, cfg, w)
    if with_tokenizer:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(tiny_files.TINY_TOKENIZER / name, path / name)
    return path, cfg, w


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, dev):
    path, cfg, w = _write(tmp_path_factory.mktemp("tiny_text"))
    return from_pretrained(path, dev, dtype="f32", max_seq=64), cfg, w


def _expected(model, cfg, w, ids, n, stops):
    """The reference's greedy ids cut after the first stop id, and the text before it."""
    want, _ = ref.greedy(cfg, w, ids, n)
    hit = next((i for i, t in enumerate(want) if t in stops), None)
    kept = want if hit is None else want[:hit + 1]
    return kept, model.tokenizer.decode(kept if hit is None else kept[:-1])


def test_plain_prompt_text_and_stream(tiny):
    model, cfg, w = tiny
    tok = model.tokenizer
    ids = tok.encode("Hello world")
    assert ids[0] == tok.token_id("<|begin_of_text|>")  # the tokenizer.json's post-processor adds BOS
    kept, text = _expected(model, cfg, w, ids, 10, set(tok.stop_ids))
    assert model.generate_text("Hello world", 10) == text
    assert model.last_stats["ids"] == kept and model.last_stats["prompt_tokens"] == len(ids)
    pieces = list(model.stream_text("Hello world", 10, read_every=1))
    assert "".join(pieces) == text and all(pieces)
    assert model.last_stats["readbacks"] == len(kept)  # one read per token with read_every=1


def test_a_paused_stream_refuses_to_resume_after_another_generation(tiny):
    """Streams read the model's caches as they go: one paused while another generation ran on the model read the
    other's state (wrong text, silently); it now raises when resumed, and a fresh stream is right."""
    model, cfg, w = tiny
    kept, text = _expected(model, cfg, w, model.tokenizer.encode("Hello world"), 12, set())
    a = model.stream_text("Hello world", 12, read_every=2, stop_ids=[])
    next(a)
    assert model.generate_text("Hello world", 12, stop_ids=[]) == text
    with pytest.raises(RecordingError, match="another generation ran on this model while this stream was paused"):
        list(a)
    assert "".join(model.stream_text("Hello world", 12, read_every=2, stop_ids=[])) == text


def test_a_refused_stream_leaves_the_other_generation_alone(tiny):
    """A paused stream resumed after a `prefill` of another prompt ran its next decode steps on that prompt's
    caches and position before it raised: the prefill's `step()` then consumed position len + 2, not len. It now
    raises before any step, so the step after the prefill gives the float64 forward's logits."""
    model, cfg, w = tiny
    a = model.stream_text("Hello world", 12, read_every=2, stop_ids=[])
    next(a)
    other = [5, 6, 7]
    first = ref.greedy(cfg, w, other, 1)[0][0]
    model.prefill(other)
    with pytest.raises(RecordingError, match="another generation ran on this model while this stream was paused"):
        next(a)
    logits = model.step().numpy()[0]
    assert ref.rel_err(logits, ref.forward(cfg, w, other + [first])[-1]) < 1e-4


def test_generate_text_from_two_threads_runs_one_call_at_a_time(tiny):
    """generate_text streams: the model's lock was held for each prefill, run_steps and nothing else, so another
    thread's generate_text came in between a stream's session check and its steps or read (this one raised that its
    stream was paused, or returned the other prompt's text). Each call now holds the model whole."""
    model, cfg, w = tiny
    prompts = ["Hello world", "The cat sat"]
    want = [_expected(model, cfg, w, model.tokenizer.encode(p), 8, set())[1] for p in prompts]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # the threads switch often: every window between two locked calls is tried
    try:
        got = run_together(2, lambda i: [model.generate_text(prompts[i], 8, stop_ids=[], read_every=1)
                                         for _ in range(3)], timeout=60)
    finally:
        sys.setswitchinterval(old)
    assert got == [[want[i]] * 3 for i in range(2)]


def test_a_stream_reads_its_own_session_when_another_generation_waits(tiny):
    """A stream's prefill let go of the model's lock before the stream read `model.session`: a generate on another
    thread between the two made the stream take that generation's session for its own, pass every check and read
    the other prompt's ids as its text. The prefill and its session are now one locked step (the other generation
    runs once the stream lets go)."""
    model, cfg, w = tiny
    ids = model.tokenizer.encode("Hello world")
    _, text = _expected(model, cfg, w, ids, 6, set())
    other = [5, 6, 7, 8, 9, 10, 11]
    want_other, _ = ref.greedy(cfg, w, other, 6)
    real_prefill, other_got = model.prefill, []

    def prefill(*a, **kw):   # the stream's prefill, then another thread's generation at once, if it can run
        out = real_prefill(*a, **kw)
        t = threading.Thread(target=lambda: other_got.append(model.generate(other, 6)))
        t.start()
        t.join(0.3)   # it ran whole (the bug), or waits for the model's lock until the stream lets go
        return out

    model.prefill = prefill
    try:
        got = "".join(model.stream_text("Hello world", 6, read_every=6, stop_ids=[]))
    finally:
        del model.prefill
    for _ in range(100):   # the other generation runs after the stream
        if other_got:
            break
        time.sleep(0.05)
    assert got == text
    assert other_got == [want_other]


def test_chat_prompt_and_stop_ids(tiny):
    model, cfg, w = tiny
    tok = model.tokenizer
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a color."}]
    ids = tok.apply_chat_template(messages, tokenize=True)
    want, _ = ref.greedy(cfg, w, ids, 8)
    stop = want[4]
    kept, text = _expected(model, cfg, w, ids, 8, {stop})
    got = model.generate_text("Name a color.", 8, chat=True, system="Be brief.", stop_ids=[stop], read_every=3)
    assert got == text and model.last_stats["ids"] == kept and model.last_stats["stopped"]
    assert model.generate_text(messages, 8, chat=True, stop_ids=[stop]) == text  # a message list works alike


def test_stop_ids_as_a_set_or_a_range(tiny):
    """docs/models.md: stop_ids is a list of ids, "a set of ids is taken too" (generate takes a set, frozenset or
    range); generate_text refused {stop} with an ArgumentError. Now each stops where the list does."""
    model, cfg, w = tiny
    ids = model.tokenizer.encode("Hello world")
    want, _ = ref.greedy(cfg, w, ids, 8)
    stop = want[3]
    kept, text = _expected(model, cfg, w, ids, 8, {stop})
    for stops in ({stop}, frozenset([stop]), range(stop, stop + 1)):
        assert model.generate_text("Hello world", 8, stop_ids=stops) == text, stops
        assert model.last_stats["ids"] == kept and model.last_stats["stopped"]


def test_ids_past_the_tokenizers_vocabulary_have_no_text(tmp_path, dev):
    """A model's vocabulary padded past its tokenizer's (Qwen2.5: 151936 rows, 151665 tokens) may generate an id
    with no token: the stream raised LimitError ('StreamDecoder.push: id 719 ... outside the table's 701 rows')
    midway. Such an id has no text (transformers' decode skips it); it is still one of the ids."""
    cfg = tiny_config(vocab_size=768, eos_token_id=3)
    w = random_weights(cfg, seed=5)
    write_checkpoint(tmp_path, cfg, w)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_files.TINY_TOKENIZER / name, tmp_path / name)
    model = from_pretrained(tmp_path, dev, dtype="f32", max_seq=16)
    tok = model.tokenizer
    ids = tok.encode("Hello")
    want, _ = ref.greedy(cfg, w, ids, 8)
    assert any(t >= VOCAB for t in want)  # the case under test: the greedy ids hold one the tokenizer lacks
    assert model.generate_text("Hello", 8, stop_ids=[], read_every=3) == tok.decode([t for t in want if t < VOCAB])
    assert model.last_stats["ids"] == want


def test_a_str_subclass_prompt_is_its_text(tiny):
    """np.str_("Hello") (what numpy hands back from an array of prompts) was refused, 'generate_text:
    prompt=np.str_('Hello') must be a str', though args.choice takes str subclasses: text is read by its
    characters and kept as a plain str, the system message too."""
    import numpy as np

    model, _, _ = tiny
    want = model.generate_text("Hello", 2, stop_ids=[])
    assert model.generate_text(np.str_("Hello"), 2, stop_ids=[]) == want
    assert model.tokenizer.encode(np.str_("Hello")) == model.tokenizer.encode("Hello")
    ids = model.tokenizer.apply_chat_template([{"role": "system", "content": "Be brief"},
                                               {"role": "user", "content": "Hi"}], tokenize=True,
                                              add_generation_prompt=True)
    from wgraph.models import text

    assert text.prompt_ids(model.tokenizer, np.str_("Hi"), chat=True, system=np.str_("Be brief"),
                           where="generate_text") == ids


def test_sampled_text_follows_the_seed(tiny):
    model, _, _ = tiny
    a = model.generate_text("Hello", 6, temperature=0.9, top_k=20, seed=3, stop_ids=[])
    ids_a = model.last_stats["ids"]
    b = model.generate_text("Hello", 6, temperature=0.9, top_k=20, seed=3, stop_ids=[], read_every=2)
    assert (a, ids_a) == (b, model.last_stats["ids"])
    assert ids_a == model.generate(model.tokenizer.encode("Hello"), 6, temperature=0.9, top_k=20, seed=3)
    model.generate_text("Hello", 1)  # back to greedy for the other tests


def test_bad_requests_are_refused_before_gpu_work(tiny, dev, tmp_path):
    model, _, _ = tiny
    before = dev.stats.snapshot()
    for kwargs, err, match in [
        ({"system": "x"}, ArgumentError, "system='x' needs chat=True"),
        ({"temperature": -1.0}, ArgumentError, "temperature=-1.0 must be a finite real"),
        ({"temperature": float("nan")}, ArgumentError, "temperature=nan"),
        ({"top_p": 0.0}, ArgumentError, r"top_p=0.0 must be a finite real in \(0, 1\]"),
        ({"read_every": True}, ArgumentError, "read_every=True must be an integer"),
        ({"stop_ids": [VOCAB]}, LimitError, "stop_ids: id 701 at index 0 is outside"),
        ({"chat": 1}, ArgumentError, "chat=1 must be True or False"),
        ({"stop": [1]}, ArgumentError, "stop=\\[1\\] is not an option"),
    ]:
        with pytest.raises(err, match=match):
            model.generate_text("Hello", 4, **kwargs)
    with pytest.raises(LimitError, match="exceed the KV cache of 64"):
        model.stream_text("Hello", 100)
    with pytest.raises(ArgumentError, match="generate_text: prompt=b'Hello' must be a str"):
        model.generate_text(b"Hello", 4)
    with pytest.raises(ArgumentError, match=r"prompt=\[\{'role': 'user', 'content': 'Hi'\}\] must be a str \(a list "
                       r"of messages needs chat=True; token ids go to model.generate"):
        model.generate_text([{"role": "user", "content": "Hi"}], 4)
    with pytest.raises(ArgumentError, match=r"prompt=\[1, 2\] must be a str .*model.generate\(ids, max_new_tokens\)"):
        model.stream_text([1, 2], 4)
    with pytest.raises(LimitError, match=r"positions \(max_seq\): load the model with a larger max_seq="):
        model.generate_text("Hello", 100)
    with pytest.raises(LimitError, match=r"positions \(max_seq\): load the model with a larger max_seq="):
        model.generate([1, 2], 100)
    assert dev.stats.since(before).submits == 0
    path, _, _ = _write(tmp_path / "bare", with_tokenizer=False)
    bare = from_pretrained(path, dev, dtype="f32", max_seq=16)
    with pytest.raises(NoTokenizerError, match="no tokenizer"):
        bare.generate_text("Hello", 2)


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "wgraph", "generate", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


def test_cli_streams_text(tmp_path, capsys, monkeypatch):
    path, cfg, w = _write(tmp_path / "m")
    from wgraph.models.tokenizer import Tokenizer

    tok = Tokenizer.from_directory(path)
    ids = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=True)
    want, _ = ref.greedy(cfg, w, ids, 6)
    hit = next((i for i, t in enumerate(want) if t in tok.stop_ids), len(want))
    r = _cli(path, "--prompt", "Hi", "--chat", "--max-new-tokens", 6, "--dtype", "f32")
    assert r.returncode == 0, r.stderr
    assert r.stdout == tok.decode(want[:hit]) + "\n"
    assert "tokens/s" in r.stderr and "f32 weights" in r.stderr
    # no --max-seq: the cache holds the chat prompt's tokens and the new ones, no more
    assert f"a KV cache of {len(ids) + 6} positions" in r.stderr
    # the error and --help paths in this process (`python -m wgraph` and its exit status are the run's above and
    # test_cli_stops_quietly_when_stdout_closes's); argparse wraps --help at COLUMNS, a pipe's 80 in a subprocess
    from wgraph.__main__ import main as cli_main

    capsys.readouterr()
    assert cli_main(["generate", str(tmp_path / "nope"), "--prompt", "Hi"]) == 1
    assert "config.json" in capsys.readouterr().err
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit) as exit_:
        cli_main(["generate", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and "(default: 32)" in out and "--chat" in out


@pytest.mark.parametrize("what", [("--prompt", "Hi"), ("--prompt-ids", "3,4")])
def test_cli_stops_quietly_when_stdout_closes(tmp_path, what):
    """`generate ... | head` where head has exited: the write to the closed pipe raised BrokenPipeError with a
    traceback (and, for the ids, 'Exception ignored ... BrokenPipeError' at the exit, status 120); now exit 1,
    nothing on stderr but the progress."""
    path, _, _ = _write(tmp_path / "m")
    read, write = os.pipe()
    os.close(read)   # the reader is gone before the first write
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        r = subprocess.run([sys.executable, "-m", "wgraph", "generate", str(path), *what, "--max-new-tokens", "3",
                            "--dtype", "f32", "--stop-ids", "none"], stdout=write, stderr=subprocess.PIPE, text=True,
                           env=env, cwd=ROOT, timeout=300)
    finally:
        os.close(write)
    assert r.returncode == 1, r.stderr
    assert "BrokenPipeError" not in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_ids_cli_keeps_working(tmp_path, capsys):
    from wgraph.__main__ import main as cli_main

    path, cfg, w = _write(tmp_path / "ids", with_tokenizer=False)
    want, _ = ref.greedy(cfg, w, [3, 4], 5)
    assert cli_main(["generate", str(path), "--prompt-ids", "3,4", "--max-new-tokens", "5", "--dtype", "f32",
                     "--max-seq", "16"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == ",".join(map(str, want)) and "a KV cache of 16 positions" in err   # as asked
    assert cli_main(["generate", str(path), "--prompt", "x", "--dtype", "f32", "--max-seq", "16"]) == 1
    assert "no tokenizer" in capsys.readouterr().err
    # --x-int8 is for a GGUF file's block matrices: a directory of float weights refuses it, naming it
    assert cli_main(["generate", str(path), "--prompt-ids", "3,4", "--x-int8"]) == 1
    assert "x_int8=True rounds x for the GEMVs of a GGUF file's block matrices" in capsys.readouterr().err


def test_cli_reads_the_tokenizer_once(tmp_path, capsys, monkeypatch, dev):
    """`generate --prompt` sizes the KV cache from the prompt's tokens and then loads the model from the same
    opened files (open_pretrained): the tokenizer is built once, and the model gets that one; the prompt is
    tokenized once (the ids that size the cache start the generation)."""
    from wgraph.__main__ import main as cli_main
    from wgraph.models import open_pretrained
    from wgraph.models.tokenizer import Tokenizer

    path, cfg, w = _write(tmp_path / "once")
    built = []
    real = Tokenizer.from_directory.__func__
    monkeypatch.setattr(Tokenizer, "from_directory", classmethod(lambda cls, p: built.append(p) or real(cls, p)))
    encoded = []
    encode = Tokenizer.encode
    monkeypatch.setattr(Tokenizer, "encode", lambda self, text, **kw: encoded.append(text) or encode(self, text, **kw))
    assert cli_main(["generate", str(path), "--prompt", "Hello world", "--max-new-tokens", "3", "--dtype", "f32"]) == 0
    assert encoded == ["Hello world"]
    ids = real(Tokenizer, path).encode("Hello world")
    assert len(built) == 1 and f"a KV cache of {len(ids) + 3} positions" in capsys.readouterr().err
    files = open_pretrained(path)
    model = files.load(dev, dtype="f32", max_seq=16)
    assert model.tokenizer is files.tokenizer and len(built) == 2   # built once more: these files were opened anew
    assert model.generate(ids, 3) == ref.greedy(cfg, w, ids, 3)[0]


def test_cli_says_nothing_was_generated_for_no_new_tokens(tmp_path, capsys):
    """--max-new-tokens 0 printed '0 tokens: prefill of N tokens 0.000 s', though the text API ran no prefill
    (last_stats: 0 tokens, 0 submits): the line now says nothing was generated."""
    from wgraph.__main__ import main as cli_main

    path, _, _ = _write(tmp_path / "none")
    assert cli_main(["generate", str(path), "--prompt", "Hello", "--max-new-tokens", "0", "--dtype", "f32"]) == 0
    out, err = capsys.readouterr()
    assert out == "\n" and "tokens: prefill of" not in err
    assert "no new tokens asked for (--max-new-tokens 0): nothing generated, no prefill of the " in err
    assert "0 submits" in err


def test_cli_text_on_a_stdout_that_cannot_encode_it(tmp_path, monkeypatch):
    """A stdout whose encoding lacks a character of the text (PYTHONIOENCODING=ascii, a cp1252 console or file on
    Windows) raised UnicodeEncodeError with a traceback at the first such piece, the generation cut off: such a
    character is now written as a backslash escape, as Python writes stderr, and the rest follows."""
    import io

    from wgraph.__main__ import main as cli_main

    path, cfg, w = _write(tmp_path / "m")
    from wgraph.models.tokenizer import Tokenizer

    tok = Tokenizer.from_directory(path)
    want, _ = ref.greedy(cfg, w, tok.encode("Hello world"), 12)
    text = tok.decode(want)
    assert not text.isascii()   # the case under test: this seed's text has characters ASCII lacks
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", out)
    assert cli_main(["generate", str(path), "--prompt", "Hello world", "--max-new-tokens", "12", "--dtype", "f32",
                     "--stop-ids", "none", "--read-every", "1"]) == 0
    out.flush()
    assert out.buffer.getvalue().decode("ascii") == text.encode("ascii", "backslashreplace").decode("ascii") + "\n"


def test_a_prompt_that_is_not_unicode_text_is_named(tiny):
    """A prompt holding a lone surrogate (a shell argument of invalid UTF-8) was refused as 'Tokenizer.encode: text
    holds '\\udcff' at 18', with chat=True at its place in the rendered template, which the caller never saw: the
    prompt (the system message) is now named with its own index, before it is rendered."""
    model, _, _ = tiny
    bad = b"hi \xff".decode("utf-8", "surrogateescape")
    before = model.device.stats.snapshot()
    for kwargs in ({}, {"chat": True}):
        with pytest.raises(ArgumentError, match=r"^generate_text: prompt holds '\\udcff' at 3, not Unicode text"):
            model.generate_text(bad, 2, **kwargs)
    with pytest.raises(ArgumentError, match=r"^stream_text: system holds '\\udcff' at 3, not Unicode text"):
        model.stream_text("hi", 2, chat=True, system=bad)
    with pytest.raises(ArgumentError, match=r"^generate_text: prompt\[1\]\['content'\] holds '\\udcff' at 3, not "):
        model.generate_text([{"role": "system", "content": "S"}, {"role": "user", "content": bad}], 2, chat=True)
    assert model.device.stats.since(before).submits == 0
