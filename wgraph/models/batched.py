"""Greedy decoding of many sequences at once: `BatchedDecoder` runs a Llama's decode step for B sequences as ONE
compiled Program, built from the model's own layer function (`Llama._layer`) and sharing the model's weight
buffers (no copy). Per step, whatever B: the GEMVs take B rows (the GEMM above the GEMV's rows), RoPE and the K/V
append put each sequence's new row at its own GPU position (`rope_kv_append_batched`), attention reads each
sequence's cache for its own GPU length (`attention_kvcache`), `argmax` picks one id per sequence and
`decode_advance_batched` feeds them back. The prompts, of any lengths, are prefilled one by one into their
sequences' caches in one recorded submit; then the host submits steps ahead and reads the ids every few steps.
As a Llama's, the step plans its attention for the caches it holds; while every sequence is within the first
positions where a cheaper kernel plans (decode_span.py), a second program reads the same caches as pages of those
first rows. docs/models.md, "Batched generation"."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Callable, Iterable

import attrs
import numpy as np

import wgraph.ops as ops
from wgraph import args
from wgraph.errors import LimitError, UnsupportedError
from wgraph.graph import Graph
from wgraph.models.config import STEPS_PER_SUBMIT
from wgraph.models.config import MAX_SEQ
from wgraph.models.decode_span import decode_steps, run_scheduled, run_steps_args, short_cache_rows
from wgraph.models.session import SessionLock
from wgraph.models.llama import Llama, fused_qkv
from wgraph.ops.attention_planner import max_head_dim
from wgraph.tensor import Tensor

if TYPE_CHECKING:
    from wgraph.api_types import Ids

# the states of a model's decode program that belong to its one sequence: a batch has its own of each (the
# caches l{i}.k_cache / l{i}.v_cache too); every other state is a weight, shared
SEQUENCE_STATES = ("token", "history", "pos", "kv_len")
PAD_PROMPT = np.zeros(1, np.uint32)  # what a sequence the call leaves unused decodes (its ids are dropped)
# the short program's pages: at least this many rows a page (a table entry per page), else no short program
MIN_SHORT_PAGE = 64


def _is_cache(name: str) -> bool:
    return name.endswith((".k_cache", ".v_cache"))


@attrs.frozen
class BatchKV:
    """A layer's caches in the batched step: [B, capacity, Hkv, D], each sequence at its own GPU position. In the
    short program (`table` given) attention reads them as a paged pool [B * capacity, Hkv, D] of `page_size`-row
    pages whose table gives each sequence its first rows, so it plans for those rows, not for the capacity."""

    k: object
    v: object
    table: object = None
    page_size: int = 0

    def rope_append(self, qkv, glob: dict, pos, q_heads: int):
        return ops.rope_kv_append_batched(qkv, glob["cos"], glob["sin"], (self.k, self.v), pos, q_heads=q_heads)

    def attend(self, q, kv_len, scale, window: int, softcap: float):
        b, hq, d = q.shape
        k, v, paged = self.k, self.v, {}
        if self.table is not None:
            _, capacity, hkv, _ = self.k.shape
            k, v = (ops.reshape(c, b * capacity, hkv, d) for c in (self.k, self.v))
            paged = dict(block_table=self.table, page_size=self.page_size)
        return ops.attention_kvcache(ops.reshape(q, b, 1, hq, d), k, v, cache_seqlens=kv_len, causal=True,
                                     scale=scale, window=(window - 1, -1) if window else (-1, -1), softcap=softcap,
                                     **paged)


def short_pages(capacity: int, short_rows: int | None) -> int | None:
    """Rows a page of the short program's pool: a divisor of both a sequence's capacity (so pages never straddle
    two sequences) and the short rows; None (no short program) where the largest is under MIN_SHORT_PAGE."""
    if short_rows is None:
        return None
    page = math.gcd(capacity, short_rows)
    return page if page >= MIN_SHORT_PAGE else None


@attrs.frozen
class SlotKV:
    """One sequence's rows of a layer's batch caches, for its prefill: the caches seen as [B * capacity, Hkv, D]
    pages of `capacity` rows, the sequence's page the only one of `table`."""

    k: object
    v: object
    table: object
    capacity: int

    def rope_append(self, qkv, glob: dict, pos, q_heads: int):
        return ops.rope_kv_append(qkv, glob["cos"], glob["sin"], (self.k, self.v), pos, q_heads=q_heads,
                                  layout="paged", page_table=self.table, page_size=self.capacity)

    def attend(self, q, kv_len, scale, window: int, softcap: float):
        return ops.attention(q, self.k, self.v, causal=True, kv_len=kv_len, scale=scale, sliding_window=window,
                             softcap=softcap, kv_layout="paged", page_table=self.table, page_size=self.capacity)


