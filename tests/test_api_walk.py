"""The API walk: every public function of wg.ops and the public methods of Device, Tensor, Graph, Program, Llama,
QuantizedLlama, Tokenizer, DecoderConfig, Checkpoint, QuantizedWeight and PretrainedFiles (and of wg.ops'
TieredKVCache and QuantizedKV), with wgraph.models.from_pretrained and open_pretrained, wgraph.set_quiet and
ggml_blocks' quantize and stack_rows, have every scalar parameter fed each value of BAD (and of BAD_LIKE: numpy
scalars and more, each where its BAD value is bad), and every tensor (or object) parameter each value of
BAD_TENSORS. Each call must raise a WgraphError whose message names the parameter, queue no GPU work (no pending
item, no submit, no dispatch) and leave every tensor's contents as they were (read back before and after).

The scalar parameters are read from the signatures (inspect): every parameter that a case does not name as a
tensor or host-data parameter. A bad value that is legitimately valid for a parameter (None for an optional
one, True for a bool, 2**31 for a u32) is declared in the case's `valid`, with the reason, and not called; for a
tensor parameter, None is valid where the signature's default is None (an absent optional input). Host data
(`dev.tensor`'s array, ...) follows host_arrays.py's rule, whose messages name the call (tests/test_host_arrays.py).
A `**options` parameter (generate_text's) has each option its case names walked as a scalar parameter.
A public callable without a case, or a case whose parameters do not match its signature, fails
test_every_public_callable_has_a_case: a new function is covered by the same walk or the suite says so."""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

import attrs
import numpy as np
import pytest

import wgraph as wg
from wgraph import ggml_blocks
from wgraph.ggml_blocks import QuantizedWeight
from wgraph.models import (BatchedDecoder, Checkpoint, DecoderConfig, Llama, PretrainedFiles, Tokenizer,
                           from_pretrained, open_pretrained, text)
from wgraph.models.config import LlamaConfig
from wgraph.models.quantized import QuantizedLlama
from wgraph.models.random_checkpoint import random_weights, tiny_config, write_checkpoint
from wgraph.ops.bdpa import rope_table
from wgraph.ops.elementwise import ScaleParams

TINY_TOKENIZER = Path(__file__).parent / "data" / "tiny_tokenizer"   # 701 ids, a chat template

BAD = {"1.7": 1.7, "'3'": "3", "True": True, "None": None, "nan": math.nan, "inf": math.inf, "-1": -1,
       "2**31": 2**31, "2**32": 2**32, "array": np.array(3)}
# More bad values, each walked where its BAD label (the second; None: everywhere) is bad: numpy scalars of BAD's
# values (the rules compare a numpy scalar as the Python number it is), -inf, a u64 past the range, a Python int past
# a float's range (float() raises OverflowError on it), bytes, a complex and an array of two values (where a name is
# expected, `value == "paged"` on it is an array, whose truth value numpy refuses with a raw ValueError).
BAD_LIKE = {"np.float64(1.7)": (np.float64(1.7), "1.7"), "np.float32(1.7)": (np.float32(1.7), "1.7"),
            "np.bool_(True)": (np.bool_(True), "True"), "np.float32(nan)": (np.float32("nan"), "nan"),
            "np.float64(inf)": (np.float64("inf"), "inf"), "np.float16(inf)": (np.float16("inf"), "inf"),
            "-inf": (-math.inf, "inf"), "np.int64(-1)": (np.int64(-1), "-1"),
            "np.int64(2**31)": (np.int64(2**31), "2**31"),
            "np.uint64(2**32)": (np.uint64(2**32), "2**32"), "np.uint64(2**64-1)": (np.uint64(2**64 - 1), "2**32"),
            "2**64": (2**64, "2**32"), "10**400": (10**400, None), "b'3'": (b"3", "'3'"), "1j": (1j, None),
            "np.array([1.0, 2.0])": (np.array([1.0, 2.0]), "array")}
BAD_TENSORS = {"None": None, "1.7": 1.7, "'x'": "x", "array": np.ones((2, 2), np.float32)}

# Shorthands for `valid`: the bad values a rule accepts.
REAL = {"1.7", "-1", "2**31", "2**32"}     # a finite real in f32's range
NONNEG = {"1.7", "2**31", "2**32"}         # a finite real >= 0
U32 = {"2**31"}                            # an integer in [0, 2^32 - 1]
OPT = {"None"}                             # an optional argument
BOOL = {"True"}
TEXT = {"'3'"}                             # any str (a name, a label)


@attrs.frozen
class Case:
    """How to call one public callable well: build(env) -> (callable, args, kwargs), a fresh call each time.
    `tensors`: its tensor and object parameters (fed BAD_TENSORS, not BAD); `data`: its host-data parameters
    (neither). `valid`: {param: (labels, reason)}. skip_good: why the good call is not made here. `options`: the
    names a `**options` parameter takes, each walked as a scalar parameter."""

    build: object
    tensors: tuple = ()
    valid: dict = attrs.field(factory=dict)
    skip_good: str = ""
    data: tuple = ()
    options: tuple = ()


ATTENTION_OPTIONS = {
    "causal": (BOOL, "a bool"), "scale": (OPT | REAL, "None: 1/sqrt(D); else any finite real in f32's range"),
    "softcap": (NONNEG, "0 is off; any finite real in [f32's smallest normal, f32's largest]"), "return_lse": (BOOL, "a bool"),
    "sliding_window": (U32, "a u32 window (compared in u32 by the kernels)"),
}
BATCHED_OPTIONS = {k: ATTENTION_OPTIONS[k] for k in ("causal", "scale", "softcap", "return_lse")} | {
    "variant": (OPT, "planned")}
# generate_text / stream_text: the prompt and max_new_tokens, and each of their **options (text.OPTIONS)
TEXT_OPTIONS = {
    "prompt": (TEXT, "any str"), "chat": (BOOL, "a bool"), "system": (OPT, "no system message"),
    "temperature": (NONNEG, "0 is greedy; any finite real >= 0"), "top_k": (U32, "any u32"),
    "seed": (U32 | {"2**32"}, "any u64"), "skip_special_tokens": (BOOL, "a bool"),
    "stop_ids": (OPT | {"array"}, "None: the tokenizer's eos ids; a 0-d numpy integer array is one id"),
}


