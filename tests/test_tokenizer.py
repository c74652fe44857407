"""Tokenizer and chat template: ids, decoded text and rendered chats equal to transformers' (tests/data/
text_goldens.json, made once by tests/data/make_text_goldens.py) for the tiny tokenizer directory, a variant of it
and GGUF vocabularies of both kinds; streaming decode; what is refused. No GPU work."""

import json
import random
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tiny_files
from wgraph.errors import ArgumentError, ChatTemplateError, CheckpointError, LimitError
from wgraph.models.chat_template import ChatTemplate
from wgraph.models.tokenizer import Tokenizer

GOLDENS = json.loads((tiny_files.DATA / "text_goldens.json").read_text())["sources"]
GGUF_SOURCES = {  # as in make_text_goldens.py: (builder, pre, arch)
    "gguf_gpt2_llama_bpe": ("byte_level", "llama-bpe", "llama"),
    "gguf_gpt2_unknown_pre": ("byte_level", "gpt-2", "llama"),  # a name transformers does not know: GPT-2 regex
    "gguf_gpt2_qwen2": ("byte_level", "qwen2", "qwen2"),
    "gguf_spm_llama": ("spm", None, "llama"),
    "gguf_spm_gemma2": ("spm", None, "gemma2"),
}


def make(name: str, tmp) -> Tokenizer:
    if name == "directory":
        return Tokenizer.from_directory(tiny_files.TINY_TOKENIZER)
    if name == "directory_variant":
        return Tokenizer.from_directory(tiny_files.write_tokenizer_variant(tmp / name))
    if name == "directory_unigram":
        return Tokenizer.from_directory(tiny_files.write_unigram_tokenizer(tmp / name))
    builder, pre, arch = GGUF_SOURCES[name]
    meta = tiny_files.byte_level_tokenizer(pre) if builder == "byte_level" else tiny_files.spm_tokenizer()
    return Tokenizer.from_gguf(tiny_files.write_tokenizer_gguf(tmp / f"{name}.gguf", meta, arch))


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tok")
    return {name: make(name, tmp) for name in GOLDENS}


@pytest.mark.parametrize("name", list(GOLDENS))
def test_ids_and_text_equal_transformers(tokenizers, name):
    tok, gold = tokenizers[name], GOLDENS[name]
    assert len(gold["encode"]) >= 11
    for case in gold["encode"]:
        ids = tok.encode(case["text"])
        assert ids == case["ids"], case["text"]
        assert tok.decode(ids) == case["decode"], case["text"]
        assert tok.decode(ids, skip_special_tokens=False) == case["decode_special"], case["text"]
    for case in gold["decode_slices"]:  # prefixes ending inside a multi-byte character
        assert tok.decode(case["ids"]) == case["text"], case["ids"]
    want = dict(gold["special_tokens"])
    if name == "gguf_spm_gemma2":
        # transformers' GemmaTokenizer adds its class default mask token (and <bos> <eos> <pad>) when the vocabulary
        # lacks them; wgraph does not grow a GGUF vocabulary beyond the model's embedding (docs/models.md)
        want.pop("mask_token")
    assert tok.special == want


@pytest.mark.parametrize("name", [n for n in GOLDENS if GOLDENS[n]["chat"]])
def test_chat_templates_equal_transformers(tokenizers, name):
    tok, gold = tokenizers[name], GOLDENS[name]
    for case in gold["chat"]:
        kw = {} if case["template"] is None else {"template": case["template"]}
        text = tok.apply_chat_template(case["messages"], add_generation_prompt=case["add_generation_prompt"], **kw)
        assert text == case["text"]
        ids = tok.apply_chat_template(case["messages"], add_generation_prompt=case["add_generation_prompt"],
                                      tokenize=True, **kw)
        assert ids == case["ids"]
    for case in gold["refuses"]:
        kw = {} if case["template"] is None else {"template": case["template"]}
        if case["refused"]:
            with pytest.raises(ChatTemplateError, match=case["error"]):
                tok.apply_chat_template(case["messages"], **kw)
        else:
            tok.apply_chat_template(case["messages"], **kw)


def test_special_tokens_in_text_encode_to_their_ids(tokenizers):
    """As transformers by default (docs/models.md): a user's "<|im_end|>" is the special id, in a plain prompt and in
    a chat message, and the stop id generation ends at."""
    tok = tokenizers["directory"]
    end = tok.token_id("<|im_end|>")
    assert end in tok.stop_ids
    assert tok.encode("hi <|im_end|> there", add_special_tokens=False).count(end) == 1
    chat = tok.apply_chat_template([{"role": "user", "content": "<|im_end|>"}], tokenize=True)
    assert chat.count(end) == 2


def test_stop_ids_follow_the_files(tokenizers):
    assert tokenizers["directory"].stop_ids == [tokenizers["directory"].token_id("<|im_end|>")]
    assert tokenizers["directory_variant"].stop_ids == [3, 6]  # generation_config.json's list
    assert tokenizers["gguf_spm_llama"].stop_ids == [2]  # tokenizer.ggml.eos_token_id


@pytest.mark.parametrize("name", ["directory", "directory_unigram", "gguf_spm_llama", "gguf_spm_gemma2"])
def test_streaming_pieces_add_up_to_the_decoded_text(tokenizers, name):
    """directory_unigram cleans up its decoded text (" ." -> "."): its stream gave "Hello world . do n't" where
    decode gives "Hello world. don't"."""
    tok = tokenizers[name]
    rng = random.Random(0)
    for case in GOLDENS[name]["encode"]:
        for chunk in (1, 2, 3):
            dec = tok.stream_decoder()
            pieces = [dec.push(case["ids"][i:i + chunk]) for i in range(0, len(case["ids"]), chunk)]
            pieces.append(dec.flush())
            assert "".join(pieces) == tok.decode(case["ids"]), (case["text"], chunk)
            if "\ufffd" not in case["decode"]:  # never half a character
                assert not any("\ufffd" in p for p in pieces), (case["text"], pieces)
        dec = tok.stream_decoder(skip_special_tokens=False)
        cut = sorted(rng.sample(range(len(case["ids"]) + 1), min(2, len(case["ids"]) + 1)))
        parts = [case["ids"][:cut[0]], case["ids"][cut[0]:cut[-1]], case["ids"][cut[-1]:]]
        assert "".join(dec.push(p) for p in parts) + dec.flush() == case["decode_special"]


def test_a_cleaned_up_stream_holds_back_only_what_may_change(tokenizers):
    """A tokenizer that cleans up spaces holds back the text a later rewrite may still reach, no more: words of one
    letter stream as they come (a space before a letter other than n starts no rewrite)."""
    tok = tokenizers["directory_unigram"]
    dec = tok.stream_decoder()
    ids = tok.encode("a b c d e f g h", add_special_tokens=False)
    pieces = [dec.push([i]) for i in ids]
    assert "".join(pieces) == "a b c d e f g" and dec.flush() == " h"