class BatchedDecoder:
    """Greedy decoding of up to `batch` sequences at once with `model`'s weights (shared, not copied), each
    sequence with a KV cache of `max_seq` positions (default: the model's).

    model: the Llama whose weights and layer math the batch uses.
    batch: the most sequences at once (the batched attention grid's dimension).
    max_seq: each sequence's KV cache positions, at most the model's; None: the model's.

    After construction: `program` is the step over the whole caches; `short_rows` the positions below which (for
    every sequence) steps run a second program planned for that many keys (None: none plans differently), compiled
    on first use, reading the same caches as pages of `short_page` rows."""

    # Llama's layer math as it is (one function per layer for every architecture); a batch differs only where a
    # layer meets its KV cache, the two hooks below
    _forward = Llama._forward
    _layer = Llama._layer
    _gate = Llama._gate
    _embed = Llama._embed
    _logits = Llama._logits

    def __init__(self, model: Llama, batch: int, *, max_seq: int | None = None) -> None:
        if not isinstance(model, Llama):
            raise args.fail("BatchedDecoder", "model", model, "a Llama (wgraph.models.Llama, from_pretrained)")
        c, dev = model.config, model.device
        if not fused_qkv(c):
            raise UnsupportedError(f"BatchedDecoder: {c.model_type} models whose q and k are normalised per head or "
                                   f"rotated in part or in GPT-J pairs (qk_norm {c.qk_norm}, rotary dims {c.rope_dim} "
                                   f"of {c.head_dim}, interleaved {c.rope_interleaved}) are not batched yet: their "
                                   f"RoPE is not fused with the K/V append, which the batched step needs")
        # the batched attention kernels take smaller heads than the single-sequence ones (512): refused here, by
        # name, rather than by attention_kvcache's LimitError from inside the graph build; the limit is the one
        # attention_batched's planner checks (the registry's kernels), not a copy of it
        head_limit = max_head_dim("attention_batched")
        if c.head_dim > head_limit:
            raise LimitError(f"BatchedDecoder: the model's head_dim {c.head_dim} is above the batched attention "
                             f"kernels' limit of {head_limit}; decode it one sequence at a time (generate)")
        most = dev.caps.max_workgroups_per_dim  # batched attention's grid has a dimension of B
        # batch: batched attention's grid has a dimension of B; max_seq: the model's RoPE tables' rows
        batch = args.integer("BatchedDecoder", "batch", batch, 1, most)
        max_seq = args.optional_integer("BatchedDecoder", "max_seq", max_seq, 2, model.max_seq)
        self.model, self.config, self.device = model, c, dev
        self.batch, self.max_seq = batch, model.max_seq if max_seq is None else max_seq
        states = model.program.graph.states
        cache = states["l0.k_cache"].spec
        cache_bytes = self.batch * self.max_seq * cache.nbytes // cache.shape[0]
        if cache_bytes > dev.caps.max_storage_binding_size:
            raise LimitError(f"BatchedDecoder: a layer's K cache for batch {self.batch} x max_seq {self.max_seq} "
                             f"would take {cache_bytes} bytes, above the device's {dev.caps.max_storage_binding_size} "
                             f"per storage buffer: use a smaller batch or max_seq")
        logits_bytes = self.batch * c.vocab_size * 4  # the step's [B, vocab] f32 logits, one tensor
        if logits_bytes > dev.caps.max_storage_binding_size:
            raise LimitError(f"BatchedDecoder: the logits of batch {self.batch} x vocab {c.vocab_size} (f32) would take "
                             f"{logits_bytes} bytes, above the device's {dev.caps.max_storage_binding_size} per storage "
                             f"buffer: use a batch of at most {dev.caps.max_storage_binding_size // (4 * c.vocab_size)}")
        shared = {name: model.program.state(name) for name in states
                  if name not in SEQUENCE_STATES and not _is_cache(name)}
        graph = self._build(states, cache.dtype, shared)
        self.program = graph.compile(dev, shared_states=shared)
        rows = short_cache_rows(graph, dev.caps, self.max_seq)
        self.short_page = short_pages(self.max_seq, rows)
        self.short_rows = rows if self.short_page else None
        self._short = None  # compiled on first use (_short_program)
        self._position: int | None = None  # the most advanced sequence's next position (None: no prefill yet)
        # One call at a time: the caches, positions and history rows are the decoder's (models/session.py)
        self._lock = SessionLock("BatchedDecoder")
        self.last_stats: dict = {}

    # ---- the step ----

    def _linear(self, x, w, b=None, **options):
        return self.model._linear(x, w, b, **options)  # the model's options (QuantizedLlama's x_int8)

    def _weights(self, get) -> tuple[dict, list, list]:
        return self.model._weights(get)  # the model's own view of its weight states (QuantizedLlama's blocks)

    def _qkv_rope_append(self, x, w: dict, glob: dict, cache, pos):
        # the projection, then the batch cache's own RoPE + append (each sequence at its own GPU position)
        qkv = self._linear(x, w["w_qkv"], w.get("b_qkv"), norm=w["attn_norm"], eps=self.config.rms_norm_eps)
        return cache.rope_append(qkv, glob, pos, self.config.num_attention_heads)

    def _attend(self, i: int, q, cache, kv_len):
        c = self.config
        return cache.attend(q, kv_len, c.attention_scale, c.window(i), c.attn_softcap)

    def _build(self, states: dict, cache_dtype: str, shared: dict, short: bool = False) -> Graph:
        """The step's graph: the model's weight states (given at compile), per layer caches [B, max_seq, Hkv, D],
        and per sequence its token, position, kv_len and history row. short: the short program's (attention over
        the first short_rows positions, through a `short_table` state of each sequence's pages)."""
        c, B, L = self.config, self.batch, self.max_seq
        g = Graph(f"llama_decode_batch{B}" + ("_short" if short else ""))
        for name in shared:
            g.state(name, states[name].spec.shape, states[name].spec.dtype)
        for i in range(c.num_hidden_layers):
            for kv in ("k", "v"):
                g.state(f"l{i}.{kv}_cache", (B, L, c.num_key_value_heads, c.head_dim), cache_dtype)
        token = g.state("token", (B,), "u32")
        history = g.state("history", (B, L), "u32")
        pos, kv_len = g.state("pos", (B,), "u32"), g.state("kv_len", (B,), "u32")
        glob, layers, caches = self._weights(lambda name: g.values[name])
        table = None
        if short:
            per_seq = self.short_rows // self.short_page
            pages = (np.arange(B)[:, None] * (L // self.short_page) + np.arange(per_seq)[None, :]).astype(np.uint32)
            table = g.state("short_table", pages.shape, "u32", init=pages)
        caches = [BatchKV(k, v, table, self.short_page if short else 0) for k, v in caches]
        h = self._forward(self._embed(token, glob["embed"]), glob, layers, caches, pos, kv_len, B, g.scope)
        logits = self._logits(h, glob)
        g.output("logits", logits)
        ops.decode_advance_batched(ops.argmax(logits), token=token, history=history, pos=pos, kv_len=kv_len)
        return g

    def _short_program(self):
        """The step for positions below `short_rows` (compiled on first use): every state the whole-cache
        program's own, the caches read through its page table."""
        if self._short is None:
            states = self.model.program.graph.states
            weights = {name: None for name in states if name not in SEQUENCE_STATES and not _is_cache(name)}
            graph = self._build(states, states["l0.k_cache"].spec.dtype, weights, short=True)
            shared = {name: self.program.state(name) for name in self.program.graph.states}
            self._short = graph.compile(self.device, shared_states=shared)
        return self._short

    def _programs(self, steps: int, fn: str) -> list[tuple[object, int]]:
        """(program, steps) for the next `steps` steps, in order: the short program while every sequence's
        position stays below short_rows, the whole caches' after it; the position moves past them. LimitError
        (naming `fn`) where the most advanced sequence would pass its cache; RecordingError before any prefill
        (the position is None only then), whose caches hold nothing to decode from."""
        programs, self._position = decode_steps(
            fn, self._position, steps, self.max_seq, self.short_rows, self._short_program, self.program,
            unprefilled="no prompts were prefilled on this decoder: its decode state (tokens, positions, KV caches) "
                        "holds nothing to decode from; call prefill(prompts) first")
        return programs

    # ---- running ----

    def prefill(self, prompts: Sequence[Ids]) -> list[np.ndarray]:
        """Make `prompts` (1..batch lists of ids) the batch's sequences; sequences past them decode a 1-token
        pad. Every prompt but its last id goes through the layers into its sequence's caches (one recorded
        submit for all); the last id is each sequence's first input of the step, at its own position. Returns
        the prompts as checked u32 arrays.

        prompts: 1..batch lists (or numpy arrays) of token ids, each at most max_seq - 1 ids (room for the first
            step's id).
        """
        where = "BatchedDecoder.prefill"
        seqs = _check_prompts(where, prompts, self.config.vocab_size, self.batch)
        _check_room(where, seqs, 1, self.max_seq)  # the first step's id lands at each prompt's length
        with self._lock("BatchedDecoder.prefill"):
            self._start(seqs)
        return seqs

    def _start(self, seqs: list[np.ndarray]) -> None:
        dev, prog, B, L = self.device, self.program, self.batch, self.max_seq
        # no position counted until the recording is in: a prefill that fails after writing the states leaves steps
        # refused, not decoding from the new positions over the old caches
        self._position = None
        padded = seqs + [PAD_PROMPT] * (B - len(seqs))
        lens = np.array([p.size for p in padded], np.uint32)
        history = np.zeros((B, L), np.uint32)
        for b, p in enumerate(padded):
            history[b, :p.size] = p
        dev.write(prog.state("token"), np.array([p[-1] for p in padded], np.uint32))
        dev.write(prog.state("pos"), lens - 1)
        dev.write(prog.state("kv_len"), lens)
        dev.write(prog.state("history"), history)
        glob, layers, caches = self._weights(prog.state)
        hkv, d = self.config.num_key_value_heads, self.config.head_dim
        flat = [(k.reshape(B * L, hkv, d), v.reshape(B * L, hkv, d)) for k, v in caches]
        with dev.record():
            for b, p in enumerate(padded):
                rows = p.size - 1
                if rows == 0:
                    continue
                table = dev.tensor(np.array([b], np.uint32), "u32", label=f"sequence{b}.page")
                slots = [SlotKV(k, v, table, L) for k, v in flat]
                x = self._embed(dev.tensor(p[:-1], "u32", label=f"sequence{b}.prompt"), glob["embed"])
                self._forward(x, glob, layers, slots, 0, rows, rows, lambda _name: contextlib.nullcontext())
        self._position = int(lens.max()) - 1

    def step(self) -> Tensor:
        """One batched decode step (one submit, no host input): the logits output [B, V] of the tokens it
        consumed (overwritten by the next step of the same program)."""
        with self._lock("BatchedDecoder.step"):
            (program, _), = self._programs(1, "BatchedDecoder.step")
            return program.run()["logits"]

    def run_steps(self, n: int, *, in_flight: int = 8, per_submit: int = STEPS_PER_SUBMIT) -> float:
        """Submit `n` steps back to back, at most `in_flight` unfinished on the GPU (Program.run_many); steps
        with every sequence below `short_rows` run the short program. Returns the host seconds spent encoding and
        submitting them.

        n: how many steps.
        in_flight: the most steps unfinished on the GPU at once (whole submits: at least one).
        per_submit: steps encoded into one submit: a submit's fixed cost is paid once for them.
        """
        n, in_flight, per_submit = run_steps_args("BatchedDecoder.run_steps", n, in_flight, per_submit)
        with self._lock("BatchedDecoder.run_steps"):
            return run_scheduled(self._programs(n, "BatchedDecoder.run_steps"), in_flight, per_submit)

    def generate(self, prompts: Sequence[Ids], max_new_tokens: int, *, stop_ids: Iterable[int] = (), in_flight: int = 8,
                 read_every: int | None = None, progress: Callable[[int, float], None] | None = None) -> list[list[int]]:
        """Up to `max_new_tokens` greedy ids after each of `prompts` (1..batch lists of ids, any lengths), one
        list per prompt. One recorded submit prefills them all, then a submit per 4 steps (run_steps) for the whole batch,
        at most `in_flight` unfinished; the ids are read every `read_every` steps (default: once, at the end).
        `stop_ids`: ids that end every sequence, or one list per prompt. A sequence ends at its first stop id
        (kept) found at a read; the ids it makes after it are dropped (the GPU runs the whole batch until every
        sequence has stopped or max_new_tokens steps ran). `progress(steps, seconds)` is called after each read.

        prompts: 1..batch lists of token ids.
        max_new_tokens: the most new ids per sequence; 0 returns empty lists and runs nothing (the prompts are not
            prefilled: step() goes on from the previous ones).
        stop_ids: ids that end a sequence (found at a read).
        in_flight: the most steps unfinished on the GPU at once.
        read_every: read the ids back every this many steps; None: once, at the end.
        progress: None, or a function (steps, seconds) called after each read. It runs inside the generation: a
            call from it into this model is refused (RecordingError).
        """
        where = "BatchedDecoder.generate"
        seqs = _check_prompts(where, prompts, self.config.vocab_size, self.batch)
        n = args.integer(where, "max_new_tokens", max_new_tokens, 0, MAX_SEQ)
        args.integer(where, "in_flight", in_flight, 1, MAX_SEQ)
        every = args.optional_integer(where, "read_every", read_every, 1, MAX_SEQ) or max(n, 1)
        if progress is not None and not callable(progress):
            raise args.fail(where, "progress", progress, "None or a function (steps, seconds)")
        _check_room(where, seqs, n, self.max_seq)
        stops = _check_stop_ids(where, stop_ids, len(seqs), self.config.vocab_size)
        out: list[list[int]] = [[] for _ in seqs]
        if n == 0:
            self.last_stats = {"steps": 0, "tokens": 0, "seconds": 0.0, "submits": 0, "readbacks": 0}
            return out
        with self._lock("BatchedDecoder.generate"):
            return self._generate(seqs, n, stops, in_flight, every, progress, out)

    def _generate(self, seqs: list[np.ndarray], n: int, stops: list[set[int]], in_flight: int, every: int,
                  progress, out: list[list[int]]) -> list[list[int]]:
        dev = self.device
        t0 = time.perf_counter()
        before = dev.stats.snapshot()
        self._start(seqs)
        done, made = [False] * len(seqs), 0
        while made < n and not all(done):
            k = min(every, n - made)
            self.run_steps(k, in_flight=in_flight)
            made += k
            history = self.program.state("history").numpy()
            for b, p in enumerate(seqs):
                if done[b]:
                    continue
                new = history[b, p.size + len(out[b]):p.size + made].tolist()
                hit = next((j for j, t in enumerate(new) if t in stops[b]), None)
                out[b] += new if hit is None else new[:hit + 1]
                done[b] = hit is not None
            if progress is not None:
                with self._lock.callback():
                    progress(made, time.perf_counter() - t0)
        d = dev.stats.since(before)
        self.last_stats = {"steps": made, "tokens": sum(map(len, out)), "seconds": time.perf_counter() - t0,
                           "submits": d.submits, "readbacks": d.readbacks}
        return out


# ---- arguments: checked, never converted first ----

def _check_ids(where: str, name: str, ids, vocab: int) -> np.ndarray:
    """A non-empty 1-D list, tuple or integer numpy array of ids in [0, vocab) as u32 (args.ids' rule)."""
    arr = args.ids(where, name, ids, 0, vocab - 1)
    if arr.size == 0:
        raise args.fail(where, name, ids, "a non-empty list of token ids (a prompt needs at least one)")
    return arr.astype(np.uint32)


def _check_prompts(where: str, prompts, vocab: int, most: int) -> list[np.ndarray]:
    """1..most prompts, each checked by _check_ids."""
    if not isinstance(prompts, Sequence) or isinstance(prompts, (str, bytes)) or not 1 <= len(prompts) <= most:
        raise args.fail(where, "prompts", prompts, f"a list of 1 to {most} prompts (the batch), each a list of "
                                                   f"token ids")
    return [_check_ids(where, f"prompts[{b}]", p, vocab) for b, p in enumerate(prompts)]


def _check_room(where: str, seqs: list[np.ndarray], new: int, max_seq: int) -> None:
    """Each prompt plus `new` ids within the KV cache's `max_seq` positions (the first refused by its index)."""
    for b, p in enumerate(seqs):
        if p.size + new > max_seq:
            raise LimitError(f"{where}: prompt {b} ({p.size} ids) + {new} new tokens exceed the KV cache of "
                             f"{max_seq} positions (max_seq)")


def _check_stop_ids(where: str, stop_ids, count: int, vocab: int) -> list[set[int]]:
    """Stop ids as one set per sequence, from ids shared by all or one list of ids per sequence."""
    rule = (f"a list of ids in [0, {vocab - 1}] (or a tuple, set, range or 1-D integer array of them) shared by every "
            f"prompt, or one such list per prompt ({count})")
    if isinstance(stop_ids, range) or (isinstance(stop_ids, np.ndarray) and stop_ids.ndim == 1):
        # ids shared by every prompt as Llama.generate takes them too (a range, a 1-D integer array)
        ids = list(stop_ids) if isinstance(stop_ids, range) else stop_ids
        return [set(args.ids(where, "stop_ids", ids, 0, vocab - 1).tolist())] * count
    if not isinstance(stop_ids, (list, tuple, set, frozenset)):
        # a generator, dict, None, int...: not a mix of ids and lists, which the rule's last words used to say
        kind = type(stop_ids).__name__
        given = "None (no stop ids: pass ())" if stop_ids is None else f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
        raise args.fail(where, "stop_ids", stop_ids, f"{rule}; got {given}")
    items = list(stop_ids)
    collections = (list, tuple, set, frozenset, range, np.ndarray)
    if items and all(isinstance(s, collections) for s in items):
        if len(items) != count or isinstance(stop_ids, (set, frozenset)):   # a set of lists has no order to match
            raise args.fail(where, "stop_ids", stop_ids, rule + "; per-prompt lists in a list or tuple, in the "
                                                                "prompts' order")
        return [set(args.ids(where, f"stop_ids[{b}]", list(ids) if isinstance(ids, (set, frozenset, range)) else ids,
                             0, vocab - 1).tolist()) for b, ids in enumerate(items)]
    if any(isinstance(s, collections) for s in items):
        raise args.fail(where, "stop_ids", stop_ids, rule + ", not a mix of ids and lists")
    return [set(args.ids(where, "stop_ids", items, 0, vocab - 1).tolist())] * count