class Env:
    """Tiny tensors every case shares (their contents are read back around each case)."""

    def __init__(self, dev, tmp: Path):
        self.dev = dev
        self.tensors = []
        r = np.random.default_rng(7)
        self.f16 = dev.caps.has_f16

        def t(shape, dtype=np.float32, data=None):
            arr = r.standard_normal(shape).astype(dtype) if data is None else np.asarray(data, dtype)
            x = dev.tensor(arr)
            self.tensors.append(x)
            return x

        self.t = t
        self.q, self.k, self.v = t((2, 2, 8)), t((4, 1, 8)), t((4, 1, 8))
        self.q1 = t((1, 2, 8))
        self.vq, self.vk = t((3, 2, 8)), t((5, 1, 8))
        self.q4, self.cache = t((1, 1, 2, 8)), t((1, 6, 1, 8))
        self.new4 = t((1, 1, 1, 8))
        self.lens = t((2,), np.uint32, [3, 4])
        self.x24, self.x8 = t((2, 4)), t((2, 8))
        self.w_qkv = t((32, 8))   # [(2 q heads + 2 kv heads) x 8, 8] for linear_rope_kv_append
        self.w48, self.w8 = t((4, 8)), t((8,))
        self.x3 = t((2, 3, 4))
        self.rows = t((2, 2, 8))
        self.cos, self.sin = t((8, 4)), t((8, 4))
        self.table = t((10, 4))
        self.logits = t((2, 10))
        self.kc, self.vc, self.kn = t((8, 1, 8)), t((8, 1, 8)), t((2, 1, 8))
        self.u32 = [t((1,), np.uint32, [v]) for v in (3, 0, 0, 1)] + [t((8,), np.uint32, np.zeros(8))]
        if self.f16:
            self.hot = [t((4, 1, 8), np.float16) for _ in range(2)]
            self.cold = [t((4, 1, 8), np.float16) for _ in range(2)]
            self.kn16 = t((1, 1, 8), np.float16)
            self.qkv = wg.ops.kv_quantize(t((2, 1, 8)), "int8")
            self.qcache = [wg.ops.kv_quantize(t((8, 1, 8)), "int8") for _ in range(2)]
            self.tensors += [self.qkv.packed, self.qkv.scales] + [x for c in self.qcache for x in (c.packed, c.scales)]
            self.tiered = wg.ops.TieredKVCache(dev, kv_heads=1, head_dim=8, hot_window=4, cold_capacity=8)
            self.tiered.append(self.kn16, self.kn16)   # one row: attention's one query sees a key
            self.tensors += [self.tiered.hot_k, self.tiered.hot_v, self.tiered.cold_k, self.tiered.cold_v]
            kb = r.standard_normal((4, 1, 8))
            self.bdpa = wg.ops.bdpa_decompose(kb, kb * 2, [1, 2, 1, 3]).upload(dev)
            self.rope = dev.tensor(rope_table(*wg.ops.rope_tables(8, 8)))
            self.tensors += [self.bdpa.basis, self.bdpa.residual, self.bdpa.residual_scale, self.bdpa.index, self.rope]
        g = wg.Graph("walk")
        x = g.input("x", (4,), "f32")
        g.output("y", wg.ops.scale(g.state("s", (4,), "f32", init=np.ones(4, np.float32)), 2.0))
        g.output("z", wg.ops.scale(x, 3.0))
        self.graph = g
        self.prog = g.compile(dev)
        self.tensors += [self.prog.state("s"), self.prog.state("x")]
        cfg = tiny_config(num_hidden_layers=1, hidden_size=16, intermediate_size=32, num_attention_heads=2,
                          num_key_value_heads=1, head_dim=8, vocab_size=704)   # the tiny tokenizer's ids fit
        self.config, self.ckpt_config = LlamaConfig.from_dict(cfg), cfg
        weights = random_weights(cfg)
        self.model = Llama.from_weights(self.config, weights, dev, dtype="f32", max_seq=16)
        self.ckpt_dir = write_checkpoint(tmp / "ckpt", cfg, weights)
        self.ckpt = Checkpoint(self.ckpt_dir)
        self.model.tokenizer = self.tok = Tokenizer.from_directory(TINY_TOKENIZER)
        self.tensors += [self.model.program.state(n) for n in ("token", "pos", "kv_len", "history", "l0.k_cache")]
        self.x32 = t((2, 32))   # [rows, (2 q heads + 2 kv heads) x 8] for rope_kv_append; x of a [8, 32] weight
        self.qw_host = ggml_blocks.quantize(r.standard_normal((8, 32)).astype(np.float32), "Q8_0")
        self.qw = self.qw_host.upload(dev)
        self.tensors.append(self.qw.blocks)
        self.batched = BatchedDecoder(self.model, 2, max_seq=8)
        self.bcache = (t((2, 4, 1, 8)), t((2, 4, 1, 8)))   # [B, capacity, kv heads, D] for rope_kv_append_batched
        self.bpos, self.bhistory = t((2,), np.uint32, [0, 1]), t((2, 8), np.uint32, np.zeros((2, 8)))
        self.bu32 = [t((2,), np.uint32, [v, v + 1]) for v in (3, 0, 0, 1)]

    def need_f16(self):
        if not self.f16:
            pytest.skip(f"needs the shader-f16 feature, which {self.dev.caps.adapter_name!r} lacks")


def _graph_call(method, *args, **kwargs):
    """A call of a Graph method on a fresh graph holding a value "x" (and a node "scale_2")."""
    def build(e):
        g = wg.Graph("g")
        x = g.input("x", (4,), "f32")
        wg.ops.scale(x, 2.0)
        return getattr(g, method), tuple(x if isinstance(a, str) and a == "<x>" else a for a in args), kwargs
    return build


