"""Text in, text out on a decoder model with a tokenizer: the prompt (plain, or a chat through the chat template)
becomes ids, the model prefills them in one submit and decodes on the GPU as `generate` does, the host reads the
new ids from the model's `history` state every `read_every` tokens, stops at a stop id and yields the text they
complete (`StreamDecoder`: never half a character)."""

from __future__ import annotations

import time
from typing import Iterator

import attrs

from wgraph import args
from wgraph.errors import ArgumentError, LimitError, NoTokenizerError, RecordingError, ShapeError
from wgraph.models.config import MAX_SEQ
from wgraph.models.tokenizer import Tokenizer, unicode_text
from wgraph.ops.sampling import SampleSettings, check_sampling


@attrs.frozen
class TextRequest:
    """A checked text-generation request: the prompt ids and how to decode after them."""

    ids: tuple[int, ...]
    max_new_tokens: int
    temperature: float
    top_k: int
    top_p: float
    seed: int
    stop_ids: frozenset[int]
    read_every: int
    in_flight: int
    skip_special_tokens: bool


def tokenizer_of(model, where: str) -> Tokenizer:
    tok = getattr(model, "tokenizer", None)
    if tok is None:
        raise NoTokenizerError(f"{where}: the model has no tokenizer (load it with wgraph.models.from_pretrained "
                               f"from a directory with tokenizer.json or a GGUF file, or set model.tokenizer)")
    return tok


def prompt_ids(tok: Tokenizer, prompt, *, chat: bool, system: str | None, where: str) -> list[int]:
    """The ids of a plain prompt (BOS as the tokenizer's files say) or of a chat: `prompt` is the user's message
    or a list of {"role", "content"} messages, `system` a system message put first; the template's generation
    prompt ends it."""
    # text is checked as the caller gave it (unicode_text): encode's error named "Tokenizer.encode: text" and, for a
    # chat, a place in the rendered template the caller never saw
    chat = args.flag(where, "chat", chat)
    if system is not None:
        system = unicode_text(where, system, "system")
    if not chat:
        if system is not None:
            raise ArgumentError(f"{where}: system={args.show(system)} needs chat=True")
        if isinstance(prompt, (list, tuple)):  # "must be a str" alone hid the two likely meanings of a list
            raise args.fail(where, "prompt", prompt, "a str (a list of messages needs chat=True; token ids go to "
                            "model.generate(ids, max_new_tokens), which returns ids)")
        return tok.encode(unicode_text(where, prompt, "prompt"))
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": unicode_text(where, prompt, "prompt")}]   # np.str_ as a plain str
    elif isinstance(prompt, (list, tuple)):
        messages = list(prompt)
        for i, m in enumerate(messages):   # the template checks the rest of a message
            if isinstance(m, dict) and isinstance(m.get("content"), str):
                unicode_text(where, m["content"], f"prompt[{i}]['content']")
    else:
        raise args.fail(where, "prompt", prompt, "a str or, with chat=True, a list of messages")
    if system is not None:
        messages = [{"role": "system", "content": system}] + messages
    return tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)


def make_request(model, prompt, max_new_tokens, *, chat=False, system=None, temperature=0.0, top_k=0, top_p=1.0,
                 seed=0, stop_ids=None, read_every=4, in_flight=8, skip_special_tokens=True,
                 where="generate_text") -> TextRequest:
    """Check every argument by the rules Llama.generate uses (args.py; ArgumentError, LimitError and the
    tokenizer's errors name it) before any GPU work."""
    ids = prompt_ids(tokenizer_of(model, where), prompt, chat=chat, system=system, where=where)
    return request_for_ids(model, ids, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                           stop_ids=stop_ids, read_every=read_every, in_flight=in_flight,
                           skip_special_tokens=skip_special_tokens, where=where)


def request_for_ids(model, ids: list[int], max_new_tokens, *, temperature=0.0, top_k=0, top_p=1.0, seed=0,
                    stop_ids=None, read_every=4, in_flight=8, skip_special_tokens=True,
                    where="generate_text") -> TextRequest:
    """make_request for a prompt tokenized already (prompt_ids: the command line sizes the KV cache from it before
    the model loads, and tokenizes it once)."""
    tok = tokenizer_of(model, where)
    n = args.integer(where, "max_new_tokens", max_new_tokens, 0, MAX_SEQ)
    temperature, top_k, top_p, seed = check_sampling(where, temperature, top_k, top_p, seed)
    read_every = args.integer(where, "read_every", read_every, 1, MAX_SEQ)
    in_flight = args.integer(where, "in_flight", in_flight, 1, MAX_SEQ)
    skip_special_tokens = args.flag(where, "skip_special_tokens", skip_special_tokens)
    if not ids:
        raise ShapeError(f"{where}: the prompt encodes to no tokens")
    if max(ids) >= model.config.vocab_size:
        raise LimitError(f"{where}: the tokenizer gave id {max(ids)}, beyond the model's vocabulary "
                         f"({model.config.vocab_size})")
    if len(ids) + n > model.max_seq:
        raise LimitError(f"{where}: {len(ids)} prompt + {n} new tokens exceed the KV cache of {model.max_seq} "
                         f"positions (max_seq): load the model with a larger max_seq= or ask for fewer new tokens")
    if isinstance(stop_ids, (set, frozenset, range)):  # taken as generate takes them (check_ids wants a sequence)
        stop_ids = list(stop_ids)
    stops = tok.stop_ids if stop_ids is None else tok.check_ids(stop_ids, f"{where}: stop_ids")
    return TextRequest(tuple(ids), n, temperature, top_k, top_p, seed, frozenset(stops), read_every, in_flight,
                       skip_special_tokens)