@given(st.lists(st.integers(0, 700), max_size=24), st.integers(1, 4))
def test_streaming_any_ids(ids, chunk):
    tok = Tokenizer.from_directory(tiny_files.TINY_TOKENIZER)
    dec = tok.stream_decoder()
    text = "".join(dec.push(ids[i:i + chunk]) for i in range(0, len(ids), chunk)) + dec.flush()
    assert text == tok.decode(ids)


@pytest.mark.parametrize("name", ["gguf_spm_llama", "gguf_spm_gemma2"])
def test_streaming_byte_fallback_runs(tokenizers, name):
    """tokenizers decodes a run of byte-fallback tokens as one: all U+FFFD where the run is not UTF-8, its valid
    bytes too. The stream emitted "\\n" for <0x0A> and then "\ufffd" for an unfinished <0xF0> after it, where
    decode gives "\ufffd\ufffd"; now no piece ends inside a run (a skipped special token does not end one)."""
    tok = tokenizers[name]
    b = {k: tok.token_id(f"<0x{k:02X}>") for k in (0x0A, 0x25, 0xC2, 0xF0, 0x9F, 0x99, 0x82)}
    word = tok.encode("ft", add_special_tokens=False)
    bos = tok.token_id(tok.special["bos_token"])
    cases = [[b[0x0A], b[0xF0]], [b[0x25], b[0xC2]] + word, [b[0x0A], b[0xF0], b[0x9F], b[0x99], b[0x82]] + word,
             [b[0x0A], bos, b[0xF0]], word + [b[0x0A]] + word]
    rng = random.Random(1)
    every = [tok.token_id(f"<0x{k:02X}>") for k in range(256)]
    cases += [[rng.choice(every + [bos] + word) for _ in range(rng.randint(1, 10))]
              for _ in range(300)]
    for ids in cases:
        for skip in (True, False):
            dec = tok.stream_decoder(skip_special_tokens=skip)
            pieces = [dec.push([i]) for i in ids] + [dec.flush()]
            assert "".join(pieces) == tok.decode(ids, skip_special_tokens=skip), (ids, skip, pieces)


def test_bad_input_is_refused(tokenizers, tmp_path):
    tok = tokenizers["directory"]
    with pytest.raises(ArgumentError, match="Tokenizer.encode: text=b'bytes' must be a str"):
        tok.encode(b"bytes")
    with pytest.raises(LimitError, match=r"Tokenizer.decode: id 701 at index 1 is outside the table's 701 rows"):
        tok.decode([1, 701])
    with pytest.raises(ArgumentError, match="integers"):
        tok.decode([1.0])
    with pytest.raises(ChatTemplateError, match="template='nope' is not one of"):
        tok.apply_chat_template([{"role": "user", "content": "x"}], template="nope")
    with pytest.raises(ChatTemplateError, match="only JSON values"):
        tok.apply_chat_template([{"role": "user", "content": object()}])
    with pytest.raises(CheckpointError, match="no chat template"):
        tokenizers["gguf_spm_llama"].apply_chat_template([{"role": "user", "content": "x"}])
    with pytest.raises(CheckpointError, match="no tokenizer.json"):
        Tokenizer.from_directory(tmp_path)
    meta = dict(tiny_files.spm_tokenizer(), model="bert")
    with pytest.raises(CheckpointError, match=r"tokenizer.ggml.model 'bert' is not supported"):
        Tokenizer.from_gguf(tiny_files.write_tokenizer_gguf(tmp_path / "bert.gguf", meta))
    meta = dict(tiny_files.byte_level_tokenizer(), merges=["a b c"])
    with pytest.raises(CheckpointError, match="merge 'a b c' is not two tokens"):
        Tokenizer.from_gguf(tiny_files.write_tokenizer_gguf(tmp_path / "merges.gguf", meta))


@pytest.mark.parametrize("name", ["tokenizer_config.json", "generation_config.json", "config.json"])
def test_json_nested_past_the_parser_is_named(tmp_path, name):
    """A tokenizer_config.json, generation_config.json or config.json nested 100000 lists deep raised json's bare
    RecursionError from Tokenizer.from_directory; it is a CheckpointError naming the file, as config.json's reader
    says it."""
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / f).write_bytes((tiny_files.TINY_TOKENIZER / f).read_bytes())
    (tmp_path / name).write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(CheckpointError, match=rf"{re.escape(name)} is not valid JSON: RecursionError: maximum "
                                              r"recursion depth exceeded"):
        Tokenizer.from_directory(tmp_path)


@pytest.mark.parametrize("name", [[1], {"a": 1}, None, 3])
def test_a_chat_template_name_that_is_not_a_string_is_named(name):
    """tokenizer_config.json's chat_template as [{"name": [1], "template": ...}] raised TypeError (unhashable
    type: 'list') building the dict of templates; any name that is not a string is a CheckpointError naming them."""
    value = [{"name": "default", "template": "x"}, {"name": name, "template": "y"}]
    with pytest.raises(CheckpointError, match=rf"^tokenizer_config.json: the chat templates' names "
                                              rf"{re.escape(json.dumps(['default', name]))} must be strings$"):
        ChatTemplate.from_value(value, "tokenizer_config.json")


def _spm_with(tokens: list[str]) -> dict:
    """The tiny SentencePiece-style GGUF vocabulary with `tokens` added (normal tokens, score 0)."""
    spm = tiny_files.spm_tokenizer()
    new = [t for t in tokens if t not in spm["tokens"]]
    return dict(spm, tokens=spm["tokens"] + new, token_types=spm["token_types"] + [1] * len(new),
                scores=spm["scores"] + [0.0] * len(new))


def test_implied_merges_are_bounded_work(tmp_path):
    """A SentencePiece GGUF vocabulary (no tokenizer.ggml.merges) has its merges made from every split of a token
    into two tokens: one token of 400,000 characters (a 420 KB file) took ~19 s, slicing it at each point (quadratic:
    4.8 s at 200,000), and "a" .. "a" * 1000 (a 537 KB file) implies 500,000 pairs holding 3.3e8 characters (3.3 s,
    870 MB). Only splits at token lengths are tried now, and the pairs are bounded by the vocabulary's size."""
    import time

    path = tiny_files.write_tokenizer_gguf(tmp_path / "long.gguf", _spm_with(["a" * 400_000]))
    start = time.perf_counter()
    tok = Tokenizer.from_gguf(path)
    assert time.perf_counter() - start < 2.0
    assert tok.decode(tok.encode("a b")) == "a b"
    path = tiny_files.write_tokenizer_gguf(tmp_path / "runs.gguf", _spm_with(["a" * k for k in range(1, 1001)]))
    with pytest.raises(CheckpointError, match=r"runs.gguf: the 1900 tokens of tokenizer.ggml.tokens split into more "
                                              r"than 121600 pairs of tokens or \d+ characters of them \(64 per token "
                                              r"and per character"):
        Tokenizer.from_gguf(path)