OPS = {
    "attention": Case(lambda e: (wg.ops.attention, (e.q, e.k, e.v), dict(causal=True)),
                      ("q", "k", "v", "page_table", "out"),
                      ATTENTION_OPTIONS | {"start_pos": (OPT | U32, "None: bottom-right; else a u32 position"),
                                           "kv_start": (U32, "a u32 position"), "kv_len": (OPT, "every row"),
                                           "page_size": (U32, "ignored unless kv_layout='paged'"),
                                           "variant": (OPT, "planned"), "layer": (OPT | U32, "a layer index")}),
    "attention_plan": Case(lambda e: (wg.ops.attention_plan, (e.q, e.k, e.v), dict(causal=True)),
                           ("q", "k", "v", "page_table"),
                           {k: v for k, v in ATTENTION_OPTIONS.items() if k != "return_lse"} | {"start_pos": (OPT | U32, "a u32 position"),
                                                "kv_start": (U32, "a u32 position"), "kv_len": (OPT, "every row"),
                                                "page_size": (U32, "ignored unless paged"), "variant": (OPT, "planned"),
                                                "layer": (OPT | U32, "a layer index"),
                                                "caps": (OPT, "the tensors' device's")}),
    "attention_varlen": Case(lambda e: (wg.ops.attention_varlen, (e.vq, e.vk, e.vk, [0, 3], [0, 5]),
                                        dict(max_seqlen_q=3, max_seqlen_k=5, causal=False)),
                             ("q", "k", "v", "out"),
                             BATCHED_OPTIONS | {"max_seqlen_q": (U32, "a bound: any u32 (too many workgroups for "
                                                                      "the device is the planner's LimitError)"),
                                                "max_seqlen_k": (U32, "a bound: any u32 (lavapipe's loop cap is "
                                                                      "the planner's LimitError)")}),
    "attention_kvcache": Case(lambda e: (wg.ops.attention_kvcache, (e.q4, e.cache, e.cache),
                                         dict(cache_seqlens=[2], causal=True)),
                              ("q", "k_cache", "v_cache", "k_new", "v_new", "out"),
                              BATCHED_OPTIONS | {"block_table": (OPT, "a contiguous cache"),
                                                 "page_size": (OPT, "a contiguous cache")}),
    "seqlens_advance": Case(lambda e: (wg.ops.seqlens_advance, (e.lens, 1), {}), ("cache_seqlens",),
                            {"n": (U32, "any u32 (the GPU add saturates)")}),
    "sdpa": Case(lambda e: (wg.ops.sdpa, (e.x3, e.x3, e.x3), {}), ("query", "key", "value"),
                 {"attn_mask": (OPT | BOOL | {"np.float32(1.7)", "np.float32(nan)", "np.float16(inf)"},
                                "no mask; a 0-d bool mask (every key takes part); a 0-d f32 or f16 mask is host data "
                                "added to every score, as torch's (NaN and inf too)"),
                  "is_causal": (BOOL, "a bool"), "enable_gqa": (BOOL, "a bool"),
                  "scale": (OPT | REAL, "None: 1/sqrt(D); any finite real")}),
    "transpose01": Case(lambda e: (wg.ops.transpose01, (e.x3,), {}), ("x", "out")),
    "add": Case(lambda e: (wg.ops.add, (e.x8, e.x8), {}), ("a", "b", "indirect", "out")),
    "mul": Case(lambda e: (wg.ops.mul, (e.x8, e.x8), {}), ("a", "b", "indirect", "out")),
    "scale": Case(lambda e: (wg.ops.scale, (e.x8, 2.0), {}), ("x", "indirect", "out"),
                  {"factor": (REAL, "any finite real in f32's range")}),
    "silu": Case(lambda e: (wg.ops.silu, (e.x8,), {}), ("x", "out")),
    "gelu": Case(lambda e: (wg.ops.gelu, (e.x8,), {}), ("x", "out")),
    "geglu": Case(lambda e: (wg.ops.geglu, (e.x8,), {}), ("x", "out")),
    "softcap": Case(lambda e: (wg.ops.softcap, (e.x8, 2.0), {}), ("x", "out"), {"cap": (NONNEG, "any finite real in [f32's smallest normal, f32's largest]")}),
    "swiglu": Case(lambda e: (wg.ops.swiglu, (e.x8,), {}), ("x", "out")),
    "softmax": Case(lambda e: (wg.ops.softmax, (e.x8,), {}), ("x", "out")),
    "argmax": Case(lambda e: (wg.ops.argmax, (e.logits,), {}), ("x", "out")),
    "linear": Case(lambda e: (wg.ops.linear, (e.x8, e.w48), {}), ("x", "w", "b", "norm", "residual", "out"),
                   {"eps": (NONNEG, "any finite real in [f32's smallest normal, f32's largest] (the fused norm's)"), "activation": (OPT, "no activation"),
                    "variant": (OPT, "planned"), "split_k": (OPT, "planned (a split above the kernel's most is the "
                                                                   "planner's LimitError, naming split_k)"),
                    "x_int8": (BOOL, "a bool (True with a dense W: the ArgumentError naming x_int8)")}),
    "linear_q": Case(lambda e: (wg.ops.linear_q, (e.x32, e.qw), {}), ("x", "w", "b", "norm", "residual", "out"),
                     {"eps": (NONNEG, "any finite real in [f32's smallest normal, f32's largest] (the fused norm's)"), "activation": (OPT, "no activation"),
                      "variant": (OPT, "planned"), "x_int8": (BOOL, "a bool")}),
    "embedding_q": Case(lambda e: (wg.ops.embedding_q, ([1, 2], e.qw), {}), ("table", "out"),
                        {"ids": ({"array"}, "a 0-d numpy integer array is one id")}),
    "plan_linear_q": Case(lambda e: (wg.ops.plan_linear_q, (2, 8, 32, "Q8_0"), {}), (),
                          {"rows": (U32, "any u32 rows (chunked)"), "n": (U32, "any u32 features (a plan, no memory)"),
                           "k": (U32, "any u32 (a plan: the weight's own checks are QuantizedWeight's)"),
                           "variant": (OPT, "planned"), "swiglu": (BOOL, "a bool"),
                           "fused": (set(), "a tuple of names"), "caps": (OPT, "any device"),
                           "x_int8": (BOOL, "a bool")}),
    "linear_rope_kv_append": Case(lambda e: (wg.ops.linear_rope_kv_append, (e.x8, e.w_qkv, e.cos, e.sin, (e.kc, e.vc),
                                                                         1), dict(q_heads=2)),
                                  ("x", "w", "cos", "sin", "cache", "b", "norm", "page_table", "out"),
                                  {"eps": (NONNEG, "any finite real in [f32's smallest normal, f32's largest] (the fused norm's)"),
                                   "page_size": (U32, "ignored unless layout='paged'"),
                                   "pos_offset": ({"-1"}, "an offset: pos + pos_offset is what must be a position")}),
    "rope_kv_append": Case(lambda e: (wg.ops.rope_kv_append, (e.x32, e.cos, e.sin, (e.kc, e.vc), 1), dict(q_heads=2)),
                           ("qkv", "cos", "sin", "cache", "page_table"),
                           {"page_size": (U32, "ignored unless layout='paged'"),
                            "pos_offset": ({"-1"}, "an offset: pos + pos_offset is what must be a position")}),
    "rmsnorm": Case(lambda e: (wg.ops.rmsnorm, (e.x8, e.w8), {}), ("x", "weight", "out"),
                    {"eps": (NONNEG - {"-1"}, "any finite real in [f32's smallest normal, f32's largest]")}),
    "layernorm": Case(lambda e: (wg.ops.layernorm, (e.x8, e.w8), {}), ("x", "weight", "bias", "out"),
                      {"eps": (NONNEG, "any finite real in [f32's smallest normal, f32's largest]")}),
    "add_rmsnorm": Case(lambda e: (wg.ops.add_rmsnorm, (e.x8, e.x8, e.w8), {}), ("x", "residual", "weight", "out"),
                        {"eps": (NONNEG, "any finite real in [f32's smallest normal, f32's largest]")}),
    "rope": Case(lambda e: (wg.ops.rope, (e.rows, e.cos, e.sin), dict(pos=1)), ("x", "cos", "sin", "out"),
                 {"rotary_dim": (OPT, "every dim of the head"), "interleaved": (BOOL, "a bool")}),
    "rope_tables": Case(lambda e: (wg.ops.rope_tables, (8, 8), {}), (),
                        {"max_pos": (U32, "any u32 rows (the memory is the caller's)"),
                         "head_dim": (U32, "any even u32 (the memory is the caller's)"),
                         "base": (NONNEG, "any finite real > 0")}),
    "reshape": Case(lambda e: (wg.ops.reshape, (e.x24, 8), {}), ("x",), {"shape": ({"-1"}, "-1 is inferred")}),
    "embedding": Case(lambda e: (wg.ops.embedding, ([1, 2], e.table), {}), ("table", "out"),
                      {"dtype": (OPT, "the table's"), "ids": ({"array"}, "a 0-d numpy integer array is one id")}),
    "sample": Case(lambda e: (wg.ops.sample, (e.logits,), dict(temperature=1.0)), ("logits", "out"),
                   {"temperature": (NONNEG, "0 is argmax; any finite real >= 0"), "top_k": (U32, "any u32"),
                    "seed": (U32 | {"2**32"}, "any u64"), "step": (U32, "any u32")}),
    "kv_append": Case(lambda e: (wg.ops.kv_append, ((e.kc, e.vc), e.kn, e.kn, 1), {}), ("cache", "k_new", "v_new",
                                                                                         "page_table"),
                      {"page_size": (U32, "ignored unless layout='paged'"),
                       "pos_offset": ({"-1"}, "an offset: pos + pos_offset is what must be a position")}),
    "kv_append_quantized": Case(lambda e: (e.need_f16(), (wg.ops.kv_append_quantized, (
        tuple((c.packed, c.scales) for c in e.qcache), e.kn, e.kn, 1), dict(mode="int8")))[1],
        ("cache", "k_new", "v_new", "page_table"),
        {"page_size": (U32, "ignored unless layout='paged'"), "pos_offset": ({"-1"}, "an offset")}),
    # the scales it writes are f16 (a quantized cache's), from f32 rows too: the kernel needs shader-f16
    "kv_quantize": Case(lambda e: (e.need_f16(), (wg.ops.kv_quantize, (e.kn,), {}))[1], ("x", "out")),
    "kv_dequantize": Case(lambda e: (e.need_f16(), (wg.ops.kv_dequantize, (e.qkv,), {}))[1],
                          ("qkv", "out"), data=("old_args",)),
    "tiered_attention": Case(lambda e: (e.need_f16(), (wg.ops.tiered_attention, (e.q, *e.hot, *e.cold),
                                                       dict(kv_len=6, causal=True)))[1],
                             ("q", "hot_k", "hot_v", "cold_k", "cold_v", "page_table", "out"),
                             ATTENTION_OPTIONS | {"hot_window": (OPT, "the ring's rows"),
                                                  "page_size": (U32, "ignored without page_table")}),
    "tiered_quant_attention": Case(lambda e: (e.need_f16(), (wg.ops.tiered_quant_attention, (
        e.q, *e.hot, e.qcache[0].packed, e.qcache[1].packed, e.qcache[0].scales, e.qcache[1].scales),
        dict(mode="int8", kv_len=6, causal=True)))[1],
        ("q", "hot_k", "hot_v", "cold_k", "cold_v", "cold_k_scale", "cold_v_scale", "page_table", "out"),
        ATTENTION_OPTIONS | {"hot_window": (OPT, "the ring's rows"), "page_size": (U32, "ignored without page_table")}),
    "bdpa_attention": Case(lambda e: (e.need_f16(), (wg.ops.bdpa_attention, (e.q1, e.bdpa, e.rope),
                                                     dict(q_pos=3, causal=True)))[1],
                           ("q", "cache", "rope", "out"),
                           ATTENTION_OPTIONS | {"q_pos": (U32, "a u32 position"), "kv_len": (OPT, "every row")}),
    "bdpa_decompose": Case(lambda e: (wg.ops.bdpa_decompose, (np.ones((4, 1, 8)), np.ones((4, 1, 8)), [1, 2, 1, 3]),
                                      {}), (), {"positions": (OPT, "0..L-1")}, data=("k", "v")),
    "decode_advance": Case(lambda e: (wg.ops.decode_advance, (e.u32[0],),
                                      dict(token=e.u32[1], history=e.u32[4], pos=e.u32[2], kv_len=e.u32[3])),
                           ("next_id", "token", "history", "pos", "kv_len")),
    "decode_advance_batched": Case(lambda e: (wg.ops.decode_advance_batched, (e.bu32[0],),
                                              dict(token=e.bu32[1], history=e.bhistory, pos=e.bu32[2],
                                                   kv_len=e.bu32[3])),
                                   ("next_ids", "token", "history", "pos", "kv_len")),
    "rope_kv_append_batched": Case(lambda e: (wg.ops.rope_kv_append_batched, (e.x32, e.cos, e.sin, e.bcache, e.bpos),
                                              dict(q_heads=2)), ("qkv", "cos", "sin", "cache", "pos")),
    "kernel_path": Case(lambda e: (wg.ops.kernel_path, ({"decode": "decode_streaming_f32"},), {}), ()),
    "TieredKVCache": Case(lambda e: (e.need_f16(), (wg.ops.TieredKVCache, (e.dev,),
                                                    dict(kv_heads=1, head_dim=8, hot_window=4, cold_capacity=8)))[1],
                          ("device",), {"quant": (OPT, "an f16 cold part"), "page_table": (OPT, "pages in order")}),
    "TieredKVCache.append": Case(lambda e: (e.need_f16(), (e.tiered.append, (e.kn16, e.kn16), {}))[1],
                                 ("k_new", "v_new"), {"kv_len": (OPT, "the host-tracked length")}),
    "TieredKVCache.attention": Case(lambda e: (e.need_f16(), (e.tiered.attention, (e.q1,), dict(causal=True)))[1],
                                    ("q",), {"kv_len": (OPT, "the host-tracked length"), "causal": (BOOL, "a bool")},
                                    data=("options",)),   # tiered_attention's own options, walked there
    "QuantizedKV": Case(lambda e: (e.need_f16(), (wg.ops.QuantizedKV, (e.qkv.packed, e.qkv.scales, "int8", 8),
                                                  {}))[1], ("packed", "scales")),
}