def stream(model, req: TextRequest) -> Iterator[str]:
    """Text pieces of the new tokens of `req` as they are read back; model.last_stats says what it took (the
    prefill, which chose the first new token, and the decode steps after it). The model's lock is held from each
    resume to the next piece (the prefill and the session it starts, each session check and the steps and read
    after it, one locked step), let go only while the caller holds a piece: another thread's generation comes in
    only while this stream is paused, where the session check finds it (between a check and its steps, or a
    prefill and its session, it ran this stream's steps on the other's caches, or this stream read them)."""
    tok = model.tokenizer
    sample = None if req.temperature == 0 else SampleSettings(req.temperature, req.top_k, req.top_p, req.seed)
    n, s = req.max_new_tokens, len(req.ids)
    if n == 0:
        model.last_stats = {"tokens": 0, "seconds": 0.0, "prompt_tokens": s, "prefill_seconds": 0.0,
                            "decode_seconds": 0.0, "ids": [], "stopped": False, "submits": 0, "readbacks": 0}
        return
    dec = tok.stream_decoder(skip_special_tokens=req.skip_special_tokens)
    made, out = 1, list[int]()  # prefill chose the first new id

    def advance(step: bool) -> tuple[list[str], bool]:
        """Lock held: decode steps (first, with `step`) and reads until a read gives text or the generation ends;
        (its pieces, whether it ended)."""
        nonlocal made, out
        while True:
            _check_session(model, session)
            if step:
                k = min(req.read_every - made % req.read_every, n - made)
                model.run_steps(k, in_flight=req.in_flight)
                made += k
            step = True
            if made == n or made % req.read_every == 0:
                new = model.program.state("history").numpy()[s + len(out):s + made].tolist()
                hit = next((j for j, t in enumerate(new) if t in req.stop_ids), None)
                out += new if hit is None else new[:hit + 1]
                # a stop id ends the text; it is not part of it. An id past the tokenizer's vocabulary (a model's
                # padded rows: Qwen2.5 has 151936 for 151665 tokens) has no token and no text, as transformers'
                # decode skips it
                piece = dec.push([t for t in (new if hit is None else new[:hit]) if t < tok.vocab_size])
                if hit is not None or made == n:
                    tail = dec.flush()
                    d = model.device.stats.since(before)
                    seconds = time.perf_counter() - t0
                    model.last_stats = {"tokens": len(out), "seconds": seconds, "prompt_tokens": s,
                                        "prefill_seconds": prefill, "decode_seconds": seconds - prefill, "ids": out,
                                        "stopped": hit is not None, "submits": d.submits, "readbacks": d.readbacks}
                    return [p for p in (piece, tail) if p], True
                if piece:
                    return [piece], False

    with model._lock("stream_text"):
        t0 = time.perf_counter()
        before = model.device.stats.snapshot()
        model.prefill(req.ids, sample=sample)   # the decode program ends in argmax or in sample, as `sample` says
        session = model.session
        model.device.wait(model.device.fence())  # a wait, no readback: splits the time into prefill and decode
        prefill = time.perf_counter() - t0
        pieces, done = advance(False)
    while True:
        yield from pieces   # the lock let go: a paused stream holds nothing
        if done:
            return
        with model._lock("stream_text"):
            pieces, done = advance(True)


def _check_session(model, session: int) -> None:
    """A paused stream resumes only where no other generation ran on the model since its prefill (the caches,
    position and history it reads are the model's: they now hold the other one's)."""
    if model.session != session:
        raise RecordingError("stream_text: another generation ran on this model while this stream was paused; its "
                             "caches now hold that one: start the stream again (or finish one before the other)")


# the options of generate_text / stream_text: make_request's keyword arguments but `where`
OPTIONS = ("chat", "system", "temperature", "top_k", "top_p", "seed", "stop_ids", "read_every", "in_flight",
           "skip_special_tokens")


def _request(model, prompt, max_new_tokens, options: dict, where: str) -> TextRequest:
    for name, value in options.items():
        if name not in OPTIONS:  # else a raw TypeError from make_request's signature
            raise ArgumentError(f"{where}: {name}={args.show(value)} is not an option; the options are "
                                f"{', '.join(OPTIONS)}")
    return make_request(model, prompt, max_new_tokens, where=where, **options)


def stream_text(model, prompt, max_new_tokens: int, **options) -> Iterator[str]:
    """Check the request now (errors before any GPU work), then an iterator of text pieces (see make_request)."""
    return stream(model, _request(model, prompt, max_new_tokens, options, "stream_text"))


def generate_text(model, prompt, max_new_tokens: int, **options) -> str:
    """The whole text of up to `max_new_tokens` new tokens (see make_request for the options). One call at a time
    on a model, as generate: its stream never pauses, so the model's lock is held over the whole of it (let go
    between pieces, another thread's generation came in and this one raised that its stream was paused)."""
    req = _request(model, prompt, max_new_tokens, options, "generate_text")
    with model._lock("generate_text"):
        return "".join(stream(model, req))