def test_reasoning_tuples_and_the_generation_tag_render_as_transformers():
    """What transformers 5.25 does before and while rendering (checked against it by a probe,
    /work/tmp/probe_text): a message's reasoning under any of its names reaches a template that reads another
    (reasoning_content from the first of reasoning_content / thinking / reasoning; thinking unless the message has
    one), where it silently vanished; a tuple shows as a tuple; `{% generation %}` renders its body (it was an
    unknown tag, the whole tokenizer refused at load)."""
    names = ChatTemplate({"default": "{% for m in messages %}{{ m.reasoning_content }}/{{ m.thinking }}/"
                                     "{{ m.reasoning }};{% endfor %}"}, "test")
    msgs = [{"role": "assistant", "content": "A", "reasoning_content": "X", "thinking": "Y"},
            {"role": "assistant", "content": "B", "thinking": "Z"}, {"role": "user", "content": "u"},
            {"role": "assistant", "content": "C", "reasoning": "R", "thinking": None}]
    assert names.render(msgs, add_generation_prompt=False) == "X/Y/;Z/Z/;//;R/R/R;"
    qwen = ChatTemplate({"default": "{% for m in messages %}{% if m.reasoning_content is string %}<think>"
                                    "{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}|{% endfor %}"}, "test")
    assert qwen.render([{"role": "user", "content": "q"}, {"role": "assistant", "content": "A", "reasoning": "why"}],
                       add_generation_prompt=False) == "q|<think>why</think>A|"
    shown = ChatTemplate({"default": "{{ messages[0].content }}"}, "test")
    assert shown.render([{"role": "user", "content": ("a", "b")}]) == "('a', 'b')"
    gen = ChatTemplate({"default": "{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}"
                                   "{% endfor %}"}, "test")
    assert gen.render([{"role": "user", "content": "q"}, {"role": "assistant", "content": "A"}]) == "qA"


def test_template_sandbox_and_helpers():
    t = ChatTemplate({"default": "{{ messages[0]['content'] | tojson }} {{ strftime_now('%Y') | length }}"
                                 "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
                                 "{% endfor %} {{ ns.n }} {{ bos_token }}"}, "test")
    assert t.render([{"role": "user", "content": "ünï"}], special_tokens={"bos_token": "<s>"}) == '"ünï" 4 1 <s>'
    one = [{"role": "user", "content": "x"}]
    escape = ChatTemplate({"default": "{{ ''.__class__.__mro__[1].__subclasses__() }}"}, "test")
    with pytest.raises(ChatTemplateError, match="refused the conversation"):
        escape.render(one)
    mutate = ChatTemplate({"default": "{% set _ = messages.append(1) %}"}, "test")  # immutable sandbox
    with pytest.raises(ChatTemplateError, match="refused the conversation: .*unsafe"):
        mutate.render(one)
    under = ChatTemplate({"default": "{% set ns = namespace(_x=1) %}"}, "test")
    with pytest.raises(ChatTemplateError, match="underscore"):
        under.render(one)
    with pytest.raises(CheckpointError, match="not valid Jinja"):
        ChatTemplate({"default": "{% for %}"}, "test")


@pytest.mark.parametrize("spelling", ["$A", "<s> x", "<s:1>"])
def test_special_tokens_of_any_spelling_are_added_as_ids(tmp_path, spelling):
    """A BOS spelled "$A" (template syntax) repeated the text; one with a space or a colon raised ValueError from
    tokenizers: the post-processor names BOS / EOS by placeholders and adds their ids."""
    meta = tiny_files.byte_level_tokenizer()
    meta["tokens"] = list(meta["tokens"])
    meta["tokens"][meta["bos_token_id"]] = spelling
    tok = Tokenizer.from_gguf(tiny_files.write_tokenizer_gguf(tmp_path / "bos.gguf", dict(meta, add_bos=True)))
    plain = tok.encode("abc ab", add_special_tokens=False)
    assert tok.encode("abc ab") == [meta["bos_token_id"]] + plain and plain
    assert tok.decode(tok.encode("abc ab")) == "abc ab"


def test_two_ids_of_one_token_are_refused(tmp_path):
    """Two ids of one token string (or of one byte spelling: " " is "Ġ" in a byte-level vocabulary) left one id
    decoding to nothing and the vocabulary one short; refused by name."""
    meta = tiny_files.byte_level_tokenizer()
    tokens = list(meta["tokens"])
    g = tokens.index("Ġ")
    for i, spelling, match in ((5, tokens[7], rf"tokens\[5\] = {re.escape(repr(tokens[7]))} and \[7\] = .* are the "
                                               r"same token$"),
                               (1, " ", rf"tokens\[1\] = ' ' and \[{g}\] = 'Ġ' are the same token once spelled in "
                                        r"bytes")):
        bad = list(tokens)
        bad[i] = spelling
        with pytest.raises(CheckpointError, match=match):
            Tokenizer.from_gguf(tiny_files.write_tokenizer_gguf(tmp_path / "dup.gguf", dict(meta, tokens=bad)))
    spm = tiny_files.spm_tokenizer()
    bad = list(spm["tokens"])
    bad[10] = bad[11]
    with pytest.raises(CheckpointError, match=r"tokens\[10\] = .* and \[11\] = .* are the same token"):
        Tokenizer.from_gguf(tiny_files.write_tokenizer_gguf(tmp_path / "dup_spm.gguf", dict(spm, tokens=bad)))


def test_a_template_is_bounded_work_and_its_errors_are_named():
    """A template file is data: what it computes is bounded (powers, repetitions, range() per render, never folded
    at compile, where `7**999999999` hung the load) and anything it raises is a ChatTemplateError (CheckpointError
    at load) naming the template, never a Python exception (ZeroDivisionError, RecursionError, ...)."""
    msgs = [{"role": "user", "content": "hi"}]
    refused = {"{{ 7**999999999 }}": "7 \\*\\* 999999999 is larger than chat templates compute",
               "{{ 'a' * 10**10 }}": "a repetition of 10000000000 items",
               "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}":
                   "range\\(\\) made more than 131072 items in one render",
               "{{ 1/0 }}": "failed: ZeroDivisionError", "{{ 1 + 'a' }}": "failed: TypeError",
               "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}": "failed: RecursionError",
               "{{ '{:q}'.format(1) }}": "failed: ValueError"}
    for src, match in refused.items():
        t = ChatTemplate({"default": src}, "test")   # compiles at once: nothing folded
        with pytest.raises(ChatTemplateError, match=r"the chat template \(test, 'default'\) .*" + match):
            t.render(msgs)
    with pytest.raises(CheckpointError, match="chat template 'default' cannot be compiled: RecursionError"):
        ChatTemplate({"default": "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}"}, "test")
    ok = ChatTemplate({"default": "{{ 'ab' * 3 }} {{ 2 ** 10 }} {{ [1] * 2 }} {% for i in range(3) %}{{ i }}"
                                  "{% endfor %}{% for m in messages %}{{ m.content * 2 }}{% endfor %}"}, "test")
    assert ok.render(msgs) == "ababab 1024 [1, 1] 012hihi"