DEVICE = {
    "Device": Case(lambda e: (wg.Device, (), {}), (), {"adapter": (OPT, "the preferred adapter")},
                   skip_good="a new device costs ~0.5 s; every other test makes one"),
    "Device.empty": Case(lambda e: (e.dev.empty, ((2,),), {}), (), {"label": (TEXT, "any str")}),
    "Device.tensor": Case(lambda e: (e.dev.tensor, (np.ones(2, np.float32),), {}), (),
                          {"dtype": (OPT, "the data's own"), "label": (TEXT, "any str")}, data=("array",)),
    "Device.write": Case(lambda e: (e.dev.write, (e.dev.empty((2,)), np.ones(2, np.float32)), {}),
                         ("tensor",), data=("array",)),
    "Device.read": Case(lambda e: (e.dev.read, (e.x8,), {}), ("tensor",)),
    "Device.record": Case(lambda e: (e.dev.record, (), {}), (), {"profile": (BOOL, "a bool"),
                                                                "label": (OPT | TEXT, "any str; None: numbered")}),
    "Device.wait": Case(lambda e: (e.dev.wait, (0,), {}), ()),
    "Device.fence": Case(lambda e: (e.dev.fence, (), {})),
    "Device.flush": Case(lambda e: (e.dev.flush, (), {})),
    "Device.sync": Case(lambda e: (e.dev.sync, (), {})),
    "Device.check_errors": Case(lambda e: (e.dev.check_errors, (), {})),
    "Device.destroy": Case(None, skip_good="no parameters; destroying the session's device ends the run"),
    "Device.recreate": Case(None, skip_good="no parameters; test_device_loss.py"),
    "Tensor.numpy": Case(lambda e: (e.x8.numpy, (), {})),
    "Tensor.reshape": Case(lambda e: (e.x24.reshape, (8,), {}), (), {"shape": ({"-1"}, "-1 is inferred")}),
    "Tensor.prefix": Case(lambda e: (e.x24.prefix, (1,), {})),
    "Tensor.poison": Case(lambda e: (e.dev.empty((1,)).poison, ("discarded",), {}), (),
                          {"reason": (TEXT, "any str")}),
}

