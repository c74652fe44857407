"""Text in, text out on a decoder model with a tokenizer: the prompt (plain, or a chat through the chat template)
becomes ids, the model prefills them in one submit and decodes on the GPU as `generate` does, the host reads the
new ids from the model's `history` state every `read_every` tokens, stops at a stop id and yields the text they
complete (`StreamDecoder`: never half a character)."""

from __future__ import annotations

import math
import numbers
import time
from typing import Iterator

import attrs

from wgraph.dtypes import is_int
from wgraph.errors import LimitError, NoTokenizerError, ShapeError
from wgraph.models.tokenizer import Tokenizer
from wgraph.ops.sampling import SampleSettings


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
    if not isinstance(chat, bool):
        raise ShapeError(f"{where}: chat must be a bool, got {chat!r}")
    if system is not None and not isinstance(system, str):
        raise ShapeError(f"{where}: system must be a str or None, got {type(system).__name__}")
    if not chat:
        if system is not None:
            raise ShapeError(f"{where}: system={system!r} needs chat=True")
        if not isinstance(prompt, str):
            raise ShapeError(f"{where}: prompt must be a str (or, with chat=True, a list of messages), "
                             f"got {type(prompt).__name__}")
        return tok.encode(prompt)
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    elif isinstance(prompt, (list, tuple)):
        messages = list(prompt)
    else:
        raise ShapeError(f"{where}: with chat=True, prompt must be a str or a list of messages, "
                         f"got {type(prompt).__name__}")
    if system is not None:
        messages = [{"role": "system", "content": system}] + messages
    return tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)


def make_request(model, prompt, max_new_tokens, *, chat=False, system=None, temperature=0.0, top_k=0, top_p=1.0,
                 seed=0, stop_ids=None, read_every=4, in_flight=8, skip_special_tokens=True,
                 where="generate_text") -> TextRequest:
    """Check every argument (CheckpointError/ShapeError/LimitError name it) before any GPU work."""
    tok = tokenizer_of(model, where)

    def integer(name, v, lo):
        if not is_int(v) or v < lo:
            raise ShapeError(f"{where}: {name} must be an integer >= {lo}, got {v!r}")
        return int(v)

    def real(name, v, lo, hi, lo_open=False):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) \
                or not (lo < v if lo_open else lo <= v) or v > hi:
            raise ShapeError(f"{where}: {name} must be a finite number in {'(' if lo_open else '['}{lo}, {hi}], "
                             f"got {v!r}")
        return float(v)

    n = integer("max_new_tokens", max_new_tokens, 0)
    if not isinstance(skip_special_tokens, bool):
        raise ShapeError(f"{where}: skip_special_tokens must be a bool, got {skip_special_tokens!r}")
    ids = prompt_ids(tok, prompt, chat=chat, system=system, where=where)
    if not ids:
        raise ShapeError(f"{where}: the prompt encodes to no tokens")
    if max(ids) >= model.config.vocab_size:
        raise LimitError(f"{where}: the tokenizer gave id {max(ids)}, beyond the model's vocabulary "
                         f"({model.config.vocab_size})")
    if len(ids) + n > model.max_seq:
        raise LimitError(f"{where}: {len(ids)} prompt + {n} new tokens exceed the KV cache of {model.max_seq} "
                         f"positions (max_seq)")
    stops = tok.stop_ids if stop_ids is None else tok.check_ids(stop_ids, f"{where}: stop_ids")
    return TextRequest(tuple(ids), n, real("temperature", temperature, 0.0, 1e6), integer("top_k", top_k, 0),
                       real("top_p", top_p, 0.0, 1.0, lo_open=True), integer("seed", seed, 0), frozenset(stops),
                       integer("read_every", read_every, 1), integer("in_flight", in_flight, 1), skip_special_tokens)


def stream(model, req: TextRequest) -> Iterator[str]:
    """Text pieces of the new tokens of `req` as they are read back; model.last_stats says what it took (the
    prefill, which chose the first new token, and the decode steps after it)."""
    tok = model.tokenizer
    sample = None if req.temperature == 0 else SampleSettings(req.temperature, req.top_k, req.top_p, req.seed)
    n, s = req.max_new_tokens, len(req.ids)
    if n == 0:
        model.last_stats = {"tokens": 0, "seconds": 0.0, "prompt_tokens": s, "prefill_seconds": 0.0,
                            "decode_seconds": 0.0, "ids": [], "stopped": False, "submits": 0, "readbacks": 0}
        return
    model._set_sampling(sample)  # the decode program ends in argmax or in sample (Llama.generate does the same)
    dec = tok.stream_decoder(skip_special_tokens=req.skip_special_tokens)
    t0 = time.perf_counter()
    before = model.device.stats.snapshot()
    model.prefill(req.ids, sample=sample)
    model.device.wait(model.device.fence())  # a wait, no readback: splits the time into prefill and decode
    prefill = time.perf_counter() - t0
    made, out = 1, list[int]()  # prefill chose the first new id
    while True:
        if made == n or made % req.read_every == 0:
            new = model.program.state("history").numpy()[s + len(out):s + made].tolist()
            hit = next((j for j, t in enumerate(new) if t in req.stop_ids), None)
            out += new if hit is None else new[:hit + 1]
            piece = dec.push(new if hit is None else new[:hit])  # a stop id ends the text; it is not part of it
            if piece:
                yield piece
            if hit is not None or made == n:
                tail = dec.flush()
                d = model.device.stats.since(before)
                seconds = time.perf_counter() - t0
                model.last_stats = {"tokens": len(out), "seconds": seconds, "prompt_tokens": s,
                                    "prefill_seconds": prefill, "decode_seconds": seconds - prefill, "ids": out,
                                    "stopped": hit is not None, "submits": d.submits, "readbacks": d.readbacks}
                if tail:
                    yield tail
                return
        k = min(req.read_every - made % req.read_every, n - made)
        model.run_steps(k, in_flight=req.in_flight)
        made += k


def stream_text(model, prompt, max_new_tokens: int, **options) -> Iterator[str]:
    """Check the request now (errors before any GPU work), then an iterator of text pieces (see make_request)."""
    return stream(model, make_request(model, prompt, max_new_tokens, where="stream_text", **options))


def generate_text(model, prompt, max_new_tokens: int, **options) -> str:
    """The whole text of up to `max_new_tokens` new tokens (see make_request for the options)."""
    return "".join(stream(model, make_request(model, prompt, max_new_tokens, where="generate_text", **options)))