def test_an_empty_conversation_is_refused(tokenizers):
    """As transformers ("Cannot apply chat template to an empty conversation"): the SmolLM2-style template rendered
    [] as '<|im_start|>assistant\\n', a prompt of no turn that generate_text(chat=True) went on to answer."""
    for name in ("directory", "directory_variant"):
        with pytest.raises(ChatTemplateError, match="messages is empty; a conversation needs at least one message"):
            tokenizers[name].apply_chat_template([])
        with pytest.raises(ChatTemplateError, match="messages is empty"):
            tokenizers[name].apply_chat_template((), tokenize=True)


def test_the_template_is_chosen_as_transformers_chooses_it(tmp_path):
    """transformers' get_chat_template: with tools given, a "tool_use" template wins over "default" (wgraph rendered
    the default one, which may leave the tools out); named templates without a "default" and no name given are
    refused (wgraph rendered the first one, silently)."""
    msgs = [{"role": "user", "content": "x"}]
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
    both = ChatTemplate({"default": "D{{ tools is none }}", "tool_use": "T{{ tools | length }}"}, "test")
    assert both.render(msgs) == both.render(msgs, tools=None) == "DTrue"
    assert both.render(msgs, tools=[tool]) == "T1"
    assert both.render(msgs, tools=[tool], template="default") == "DFalse"
    named = ChatTemplate.from_value([{"name": "tool_use", "template": "T"}, {"name": "rag", "template": "R"}], "cfg")
    with pytest.raises(ChatTemplateError, match=r"the chat templates \(cfg\) are named \['tool_use', 'rag'\], none "
                                                r"'default': name one with template="):
        named.render(msgs)
    assert named.render(msgs, template="rag") == "R" and named.render(msgs, tools=[tool]) == "T"
    # a directory with additional_chat_templates/ only: the same rule
    d = tmp_path / "extra"
    d.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (d / name).write_bytes((tiny_files.TINY_TOKENIZER / name).read_bytes())
    (d / "additional_chat_templates").mkdir()
    (d / "additional_chat_templates" / "rag.jinja").write_text("R")
    with pytest.raises(ChatTemplateError, match="none 'default'"):
        Tokenizer.from_directory(d).apply_chat_template(msgs)


def test_tokenizers_failing_on_a_hostile_tokenizer_json_is_named(tmp_path):
    """tokenizers panics on some hostile files (a continuing_subword_prefix of "<0xZZ>"; a split regex
    past Oniguruma's retry limit on a long input): the panic reached the caller as pyo3's PanicException, a
    BaseException that `except Exception` and the command line let through. It is a CheckpointError naming the
    file now (or nothing, where a later tokenizers no longer fails)."""
    base = json.loads((tiny_files.TINY_TOKENIZER / "tokenizer.json").read_text())
    regex = {"type": "Split", "pattern": {"Regex": "(a|aa)+$"}, "behavior": "Isolated", "invert": False}
    for name, tj in {"prefix": dict(base, model=dict(base["model"], continuing_subword_prefix="<0xZZ>")),
                     "regex": dict(base, pre_tokenizer=regex)}.items():
        d = tmp_path / name
        d.mkdir()
        (d / "tokenizer.json").write_text(json.dumps(tj))
        (d / "tokenizer_config.json").write_bytes((tiny_files.TINY_TOKENIZER / "tokenizer_config.json").read_bytes())
        try:
            tok = Tokenizer.from_directory(d)
            ids = tok.encode("a" * 40 + "b")
            tok.decode(ids)
        except CheckpointError as e:
            assert str(d / "tokenizer.json") in str(e), e


def test_transformers_only_chat_options_are_refused(tokenizers):
    """chat_template="llama3" (transformers' way to name a template) rendered the default template, and
    continue_final_message=True closed the final message: both became template variables no template reads."""
    tok = tokenizers["directory"]
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "The answer is"}]
    with pytest.raises(ArgumentError, match=r"chat_template='llama3' is an option of transformers' "
                                            r"apply_chat_template that wgraph does not take; wgraph names a template "
                                            r"with template= \(one of \['default', 'llama3'\]\)"):
        tok.apply_chat_template(msgs, chat_template="llama3")
    for name, value in (("continue_final_message", True), ("return_dict", True), ("max_length", 8)):
        with pytest.raises(ArgumentError, match=f"{name}={value} is an option of transformers'"):
            tok.apply_chat_template(msgs, add_generation_prompt=False, **{name: value})
    assert tok.apply_chat_template(msgs, template="llama3").startswith("<|begin_of_text|>")


def test_malformed_gguf_tokenizers_and_text_are_named(tmp_path):
    """A SentencePiece vocabulary whose merges name unknown tokens raised tokenizers' bare Exception; a
    tokenizer.ggml.model that is not a string raised ValueError; text holding a lone surrogate (invalid UTF-8 from
    a shell argument) raised TypeError from tokenizers."""
    spm = dict(tiny_files.spm_tokenizer(), merges=["nosuch token"])
    with pytest.raises(CheckpointError, match="the vocabulary and merges do not form a BPE model"):
        Tokenizer.from_gguf(tiny_files.write_tokenizer_gguf(tmp_path / "m.gguf", spm))
    import gguf

    w = gguf.GGUFWriter(str(tmp_path / "model.gguf"), "llama")
    w.add_key_value("tokenizer.ggml.model", [1, 2], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT32)
    w.add_token_list(["a", "b"])
    for step in (w.write_header_to_file, w.write_kv_data_to_file, w.write_tensors_to_file, w.close):
        step()
    with pytest.raises(CheckpointError, match=r"tokenizer.ggml.model .* is not supported"):
        Tokenizer.from_gguf(tmp_path / "model.gguf")
    tok = Tokenizer.from_directory(tiny_files.TINY_TOKENIZER)
    bad = b"hi \xff\xfe".decode("utf-8", "surrogateescape")
    with pytest.raises(ArgumentError, match=r"Tokenizer.encode: text holds '\\udcff\\udcfe' at 3, not Unicode text"):
        tok.encode(bad)