GRAPHS = {
    "Graph": Case(lambda e: (wg.Graph, ("g",), {}), (), {"name": (TEXT, "any str")}),
    "Graph.input": Case(_graph_call("input", "y", (2,)), (), {"name": (TEXT, "any str")}),
    "Graph.state": Case(_graph_call("state", "s", (4,)), (), {"name": (TEXT, "any str"),
                                                               "init": (OPT, "zeros")}),
    "Graph.const": Case(_graph_call("const", "c", np.ones(2, np.float32)), (),
                        {"name": (TEXT, "any str"), "dtype": (OPT, "the array's own")}, data=("array",)),
    "Graph.output": Case(_graph_call("output", "o", "<x>"), ("value",), {"name": (TEXT, "any str")}),
    "Graph.scope": Case(_graph_call("scope", "layer0"), (), {"prefix": (TEXT, "any str")}),
    "Graph.compile": Case(lambda e: (e.graph.compile, (e.dev,), {}), (), {"device": (OPT, "the default device"),
                                                                      "shared_states": (OPT, "none shared")}),
    "Graph.node": Case(_graph_call("node", "x"), ()),
    "Graph.consumers": Case(_graph_call("consumers", "x"), ()),
    "Graph.from_json": Case(lambda e: (wg.Graph.from_json, (e.graph.to_json(),), {}), ()),
    "Graph.to_json": Case(lambda e: (e.graph.to_json, (), {})),
    "Graph.to_dot": Case(lambda e: (e.graph.to_dot, (), {})),
    "Graph.topological_order": Case(lambda e: (e.graph.topological_order, (), {})),
    "Program.run": Case(lambda e: (e.prog.run, (), dict(x=np.ones(4, np.float32))), ()),
    "Program.state": Case(lambda e: (e.prog.state, ("s",), {}), ()),
    "Program.reset_state": Case(lambda e: (e.prog.reset_state, (), {}), (), {"name": (OPT, "every state")}),
    "Program.run_many": Case(lambda e: (e.prog.run_many, (2,), dict(x=np.ones(4, np.float32))), (),
                             {"n": (U32 | {"2**32"}, "any count up to 2^63 - 1 (not run here)"),
                              "in_flight": (U32, "any u32 window (not run here)"),
                              "per_submit": (set(), "1..1024 replays a submit: every BAD value is refused")}),
    "Program.profile": Case(lambda e: (e.prog.profile, (), dict(x=np.ones(4, np.float32))), ()),
    "Program.update": Case(lambda e: (e.prog.update, (e.graph.producer[e.graph.outputs["z"]], ScaleParams(3.0)), {}), ("params",)),
    "Program.explain": Case(lambda e: (e.prog.explain, (), {}), (), {"full": (BOOL, "a bool")}),
    "Program.to_dot": Case(lambda e: (e.prog.to_dot, (), {})),
}