@pytest.mark.parametrize("pre", ["smollm", "starcoder"])
def test_digits_first_pre_tokenizers_equal_their_tokenizer_json(tmp_path, pre):
    """llama.cpp splits every digit off first for these tokenizer.ggml.pre names, as their tokenizer.json's
    Digits(individual_digits=True) + ByteLevel do. GPT-2's regex alone gave SmolLM2 "\\n" "\\n" "1" for "\\n\\n1"
    (its own tokenizer and llama.cpp: "\\n\\n" "1") and " " " " "2" for "  2"."""
    from tokenizers import AddedToken, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as Backend

    meta = tiny_files.byte_level_tokenizer(pre)
    tok = Tokenizer.from_gguf(tiny_files.write_tokenizer_gguf(tmp_path / "t.gguf", meta))
    ref = Backend(models.BPE(vocab={t: i for i, t in enumerate(meta["tokens"])},
                             merges=[tuple(m.split(" ")) for m in meta["merges"]], fuse_unk=False))
    ref.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    ref.decoder = decoders.ByteLevel()
    ref.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, k in zip(meta["tokens"], meta["token_types"]) if k == 3])
    for text in ["Steps:\n\n1. go\n\n\n2. stop", "x  2", "a\n 3", "  12345  67 8.9", "１２ ٣", "Hello  world\n\n"]:
        ids = tok.encode(text)
        assert ids == ref.encode(text).ids, text
        assert tok.decode(ids) == text


def test_a_template_cannot_allocate_or_loop_without_bound(monkeypatch):
    """Only powers, repetitions, range() and what a template writes were bounded: `'a'|center(10**10)` allocated
    10 GB, `ns.s ~ ns.s` (or a macro writing its argument twice, or a list of the list twice) in a loop of 40
    doubled to 2^40, squaring an int 40 times ran for ever, and a loop that wrote nothing was never timed
    (the time limit was checked as the template wrote). Each is refused by name now, before it is made (limits made
    small here so that the test is quick)."""
    import wgraph.models.chat_sandbox as ct

    monkeypatch.setattr(ct, "MAX_PROMPT_CHARS", 1 << 16)
    monkeypatch.setattr(ct, "MAX_RENDER_SECONDS", 0.3)
    msgs = [{"role": "user", "content": "hi"}]
    double = "{% set ns = namespace(s='a') %}{% for i in range(60) %}{% set ns.s = X %}{% endfor %}{{ ns.s|length }}"
    refused = {"{{ ('a'|center(10**12))|length }}": "a center width of 1000000000000 is larger",
               "{{ 'a'.ljust(10**12)|length }}": "a ljust width of 1000000000000",
               "{{ ('%1000000000000d' % 1)|length }}": "a printf width of 1000000000000",
               "{{ '{:1000000000000}'.format(1)|length }}": "a format width or precision of 1000000000000",
               "{{ messages|tojson(indent=10**12) }}": "a tojson indentation of 6000000000000",
               "{{ lipsum(n=5000)|length }}": r"lipsum\(n=5000, max=100\) makes more than 131072 words",
               double.replace("X", "ns.s ~ ns.s"): "a '~' concatenation of 131072 is larger",
               double.replace("X", "ns.s + ns.s"): "a '\\+' concatenation of 131072",
               "{% macro d(s) %}{{ s }}{{ s }}{% endmacro %}" + double.replace("X", "d(ns.s)"):
                   "a block's text of 131072",
               double.replace("X", "[ns.s, ns.s]").replace("|length", ""): r"a value of 98302 items and characters "
                                                                               r"\(nested lists, dicts",
               "{% set ns = namespace(n=3) %}{% for i in range(40) %}{% set ns.n = ns.n * ns.n %}{% endfor %}":
                   "a product of 3247-bit and 3247-bit integers",
               "{% set s = 'x' * 60000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}":
                   "the render ran longer than 0.3 s"}
    for src, match in refused.items():
        t = ChatTemplate({"default": src}, "test")   # compiles at once: a constant filter is not folded either
        with pytest.raises(ChatTemplateError, match=r"^apply_chat_template: the chat template \(test, 'default'\) "
                                                    r"refused the conversation: " + match):
            t.render(msgs)
    ok = ChatTemplate({"default": "{{ 'ab'|center(6) }}|{{ '%3d' % 7 }}|{{ '{:>3}'.format('x') }}|{{ 'a' ~ 1 }}|"
                                  "{{ messages|tojson(indent=1) }}|"
                                  "{% for c in 'ab' %}{{ loop.index }}{{ c }}{% endfor %}"}, "test")
    assert ok.render(msgs) == '  ab  |  7|  x|a1|[\n {\n  "role": "user",\n  "content": "hi"\n }\n]|1a2b'


def _check_templates(refused: dict, rendered: dict) -> None:
    """Each template of `refused` raises a ChatTemplateError that says, after the template's name, the text (a
    regex) it maps to; each of `rendered` renders a one-message conversation as the text it maps to."""
    msgs = [{"role": "user", "content": "hi"}]
    for src, match in refused.items():
        with pytest.raises(ChatTemplateError, match=r"^apply_chat_template: the chat template \(test, 'default'\) "
                                                    r".*" + match):
            ChatTemplate({"default": src}, "test").render(msgs)
    for src, want in rendered.items():
        assert ChatTemplate({"default": src}, "test").render(msgs) == want, src


def test_a_template_cannot_multiply_a_value_by_naming_it_again(monkeypatch):
    """Widths and single values were bounded, but a value used many times in one call was made whole before
    its size was checked: `s.join(l)` (len(s) x len(l)), `('{0}' * n).format(s)`, `'%(a)s' * n % {'a': s}`, n fields
    of a wide spec, `indent(w)` of n lines, n items of a map held by a list: 60 million characters each here
    against a limit of 65,536 (with the real limit, terabytes). `sum(start=[])` of n lists copied n^2 / 2 items
    inside one call, unchecked by the time limit (hours for 5 million). A list holding another twice, doubled in a
    loop, was only checked where it was written, so comparing or hashing two of them, or writing a namespace holding
    one, walked 2^40 items. Each is refused now by what it would make, named, before it is made (format's fields
    and a map's items as they are made: at most twice the limit; a literal or a result as it is made)."""
    import wgraph.models.chat_sandbox as sandbox

    monkeypatch.setattr(sandbox, "MAX_PROMPT_CHARS", 1 << 16)
    monkeypatch.setattr(sandbox, "MAX_RENDER_SECONDS", 0.3)
    msgs = [{"role": "user", "content": "hi"}]
    s = "{% set s = 'x' * 60000 %}{% set l = ['a'] * 1000 %}"
    dag = ("{% set ns = namespace(x=[1], y=[1]) %}{% for i in range(40) %}{% set ns.x = [ns.x, ns.x] %}"
           "{% set ns.y = [ns.y, ns.y] %}{% endfor %}")
    refused = {s + "{{ s.join(l)|length }}": "a join of 59941000 ",
               s + "{{ ('{0}' * 1000).format(s)|length }}": "a format's fields of 120000 ",
               "{{ ('{:60000}' * 1000).format(*range(1000))|length }}": "a format's fields of 120000 ",
               s + "{{ ('{a}' * 1000).format_map({'a': s})|length }}": "a format's fields of 120000 ",
               s + "{{ ('%(a)s' * 1000 % {'a': s})|length }}": "a printf of 60013000 ",
               s + "{{ ('%(a(b)c)s' * 1000 % {'a(b)c': s})|length }}": "a printf of 600",
               "{{ ('%60000d%60000d' % (1, 2))|length }}": "a printf of 120",
               s + "{{ ('%(a)s' * 1000)|format(a=s)|length }}": "a printf of 60013000 ",
               "{{ ('\\n' * 1000)|indent(60000, true, true)|length }}": "an indent of 60061000 ",
               s + "{{ l|tojson(separators=(s, ':'))|length }}": "a tojson's separators of 60121002 ",
               "{{ range(1000)|map('center', 60000)|list|length }}": "a filter's items of 120000 ",
               # a list [x, x] doubled k times holds 4 * 2^k - 2 items: the 15th is refused as it is made, so no
               # value compared (==), hashed (a dict key) or written (a namespace's repr) walks 2^40 of them
               dag + "{{ ns.x == ns.y }}": "a value of 131070 items",
               dag.replace("[ns.x, ns.x]", "(ns.x, ns.x)") + "{{ {ns.x: 1} }}": "a value of 131070 items",
               dag.replace("[ns.x, ns.x]", "[ns.x] * 2") + "{{ ns }}": "a value of 131070 items",
               "{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns.me|length }}":
                   "a namespace attribute cannot hold a namespace"}
    # within the limits each renders as Python's own str operations and sum do (written out on the right)
    ok = {"{{ '-'.join(['a', 'b']) }}": "-".join(["a", "b"]),
          "{{ '{0}{0}{1!r}{2:>4}'.format('a', 'b', 7) }}": "{0}{0}{1!r}{2:>4}".format("a", "b", 7),
          # a value past the limit beside a nested spec is a value, not a width
          "{{ '{0:{1}}'.format(70000, 3) }}": "{0:{1}}".format(70000, 3),
          "{{ '{a}:{a}'.format_map({'a': 1}) }}": "{a}:{a}".format_map({"a": 1}),
          "{{ '%(a)s-%(a)s %(a(b)c)r' % {'a': 'q', 'a(b)c': 'z'} }}":
              "%(a)s-%(a)s %(a(b)c)r" % {"a": "q", "a(b)c": "z"},
          "{{ '%5.1f|%-4d|%#x|%*d|%.2s|%%|%c' % (2.25, 7, 255, 3, 1, 'abc', 65) }}":
              "%5.1f|%-4d|%#x|%*d|%.2s|%%|%c" % (2.25, 7, 255, 3, 1, "abc", 65),
          "{{ '%(k)s'|format(k='v') }}{{ '%s%s'|format(1, 2) }}": "v12",
          "{{ 'x\\ny'|indent(2, true) }}": "  x\n  y",
          "{{ [[1], [2, 3]]|sum(start=[0]) }}{{ [(1,), (2,)]|sum(start=()) }}": str([0, 1, 2, 3]) + str((1, 2)),
          "{{ [{'a': [1]}, {'a': [2]}]|sum(attribute='a', start=[]) }}{{ [0.1, 0.2, 0.3]|sum }}":
              str([1, 2]) + str(sum([0.1, 0.2, 0.3])),
          "{{ {'a': [1, 2]}|tojson(separators=(';', '='), indent=1) }}":
              json.dumps({"a": [1, 2]}, separators=(";", "="), indent=1),
          "{% set ns = namespace(a=[1, (2, 'b')]) %}{{ ns }}{{ {'k': 'v'}.items() }}":
              "<Namespace {'a': [1, (2, 'b')]}>" + str({"k": "v"}.items())}
    _check_templates({src: re.escape(match) for src, match in refused.items()}, ok)
    # a sum of lists checks the render's time limit at each list it adds (5,000 here), not once before them all
    ticks = []
    monkeypatch.setattr(sandbox, "_tick", lambda: ticks.append(1))
    assert ChatTemplate({"default": "{{ ([[1]] * 5000)|sum(start=[])|length }}"}, "test").render(msgs) == "5000"
    assert len(ticks) >= 5000


@pytest.mark.parametrize("value", [[1, 2], 3])
def test_a_pre_tokenizer_name_that_is_not_a_string_is_named(tmp_path, value):
    """tokenizer.ggml.pre as an array of numbers raised numpy's bare ValueError ("The truth value of an array ...
    is ambiguous") from Tokenizer.from_gguf, and a number was taken as an unknown name (GPT-2's regex) silently:
    llama.cpp reads it as a string; anything else is a CheckpointError naming the key."""
    import gguf

    meta = tiny_files.byte_level_tokenizer()
    meta.pop("pre")
    w = gguf.GGUFWriter(str(tmp_path / "pre.gguf"), "llama")
    if isinstance(value, list):
        w.add_key_value("tokenizer.ggml.pre", value, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT32)
    else:
        w.add_uint32("tokenizer.ggml.pre", value)
    tiny_files.add_tokenizer(w, meta)
    for step in (w.write_header_to_file, w.write_kv_data_to_file, w.write_tensors_to_file, w.close):
        step()
    with pytest.raises(CheckpointError, match=r"^GGUF file pre.gguf: tokenizer.ggml.pre must be a STRING, got "
                                              rf"{'ndarray' if isinstance(value, list) else 'int'}$"):
        Tokenizer.from_gguf(tmp_path / "pre.gguf")