MODEL = {
    "Llama": Case(lambda e: (Llama, (e.config, e.dev, lambda name, shape: None), dict(dtype="f32")), (),
                  {"max_seq": (OPT, "the config's, up to 2048")}, skip_good="built once for the walk (Env)"),
    "Llama.from_pretrained": Case(lambda e: (Llama.from_pretrained, ("/nonexistent",), dict(dtype="f32")), (),
                                  {"device": (OPT, "the default device"), "max_seq": (OPT, "the config's"),
                                   "path": (TEXT, "a path: a missing one is the loader's CheckpointError")},
                                  skip_good="tests/test_llama.py loads checkpoints"),
    "Llama.from_weights": Case(lambda e: (Llama.from_weights, (e.config, {}), dict(dtype="f32")), (),
                               {"device": (OPT, "the default device"), "max_seq": (OPT, "the config's")},
                               skip_good="built once for the walk (Env)"),
    "Llama.generate": Case(lambda e: (e.model.generate, ([1, 2], 1), {}), (),
                           {"temperature": (NONNEG, "0 is greedy; any finite real >= 0"), "top_k": (U32, "any u32"),
                            "seed": (U32 | {"2**32"}, "any u64"), "read_every": (OPT, "at the end"),
                            "progress": (OPT, "no callback")}),
    "Llama.prefill": Case(lambda e: (e.model.prefill, ([1, 2],), {}), (),
                          {"all_logits": (BOOL, "a bool"), "sample": (OPT, "argmax")}),
    "Llama.run_steps": Case(lambda e: (e.model.run_steps, (1,), {}), ()),
    "Llama.step": Case(lambda e: (e.model.step, (), {})),
    "Llama.rope_tables": Case(lambda e: (e.model.rope_tables, (), {})),
    "Llama.generate_text": Case(lambda e: (e.model.generate_text, ("hi", 1), {}), (), TEXT_OPTIONS,
                                options=text.OPTIONS),
    "Llama.stream_text": Case(lambda e: (e.model.stream_text, ("hi", 1), {}), (), TEXT_OPTIONS, options=text.OPTIONS),
    "BatchedDecoder": Case(lambda e: (BatchedDecoder, (e.model, 2), dict(max_seq=8)), ("model",),
                           {"max_seq": (OPT, "the model's")}),
    "BatchedDecoder.generate": Case(lambda e: (e.batched.generate, ([[1, 2], [3]], 1), {}), (),
                                    {"read_every": (OPT, "at the end"), "progress": (OPT, "no callback")}),
    "BatchedDecoder.prefill": Case(lambda e: (e.batched.prefill, ([[1, 2], [3]],), {}), ()),
    "BatchedDecoder.run_steps": Case(lambda e: (e.batched.run_steps, (1,), {}), ()),
    "BatchedDecoder.step": Case(lambda e: (e.batched.step, (), {})),
    "models.from_pretrained": Case(lambda e: (from_pretrained, ("/nonexistent",), dict(dtype="f32")), (),
                                   {"device": (OPT, "the default device"), "max_seq": (OPT, "the config's"),
                                    "dtype": (OPT, "f16 where the device has shader-f16"), "x_int8": (BOOL, "a bool"),
                                    "path": (TEXT, "a path: a missing one is the loader's CheckpointError")},
                                   skip_good="tests/test_text_generation.py loads checkpoints"),
    "models.open_pretrained": Case(lambda e: (open_pretrained, (e.ckpt_dir,), {}), (),
                                   {"path": (TEXT, "a path: a missing one is a CheckpointError")}),
    "PretrainedFiles.load": Case(lambda e: (open_pretrained(e.ckpt_dir).load, (e.dev,), dict(dtype="f32")), (),
                                 {"device": (OPT, "the default device"), "max_seq": (OPT, "the config's"),
                                  "dtype": (OPT, "f16 where the device has shader-f16"),
                                  "x_int8": (BOOL, "a bool (True with a directory: the ArgumentError naming x_int8)")},
                                 skip_good="from_pretrained's second step: tests/test_text_generation.py loads with it"),
    "QuantizedLlama": Case(lambda e: (QuantizedLlama, (e.config, e.dev, {}), {}), (),
                           {"max_seq": (OPT, "the config's, up to 2048"), "x_int8": (BOOL, "a bool")},
                           skip_good="a model build compiles a decode program; tests/test_quant_model.py builds them"),
    "QuantizedLlama.from_weights": Case(lambda e: (QuantizedLlama.from_weights, (e.config, {}), {}), (),
                                        {"device": (OPT, "the default device"), "max_seq": (OPT, "the config's"),
                                         "x_int8": (BOOL, "a bool")},
                                        skip_good="a model build compiles a decode program"),
    "QuantizedLlama.from_pretrained": Case(lambda e: (QuantizedLlama.from_pretrained, ("/nonexistent",), {}), (),
                                           {"device": (OPT, "the default device"), "max_seq": (OPT, "the config's"),
                                            "path": (TEXT, "a path")},
                                           skip_good="always UnsupportedError: GGUF files load through "
                                                     "wgraph.models.from_pretrained"),
}