@pytest.mark.parametrize("prefix", [None, True, False])
def test_spm_space_prefix_and_unknown_token_follow_the_file(tmp_path, prefix):
    """A "llama" (SentencePiece-style) vocabulary: tokenizer.ggml.add_space_prefix=false was ignored ("a" took
    "▁a", and decoding " a" dropped its space), and a character with no token nor byte token vanished from the
    ids instead of becoming tokenizer.ggml.unknown_token_id. llama.cpp reads the key so (transformers 5.25's GGUF
    loader prepends "▁" whatever the key says: docs/models.md); the reference is that vocabulary in `tokenizers`,
    and the ids are spelled out as llama.cpp's SPM merges give them."""
    import gguf
    from tokenizers import decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as Backend

    tokens = ["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab"]
    meta = {"model": "llama", "tokens": tokens, "token_types": [2, 3, 3, 1, 1, 1, 1, 1], "scores": [0.0] * 8,
            "merges": ["▁ a", "a b"], "bos_token_id": 1, "eos_token_id": 2, "unknown_token_id": 0}
    w = gguf.GGUFWriter(str(tmp_path / "spm.gguf"), "llama")
    tiny_files.add_tokenizer(w, meta)
    if prefix is not None:
        w.add_add_space_prefix(prefix)
    for step in (w.write_header_to_file, w.write_kv_data_to_file, w.write_tensors_to_file, w.close):
        step()
    tok = Tokenizer.from_gguf(tmp_path / "spm.gguf")
    on = prefix is not False
    ref = Backend(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[("▁", "a"), ("a", "b")],
                             unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    ref.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first" if on else "never",
                                                 split=False)
    ref.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
                                    + ([decoders.Strip(content=" ", left=1)] if on else []))
    want = {"a": [6] if on else [4], "ab": [6, 5] if on else [7], "aé": [6, 0] if on else [4, 0],
            "é b": [3, 0, 3, 5] if on else [0, 3, 5]}
    if not on:
        want[" a"] = [6]
    for text, ids in want.items():
        assert tok.encode(text, add_special_tokens=False) == ref.encode(text, add_special_tokens=False).ids == ids, text
        assert tok.encode(text) == [1] + ids, text   # BOS: llama.cpp's default for SentencePiece files
    for text in ("a", "ab", " a", "b a"):   # the prefix "▁" is dropped in decoding only where it was added
        ids = ref.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids) == ref.decode(ids) == (text.removeprefix(" ") if on else text), text
    if prefix is False:   # llama.cpp reads the key as a bool; a number is refused by name, not taken as truthy
        w = gguf.GGUFWriter(str(tmp_path / "int.gguf"), "llama")
        tiny_files.add_tokenizer(w, meta)
        w.add_uint32("tokenizer.ggml.add_space_prefix", 0)
        for step in (w.write_header_to_file, w.write_kv_data_to_file, w.write_tensors_to_file, w.close):
            step()
        with pytest.raises(CheckpointError, match=r"^GGUF file int.gguf: tokenizer.ggml.add_space_prefix=0 must be "
                                                  r"a BOOL$"):
            Tokenizer.from_gguf(tmp_path / "int.gguf")


@pytest.mark.parametrize("pre", ["llama-bpe", "tekken", "gpt-2"])
def test_llama3_family_splits_ignore_merges_and_add_bos_as_llama_cpp(tmp_path, pre):
    """llama.cpp (llama-vocab.cpp) reads a byte-level vocabulary whose tokenizer.ggml.pre is of the Llama 3 family
    (llama3, llama-bpe, ..., tekken) with ignore_merges, as Llama 3's own tokenizer.json: a word that is a token
    is that token ("abc" here, which no merge makes, was "ab" "c"), and adds BOS when the file has no
    add_bos_token (a Llama 3 GGUF without the key lost its BOS); other names (gpt-2) do neither. The reference is
    the vocabulary in `tokenizers` with the tokenizer.json setting, and the ids spelled out."""
    from tokenizers import models, pre_tokenizers
    from tokenizers import Tokenizer as Backend

    tokens = ["<|begin_of_text|>", "a", "b", "c", "Ġ", "ab", "abc", "Ġa", "Ġab"]
    meta = {"model": "gpt2", "pre": pre, "tokens": tokens, "token_types": [3] + [1] * 8,
            "merges": ["Ġ a", "Ġa b", "a b"], "bos_token_id": 0}
    tok = Tokenizer.from_gguf(tiny_files.write_tokenizer_gguf(tmp_path / "t.gguf", meta))
    llama3 = pre != "gpt-2"
    ref = Backend(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[("Ġ", "a"), ("Ġa", "b"), ("a", "b")],
                             ignore_merges=llama3))
    ref.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    ids = [6, 8] if llama3 else [5, 3, 8]
    assert tok.encode("abc ab", add_special_tokens=False) == ref.encode("abc ab").ids == ids
    assert tok.encode("abc ab") == ([0] if llama3 else []) + ids
    assert tok.decode(tok.encode("abc ab")) == "abc ab"


def test_a_batch_of_ids_is_refused_not_run_together(tokenizers):
    """decode([[5, 78], [78, 5]]) (a batch's rows, a 2-D array) was the text of [5, 78, 78, 5], the rows run
    together; it is refused naming ids, as StreamDecoder.push and generate_text's stop_ids are. One id (an int, a
    0-d array) and one sequence (a list, a 1-D array) still decode."""
    tok = tokenizers["directory"]
    row = tok.decode([5, 78])
    assert tok.decode(np.array([5, 78])) == row and tok.decode(78) == tok.decode(np.array(78)) == tok.decode([78])
    for batch in ([[5, 78], [78, 5]], np.array([[5, 78]]), [[5], [78]]):
        with pytest.raises(ArgumentError, match=r"Tokenizer.decode: ids=.* must be one sequence of token ids"):
            tok.decode(batch)
    with pytest.raises(ArgumentError, match=r"StreamDecoder.push: ids=\[\[78\]\] must be one sequence"):
        tok.stream_decoder().push([[78]])