TOKENS_AND_BLOCKS = {
    "Tokenizer.from_directory": Case(lambda e: (Tokenizer.from_directory, ("/nonexistent",), {}), (),
                                     {"path": (TEXT, "a path: a missing one is a CheckpointError")},
                                     skip_good="the walk's Env reads tests/data/tiny_tokenizer with it"),
    "Tokenizer.from_gguf": Case(lambda e: (Tokenizer.from_gguf, ("/nonexistent.gguf",), {}), (),
                                {"gguf": (TEXT, "a path: a missing one is a CheckpointError")},
                                skip_good="tests/test_tokenizer.py reads GGUF vocabularies"),
    "Tokenizer.token_id": Case(lambda e: (e.tok.token_id, ("hi",), {}), (), {"token": (TEXT, "any str (None if unknown)")}),
    "Tokenizer.encode": Case(lambda e: (e.tok.encode, ("hi there",), {}), (),
                             {"text": (TEXT, "any str"), "add_special_tokens": (BOOL, "a bool")}),
    "Tokenizer.decode": Case(lambda e: (e.tok.decode, ([1, 78],), {}), (),
                             {"ids": ({"array"}, "a 0-d numpy integer array is one id"),
                              "skip_special_tokens": (BOOL, "a bool")}),
    "Tokenizer.check_ids": Case(lambda e: (e.tok.check_ids, ([1, 78], "where"), {}), (),
                                {"ids": ({"array"}, "a 0-d numpy integer array is one id"), "where": (TEXT, "any str")}),
    "Tokenizer.apply_chat_template": Case(lambda e: (e.tok.apply_chat_template, ([{"role": "user", "content": "x"}],),
                                                     {}), (),
                                          {"add_generation_prompt": (BOOL, "a bool"), "tokenize": (BOOL, "a bool"),
                                           "template": (OPT, "the default template")},
                                          data=("messages", "kwargs")),   # kwargs: template variables, any JSON
    "Tokenizer.stream_decoder": Case(lambda e: (e.tok.stream_decoder, (), {}), (),
                                     {"skip_special_tokens": (BOOL, "a bool")}),
    "QuantizedWeight": Case(lambda e: (QuantizedWeight, ("Q8_0", (8, 32), e.qw_host.blocks), {}), ("blocks",)),
    "QuantizedWeight.from_bytes": Case(lambda e: (QuantizedWeight.from_bytes, ("Q8_0", (8, 32), e.qw_host.raw()), {}),
                                       (), data=("raw",)),
    "QuantizedWeight.raw": Case(lambda e: (e.qw_host.raw, (), {})),
    "QuantizedWeight.dequantize": Case(lambda e: (e.qw_host.dequantize, (), {})),
    "QuantizedWeight.upload": Case(lambda e: (e.qw_host.upload, (e.dev,), {}), ("device",),
                                   {"label": (TEXT, "any str")}),
    "QuantizedWeight.with_blocks": Case(lambda e: (e.qw_host.with_blocks, (e.qw.blocks,), {}), ("blocks",)),
    "ggml_blocks.quantize": Case(lambda e: (ggml_blocks.quantize, (np.ones((2, 32), np.float32), "Q8_0"), {}), (),
                                 data=("weights",)),
    "DecoderConfig.from_dict": Case(lambda e: (DecoderConfig.from_dict, ({**e.ckpt_config},), {}), (), data=("d",)),
    "DecoderConfig.from_file": Case(lambda e: (DecoderConfig.from_file, (e.ckpt_dir / "config.json",), {}), (),
                                    {"path": (TEXT, "a path: a missing one is a CheckpointError")}),
    "DecoderConfig.window": Case(lambda e: (e.config.window, (0,), {}), ()),
    "DecoderConfig.inv_freq": Case(lambda e: (e.config.inv_freq, (), {})),
    "Checkpoint": Case(lambda e: (Checkpoint, (e.ckpt_dir,), {}), (),
                       {"root": (TEXT, "a path: a missing one is a CheckpointError")}),
    "Checkpoint.get": Case(lambda e: (e.ckpt.get, ("model.norm.weight", (16,)), {}), (),
                           {"name": (TEXT, "any str: a missing tensor is a CheckpointError naming it")}),
    "Checkpoint.check_shapes": Case(lambda e: (e.ckpt.check_shapes, ({"model.norm.weight": (16,)},), {}), (),
                                    data=("shapes",)),
    "Checkpoint.check_all_read": Case(lambda e: (e.ckpt.check_all_read, (e.config,), {}), ("config",),
                                      skip_good="it follows a model's load from the checkpoint: "
                                                "tests/test_llama_checkpoint.py"),
    "ggml_blocks.stack_rows": Case(lambda e: (ggml_blocks.stack_rows, ([e.qw_host, e.qw_host],), {}), ("weights",)),
    "set_quiet": Case(lambda e: (wg.set_quiet, (False,), {}), (), {"quiet": (BOOL, "a bool")},
                      skip_good="a process-wide switch: tests/test_progress_and_logging.py sets and restores it"),
}

CASES = {f"ops.{k}": v for k, v in OPS.items()} | DEVICE | GRAPHS | MODEL | TOKENS_AND_BLOCKS

# Public callables that are not entry points, with the reason.
NOT_WALKED = {
    "ops.AttentionParams": "a record of checked values: attention() builds it; validate() checks every field "
                           "again where a graph file or Program.update brings one",
    "ops.KernelPlan": "a planner's result, never an argument",
    "ops.BDPACache": "a record: bdpa_decompose(...).upload(dev) builds it",
    "ops.KernelPath": "a record: kernel_path(spec) builds and checks it",
    "Device.check_alive": "runtime plumbing (ops/core.py, the scheduler): no user arguments",
    "Device.check_tensor": "runtime plumbing called with tensors the ops checked",
    "Device.error_flag": "runtime plumbing: the device error flag for kernels",
    "Device.fallback": "runtime plumbing: zero buffers for unused bindings, names and sizes from the ops",
    "Device.run": "runtime plumbing: items an op captured (scheduler/queue.py)",
    "Graph.add": "the builder's and from_json's one path for a Node wgraph made (from_json checks the file's fields)",
    "Graph.add_op": "what ops.core.apply calls for graph values: params an op function checked",
}


CLASSES = {"Device": wg.Device, "Tensor": wg.Tensor, "Graph": wg.Graph, "Program": wg.Program, "Llama": Llama,
           "QuantizedLlama": QuantizedLlama, "Tokenizer": Tokenizer, "QuantizedWeight": QuantizedWeight,
           "DecoderConfig": DecoderConfig, "Checkpoint": Checkpoint, "BatchedDecoder": BatchedDecoder,
           "ops.TieredKVCache": wg.ops.TieredKVCache, "PretrainedFiles": PretrainedFiles}
FUNCTIONS = {"models.from_pretrained": from_pretrained, "models.open_pretrained": open_pretrained,
             "ggml_blocks.quantize": ggml_blocks.quantize,
             "ggml_blocks.stack_rows": ggml_blocks.stack_rows, "set_quiet": wg.set_quiet}


def _public() -> set[str]:
    """Qualified names of the public callables: wg.ops' exports, the functions above, the constructors users
    call, and the public methods of the classes above."""
    names = {f"ops.{n}" for n in wg.ops.__all__} | set(FUNCTIONS) | {"Device", "Graph", "Llama", "QuantizedLlama",
                                                                      "QuantizedWeight", "Checkpoint", "BatchedDecoder"}
    for prefix, cls in CLASSES.items():
        names |= {f"{prefix}.{n}" for n, v in vars(cls).items() if not n.startswith("_") and callable(
            v.__func__ if isinstance(v, (classmethod, staticmethod)) else v)}
    return names


def _callable(name: str):
    if name in FUNCTIONS:
        return FUNCTIONS[name]
    for prefix, cls in sorted(CLASSES.items(), key=lambda kv: -len(kv[0])):
        if name == prefix:
            return cls
        if name.startswith(prefix + "."):
            return getattr(cls, name[len(prefix) + 1:])
    return getattr(wg.ops, name.removeprefix("ops."))


def _params(name: str):
    """The parameters of a public callable (no self)."""
    fn = _callable(name)
    sig = inspect.signature(fn.__init__ if inspect.isclass(fn) else fn)
    return [p for p in sig.parameters.values() if p.name != "self"]


def test_every_public_callable_has_a_case():
    """A new public function or method fails here until it has a case (or a NOT_WALKED reason); every case's
    tensor and valid tables name parameters its signature has."""
    missing = sorted(n for n in _public() if n not in CASES and n not in NOT_WALKED)
    assert not missing, f"public callables without an API-walk case: {missing}"
    stale = sorted(n for n in set(CASES) | set(NOT_WALKED) if n not in _public())
    assert not stale, f"cases of callables that are not public (any more): {stale}"
    for name, case in CASES.items():
        names = {p.name for p in _params(name)} | set(case.options)
        unknown = (set(case.tensors) | set(case.valid) | set(case.data)) - names
        assert not unknown, f"{name}: {sorted(unknown)} are not parameters of its signature {sorted(names)}"


@pytest.fixture(scope="module")
def env(dev, tmp_path_factory):
    return Env(dev, tmp_path_factory.mktemp("walk"))


def _snapshot(env):
    return [t.numpy().tobytes() for t in env.tensors]


def _names(message: str, name: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", message) is not None


def _walk(env, name: str, which: str) -> None:
    """Feed the case's scalar (which="scalar") or tensor parameters their bad values; assert as the module says."""
    case = CASES[name]
    if case.build is None:
        assert not [p for p in _params(name)], f"{name} has parameters: give it a case that calls it"
        return
    fn, args, kwargs = case.build(env)
    sig = inspect.signature(fn)
    if which == "scalar":
        params = [p for p in sig.parameters.values() if p.name not in case.tensors and p.name not in case.data]
        if case.options:   # a **options parameter: each option is walked by its name
            params = [q for p in params for q in ([p] if p.kind is not p.VAR_KEYWORD else
                                                   [inspect.Parameter(o, p.KEYWORD_ONLY) for o in case.options])]
        table = BAD
    else:
        params = [p for p in sig.parameters.values() if p.name in case.tensors]
        table = BAD_TENSORS
    if not params:
        return
    if not case.skip_good:
        bound = sig.bind(*args, **kwargs)
        fn(*bound.args, **bound.kwargs)   # the good call runs: a bad call below fails for its one bad value
        env.dev.sync()
    before = _snapshot(env)
    failures = []
    for p in params:
        if which == "scalar":
            valid = case.valid.get(p.name, (set(), ""))[0]
        else:
            valid = {"None"} if p.default is None else set()   # an absent optional input
        items = list(table.items())
        if which == "scalar":
            items += [(label, value) for label, (value, like) in BAD_LIKE.items() if like is None or like not in valid]
        for label, value in items:
            if label in valid:
                continue
            fn, args, kwargs = case.build(env)
            b = inspect.signature(fn).bind(*args, **kwargs)
            expect = p.name
            if p.name in case.options and p.name not in sig.parameters:   # one of the **options
                var = next(q.name for q in sig.parameters.values() if q.kind is q.VAR_KEYWORD)
                b.arguments[var] = {**b.arguments.get(var, {}), p.name: value}
            elif p.kind is p.VAR_POSITIONAL:
                b.arguments[p.name] = (value,)
            elif p.kind is p.VAR_KEYWORD:
                key = next(iter(b.arguments.get(p.name) or {"x": None}))
                b.arguments[p.name] = {key: value}
                expect = key
            else:
                b.arguments[p.name] = value
            stats, pending = env.dev.stats.snapshot(), len(env.dev.scheduler.pending)
            try:
                fn(*b.args, **b.kwargs)
            except wg.WgraphError as e:
                if not _names(str(e), expect):
                    failures.append(f"{p.name}={label}: the message does not name {expect!r}: {e}")
            except Exception as e:  # noqa: BLE001 - a raw Python error is the failure this test finds
                failures.append(f"{p.name}={label}: {type(e).__name__}: {e}")
            else:
                failures.append(f"{p.name}={label}: accepted (declare it in the case's valid table, with a reason, "
                                f"if it is right)")
            d = env.dev.stats.since(stats)
            if len(env.dev.scheduler.pending) != pending or d.submits or d.dispatches:
                failures.append(f"{p.name}={label}: GPU work before the error")
    assert not failures, f"{name}:\n" + "\n".join(failures)
    assert _snapshot(env) == before, f"{name}: a failing call changed a tensor"


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_scalar_arguments_raise_naming_them(env, name):
    _walk(env, name, "scalar")


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.tensors))
def test_bad_tensor_arguments_raise_naming_them(env, name):
    """None (where the input is required), a float, a string and a numpy array where a Tensor (or an object such
    as a QuantizedKV, a (k, v) pair, a graph Value) goes: a WgraphError naming the parameter, never a raw
    AttributeError or TypeError from inside the op."""
    _walk(env, name, "tensor")


def test_text_options_are_make_requests_keywords():
    """generate_text / stream_text refuse an unknown option by name (text.OPTIONS); the walk feeds each of them:
    the list must be make_request's keyword arguments (less `where`, which the entry point sets)."""
    keywords = [p.name for p in inspect.signature(text.make_request).parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert tuple(k for k in keywords if k != "where") == text.OPTIONS