def test_a_template_cannot_grow_what_the_checks_did_not_see(monkeypatch):
    """What an independent review of the bounded sandbox found past its checks (each made far more than the limit,
    or ran without end, before): a list of 1200-digit ints counted an item each (written: 2000x the limit); a
    namespace linked to another, grown after it was measured; glibc's strftime widths ('%1500c'); an int filter of
    a long hex string and ints doubled by '-' (quadratic '//' after); round to 10^8 digits; bytes (encode,
    to_bytes); a translate table as a list; a format width passed as a string ('{0:{1}}'); lipsum's counts as
    floats; and pprint, wordwrap and urlize, whose work their input does not bound (quadratic on one long word),
    are not offered. Each is refused by name."""
    import wgraph.models.chat_sandbox as sandbox

    monkeypatch.setattr(sandbox, "MAX_PROMPT_CHARS", 1 << 16)
    chain = ("{% set ns = namespace(head=none) %}{% for i in range(3) %}{% set n = namespace(v='a' ~ i) %}"
             "{% set n.next = ns.head %}{% set ns.head = n %}{% endfor %}")
    refused = {"{% set x = ('9' * 1200)|int %}{{ [x] * 100 }}": r"a value of \d+ items",   # 120,000 digits
               "{{ [-1.2345678901234567e-300] * 3000 }}": "a value of 75000 items",   # 3000 x (24 + 1)
               chain: "a namespace attribute cannot hold a namespace",
               "{{ strftime_now('%1500c') }}": "a field width",
               "{{ strftime_now('%d' * 200) }}": "a format of 400 characters",
               "{{ ('f' * 2000)|int(base=16) }}": "an int of 8000 bits",
               "{% set ns = namespace(n=3) %}{% for i in range(5000) %}{% set ns.n = ns.n - (0 - ns.n) %}"
               "{% endfor %}": "a '-' result of 4097 bits",
               "{{ 1|round(100000000, 'ceil') }}": "round to 100000000 digits",
               "{{ 'a'.encode()|length }}": r"encode\(\) makes bytes",
               "{{ (0).to_bytes(3000000000, 'big')|length }}": r"to_bytes\(\) makes bytes",
               "{{ ('a' * 4000).translate(['x' * 600] * 98)|length }}": "a translate of 2400000 ",
               "{{ '{0:{1}}'.format('a', '3000000000')|length }}": "a format width or precision of 3000000000",
               "{{ lipsum(1, false, 30000000.0, 30000001.0) }}": "failed: TypeError",
               "{{ {'k': 'v'}|pprint }}": "the pprint filter is not offered",
               "{{ 'a b'|wordwrap(1) }}": "the wordwrap filter is not offered",
               "{{ 'see www.a.com'|urlize }}": "the urlize filter is not offered"}
    # within the limits: what Python itself makes
    ok = {"{% set x = ('9' * 40)|int %}{{ [x] * 2 }}": str([int("9" * 40)] * 2),
          "{{ strftime_now('%Y') == strftime_now('%Y') }} {{ 10 - 3 }} {{ 2.5|round(1) }}": "True 7 2.5",
          "{% set ns = namespace(a=[1, 'b']) %}{% set ns.c = {'d': 2} %}{{ ns.a }}{{ ns.c }}": "[1, 'b']{'d': 2}",
          "{{ 'ab'.translate({97: 'xy'}) }}{{ 'ab'.translate(['0'] * 98) }}": "xyb" + "ab".translate(["0"] * 98),
          "{{ '{0:{1}}|'.format('a', '3') }}": "{0:{1}}|".format("a", "3")}
    _check_templates(refused, ok)


def test_a_template_cannot_outrun_the_checks_in_one_call_or_in_many(monkeypatch):
    """A second review's findings: work quadratic inside one C call (strip / trim with a long set of characters,
    a reverse search for a long separator in CPython 3.11, // of ints from int.from_bytes or a 0x literal, a sort of
    millions of items: 15 s to hours, the time limit checked only after it), and many values each within the limit
    held at once (sixty variables, a block's parts, a slice a recursion level: gigabytes). Each is refused by name
    before it runs; what one render makes in all has a budget (limits made small here)."""
    import wgraph.models.chat_sandbox as sandbox

    monkeypatch.setattr(sandbox, "MAX_PROMPT_CHARS", 1 << 16)
    monkeypatch.setattr(sandbox, "MAX_RENDER_MADE", 1 << 18)
    monkeypatch.setattr(sandbox, "MAX_ORDERED_ITEMS", 100)
    s = "{% set s = 'x' * 60000 %}"
    refused = {"{{ ('a' * 10000)|trim('b' * 10000) }}": "trim's characters would take 100000000 steps",
               "{{ ('a' * 10000).rstrip('b' * 10000) }}": "rstrip's characters would take 100000000 steps",
               "{{ ('a' * 20000).rfind('ab' ~ 'a' * 5000) }}": "rfind's reverse search would take 75019996 steps",
               "{{ (0).from_bytes([255] * 600, 'big') }}": "an int of 4800 bits",
               "{{ 0x" + "f" * 1100 + " // 3 }}": "a '//' operand of 4400 bits",
               "{{ range(101)|list|sort|length }}": "sort of 101 items",
               "{{ range(101)|map('string')|unique|list|length }}": "unique of 101 items",
               s + "{% set a = s ~ 1 %}{% set b = s ~ 2 %}{% set c = s ~ 3 %}{% set d = s ~ 4 %}{% set e = s ~ 5 %}":
                   "the render made more than 262144 characters and items in all",
               s + "{% macro m(x, n) %}{{ m(x[1:], n + 1) if n < 20 }}{% endmacro %}{{ m(s, 0) }}":
                   "the render made more than 262144"}
    ok = {"{{ ' ab '|trim }}|{{ 'xaby'|trim('xy') }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'abcab'.rfind('ab') }}":
              "ab|ab|" + str("a,b,c".rsplit(",", 1)) + "|3",
          "{{ 'abcdef'[1:3] }}{{ [1, 2, 3][::-1] }}{{ [3, 1, 2]|sort }}{{ 7 // 2 }}{{ 0xff }}":
              "bc[3, 2, 1][1, 2, 3]3255"}
    _check_templates({src: re.escape(match) for src, match in refused.items()}, ok)


def test_title_and_urlencode_make_no_more_than_their_result(monkeypatch):
    """Left by the reviews: jinja's `title` split the whole text into a list of pieces and another of their results
    (1.6 GB for 5.5 million short words, a prompt's size), `urlencode` a list of one string a UTF-8 byte (888 MB for
    16 million non-BMP characters, before its result was checked). title runs a chunk at a time, cut at a separator,
    and equals jinja's on any text (chunks made 1-5 characters here, so every cut is met); urlencode is refused by
    what it would make (3 characters a byte), before it runs."""
    import random

    import jinja2.filters
    import wgraph.models.chat_sandbox as sandbox

    pieces = list("aB -\t\n({[<)]}>ßǅﬁİ1_.\u00a0\u2003\x1c\x85Σς")
    texts = ["".join(random.Random(i).choices(pieces, k=i % 15)) for i in range(3000)]
    for chunk in (1, 2, 5):
        monkeypatch.setattr(sandbox, "_TITLE_CHUNK", chunk)
        assert [sandbox._title(t) for t in texts] == [jinja2.filters.do_title(t) for t in texts]
    monkeypatch.setattr(sandbox, "MAX_PROMPT_CHARS", 1 << 16)
    refused = {"{{ ('\U0001F600' * 5462)|urlencode }}": "a urlencode of 65544 ",
               "{{ {'k': 'é' * 10922}|urlencode }}": "a urlencode of 65537 ",
               "{{ [('k', 'é' * 10922)]|urlencode }}": "a urlencode of 65537 "}
    ok = {"{{ ('\U0001F600' * 5461)|urlencode|length }}": "65532",
          "{{ 'a b/é'|urlencode }}|{{ {'a b': 'c&d'}|urlencode }}": "a%20b/%C3%A9|a+b=c%26d",
          "{{ [('k', 1)]|urlencode }}": "k=1",
          "{{ 'hello wORLD-x (y'|title }}": "Hello World-X (Y"}
    _check_templates({src: re.escape(match) for src, match in refused.items()}, ok)
