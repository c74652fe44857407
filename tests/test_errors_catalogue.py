"""The bad-input catalogue: one test per entry of docs/errors.md, all parametrised from CATALOGUE below (id,
exception, message pattern, call, pre_gpu). A pre-GPU error must leave dev.stats' submits, passes and
dispatches unchanged. Defined behaviours that are not errors (NaN/Inf, empty, zero-length kv) follow."""

import re
import threading
from pathlib import Path

import attrs
import numpy as np
import pytest

import wgraph as wg
from kernel_support import BDPA_BASIS, lacks_subgroups, skip_unless_f16
from wgraph import ggml_blocks
from wgraph.errors import (AliasingError, ArgumentError, DeviceError, DtypeError, LimitError, PlanError, RecordingError,
                           ShapeError, UnsupportedError)
from wgraph.graph import GraphError
from wgraph.ops.bdpa import rope_table
from wgraph.ops.elementwise import BinaryParams
from wgraph.ops.kv_cache import kv_append
from wgraph.ops.tiered import tiered_attention
from wgraph.scheduler.dispatch import Dispatch
from attention_reference import attention_reference, visible_mask

DOC = Path(__file__).resolve().parents[1] / "docs" / "errors.md"


class Env:
    """Tensors the catalogue's calls use; `other` is a second Device (foreign tensors), `fresh()` a new
    device for the device-loss entries."""

    def __init__(self, dev, other):
        self.dev, self.other = dev, other
        self.f32 = lambda *shape: dev.tensor(np.ones(shape, np.float32))
        self.f16 = lambda *shape: dev.tensor(np.ones(shape, np.float16))
        self.u32 = lambda *vals: dev.tensor(np.array(vals, np.uint32))

    def fresh(self):
        return wg.Device()


def attn(e, q=(4, 2, 8), kv=(8, 2, 8), **kw):
    return wg.ops.attention(e.f32(*q), e.f32(*kv), e.f32(*kv), causal=True, **kw)


def _nested(e):
    with e.dev.record():
        with e.dev.record():
            pass


def _recreate_in_recording(e):
    fresh = e.fresh()   # not the session device: a regression would replace it
    with fresh.record(label="step"):
        fresh.recreate()


def _kv_graph():
    g = wg.Graph("kv")
    kv_append((g.state("kc", (8, 2, 8)), g.state("vc", (8, 2, 8))), g.input("k", (3, 2, 8)), g.input("v", (3, 2, 8)), 0)
    return g


def staged(setup):
    """An entry whose setup does GPU work: `setup(env)` returns the call that must fail (measured alone)."""
    setup.staged = True
    return setup


@staged
def _input_is_another_input(e):
    g = wg.Graph("two")
    g.output("d", wg.ops.add(g.input("x", (4,)), g.input("y", (4,))))
    prog = g.compile(e.dev)
    return lambda: prog.run(x=prog.state("y"), y=np.ones(4, np.float32))


@staged
def _append_after_submit(e):
    x = e.f32(4)
    rec = e.dev.record()
    with rec:
        wg.ops.scale(x, 2.0)

    def again():
        with rec:
            wg.ops.scale(x, 2.0)
    return again


@staged
def _submit_twice(e):
    rec = e.dev.record()
    rec.submit()
    return rec.submit


def _read_inside(e):
    x = e.f32(4)
    with e.dev.record():
        y = wg.ops.scale(x, 2.0)
        y.numpy()


def _other_thread(e):
    rec = e.dev.record()
    errors = []

    def use():
        try:
            rec.submit()
        except RecordingError as exc:
            errors.append(exc)
    th = threading.Thread(target=use)
    th.start()
    th.join()
    rec.discard()
    raise errors[0]


@staged
def _profile_unprofiled(e):
    rec = e.dev.record()
    rec.submit()
    return rec.profile


def _graph(dev=None):
    g = wg.Graph("cat")
    x = g.input("x", (4,), "f32")
    g.output("y", wg.ops.scale(x, 2.0))
    return g


@staged
def _program_unusable_state(e):
    """A program whose shared state was made inside a recording that was discarded after the compile."""
    g = wg.Graph("cat")
    g.output("y", wg.ops.scale(g.state("s", (4,)), 2.0))
    try:
        with e.dev.record(label="fill"):
            prog = g.compile(e.dev, shared_states={"s": wg.ops.scale(e.f32(4), 3.0)})
            raise KeyError("discard")
    except KeyError:
        pass
    return prog.run


@staged
def _program_in_recording(e):
    prog = _graph().compile(e.dev)

    def run():
        with e.dev.record():
            prog.run(x=np.ones(4, np.float32))
    return run


def _program(**inputs):
    return staged(lambda e: (lambda prog: lambda: prog.run(**inputs))(_graph().compile(e.dev)))


@staged
def _update_wrong_params(e):
    prog = _graph().compile(e.dev)
    return lambda: prog.update(prog.graph.topological_order()[-1], BinaryParams())


def _u32_program(value):
    def setup(e):
        g = wg.Graph("ids")
        x = g.input("x", (1,), "u32")
        g.output("y", wg.ops.reshape(x, 1))
        prog = g.compile(e.dev)
        return lambda: prog.run(x=value)
    return staged(setup)


def _json_with(edit):
    """A graph file (a state and a scale node) with one field changed by `edit(data)`; from_json of it."""
    def call(e):
        import json

        g = wg.Graph("file")
        g.output("y", wg.ops.scale(g.state("s", (4,), "f32", init=np.ones(4, np.float32)), 2.0))
        data = json.loads(g.to_json())
        edit(data)
        wg.Graph.from_json(json.dumps(data))
    return call


def _set_params_class(data):
    [n for n in data["nodes"] if n["op"] == "scale"][0]["params"]["__attrs__"] = "os:system"


def _short_init(data):
    [n for n in data["nodes"] if n["op"] == "state"][0]["init"] = "AAAAAA=="  # 4 of the state's 16 bytes


def _scale_items_with_y(e, y):
    """dev.run of `scale`'s captured dispatch with its second tensor (binding y, the output) replaced by `y`: the
    first tensor alone was checked (a tensor of another device failed in wgpu at the flush, a poisoned one ran)."""
    with e.dev.record() as rec:
        wg.ops.scale(e.f32(4), 2.0)
        d = rec.items[-1]   # the dispatch (after the write of dev.tensor's data)
    return lambda: e.dev.run([Dispatch(d.kernel, d.uniforms, (d.tensors[0], y, *d.tensors[2:]), d.workgroups,
                                       label="scale")])


def _discarded(e):
    """A tensor whose recording was discarded: poisoned, its bytes never written."""
    try:
        with e.dev.record():
            t = wg.ops.scale(e.f32(4), 3.0)
            raise KeyError("discard")
    except KeyError:
        return t


def _lost(e, what):
    d = e.fresh()
    x = d.tensor(np.ones(4, np.float32))
    prog = _graph().compile(d)
    with d.record() as rec:
        wg.ops.scale(x, 2.0)
        items = list(rec.items)
    d.sync()
    d.destroy()
    if what == "op":
        return d, lambda: wg.ops.scale(x, 2.0)
    if what == "program":
        return d, lambda: prog.run(x=np.ones(4, np.float32))
    d.recreate()
    if what == "old-tensor":
        return d, lambda: wg.ops.scale(x, 2.0)
    if what == "old-items":
        return d, lambda: d.run(items)
    if what == "old-program":
        return d, lambda: prog.run(x=np.ones(4, np.float32))
    raise AssertionError(what)


# id, exception, message (regex), call(env), pre_gpu: the call fails before any GPU work
CATALOGUE = [
    ("q-not-3d", ShapeError, r"q must be \[rows, heads, head_dim\], got \(4, 8\)$", lambda e: attn(e, q=(4, 8)), True),
    ("q-batched", ShapeError, r"attention: q must be \[rows, heads, head_dim\], got \(1, 4, 2, 8\) \(a batch: "
     r"wg.ops.attention_kvcache for q \[B, S, H, D\], wg.ops.sdpa for \[B, H, S, D\], or attention_varlen for "
     r"sequences packed as \[rows, heads, head_dim\]\)$", lambda e: attn(e, q=(1, 4, 2, 8)), True),
    ("causal-missing", wg.WgraphError, r"attention: pass causal=True or causal=False \(there is no default\)",
     lambda e: wg.ops.attention(e.f32(4, 2, 8), e.f32(8, 2, 8), e.f32(8, 2, 8), causal=None), True),
    ("sdpa-mask-and-causal", wg.WgraphError, r"sdpa: pass either attn_mask or is_causal=True, not both",
     lambda e: wg.ops.sdpa(e.f32(1, 2, 4, 8), e.f32(1, 2, 4, 8), e.f32(1, 2, 4, 8), attn_mask=np.ones((4, 4), bool),
                           is_causal=True), True),
    ("sdpa-gqa-off", ShapeError, r"sdpa: query has 4 heads and key 2; pass enable_gqa=True",
     lambda e: wg.ops.sdpa(e.f32(1, 4, 4, 8), e.f32(1, 2, 4, 8), e.f32(1, 2, 4, 8)), True),
    ("kv-shapes-differ", ShapeError, r"k \(8, 2, 8\) and v \(9, 2, 8\) differ",
     lambda e: wg.ops.attention(e.f32(4, 2, 8), e.f32(8, 2, 8), e.f32(9, 2, 8), causal=True), True),
    ("head-dim-mismatch", ShapeError, r"q head_dim 16 != k/v head_dim 8", lambda e: attn(e, q=(4, 2, 16)), True),
    ("zero-heads", ShapeError, r"heads and head_dim must be >= 1", lambda e: attn(e, q=(4, 0, 8), kv=(8, 0, 8)), True),
    ("zero-head-dim", ShapeError, r"heads and head_dim must be >= 1", lambda e: attn(e, q=(4, 2, 0), kv=(8, 2, 0)), True),
    ("gqa-ratio", ShapeError, r"q heads 3 is not a multiple of kv heads 2", lambda e: attn(e, q=(4, 3, 8)), True),
    ("kv-dtypes-differ", DtypeError, r"k is f32 but v is f16",
     lambda e: wg.ops.attention(e.f32(4, 2, 8), e.f32(8, 2, 8), e.f16(8, 2, 8), causal=True), True),
    ("dtype-combination", DtypeError, r"q f16 with k/v f32 is not supported",
     lambda e: wg.ops.attention(e.f16(4, 2, 8), e.f32(8, 2, 8), e.f32(8, 2, 8), causal=True), True),
    ("head-dim-limit", LimitError, r"head_dim 1024 is above every attention kernel's limit",
     lambda e: attn(e, q=(1, 1, 1024), kv=(2, 1, 1024)), True),
    ("bad-layout", ArgumentError, r"attention: kv_layout='tree' must be one of 'contiguous', 'ring', 'paged'",
     lambda e: attn(e, kv_layout="tree"), True),
    ("negative-int-option", ArgumentError, r"attention: kv_start=-1 must be an integer in \[0, 4294967295\]",
     lambda e: attn(e, kv_start=-1), True),
    ("int-argument", ArgumentError, r"seqlens_advance: n=1.7 must be an integer in \[0, 4294967295\]",
     lambda e: wg.ops.seqlens_advance(e.u32(1, 2), 1.7), True),
    ("int-argument-string", ArgumentError, r"seqlens_advance: n='3' must be an integer",
     lambda e: wg.ops.seqlens_advance(e.u32(1, 2), "3"), True),
    ("int-argument-bool", ArgumentError, r"seqlens_advance: n=True must be an integer",
     lambda e: wg.ops.seqlens_advance(e.u32(1, 2), True), True),
    ("bool-argument", ArgumentError, r"attention: causal='yes' must be True or False",
     lambda e: wg.ops.attention(e.f32(4, 2, 8), e.f32(8, 2, 8), e.f32(8, 2, 8), causal="yes"), True),
    ("real-argument", ArgumentError, r"sdpa: scale='0.5' must be a finite real in \[-3.4028235e\+38, 3.4028235e\+38\] or None",
     lambda e: wg.ops.sdpa(e.f32(2, 4, 8), e.f32(2, 4, 8), e.f32(2, 4, 8), attn_mask=np.ones((4, 4), bool),
                           scale="0.5"), True),
    ("window-argument", ArgumentError, r"attention: window=None must be a pair \(left, right\), each -1 \(unbounded\) "
     r"or an integer in \[0, 2147483647\]", lambda e: attn(e, window=None), True),
    ("id-list-argument", ArgumentError, r"embedding: ids=\[3, 1.5\] must be a list \(or nested lists\) of integers",
     lambda e: wg.ops.embedding([3, 1.5], e.f32(10, 4)), True),
    ("bad-softcap", ArgumentError, r"attention: softcap=inf must be 0 \(off\) or a finite real in \[1.1754944e-38, 3.4028235e\+38\]",
     lambda e: attn(e, softcap=float("inf")), True),
    ("bad-scale", ArgumentError, r"attention: scale=nan must be a finite real", lambda e: attn(e, scale=float("nan")),
     True),
    ("softcap-above-f32", ArgumentError, r"softcap=1e\+39 must be 0 \(off\) or a finite real in \[1.1754944e-38, 3.4028235e\+38\]",
     lambda e: attn(e, softcap=1e39), True),
    ("scale-above-f32", ArgumentError, r"scale=-1e\+39 must be a finite real in "
     r"\[-3.4028235e\+38, 3.4028235e\+38\] or None", lambda e: attn(e, scale=-1e39), True),
    ("scale-op-factor", ArgumentError, r"scale: factor=1e\+39 must be 0 or a finite real of magnitude in "
     r"\[1.1754944e-38, 3.4028235e\+38\]", lambda e: wg.ops.scale(e.f32(4), 1e39), True),
    ("linear-option", ArgumentError, r"linear: activation='gelu' must be one of None, 'swiglu'",
     lambda e: wg.ops.linear(e.f32(2, 16), e.f32(6, 16), activation="gelu"), True),
    ("norm-eps", ArgumentError, r"rmsnorm: eps=1e-50 must be a finite real in \[1.1754944e-38, 3.4028235e\+38\]",
     lambda e: wg.ops.rmsnorm(e.f32(2, 4), e.f32(4), eps=1e-50), True),
    ("norm-empty-row", ShapeError, r"rmsnorm: x must be \[\.\.\., dim\] with dim >= 1, got \(2, 0\)",
     lambda e: wg.ops.rmsnorm(e.f32(2, 0), e.f32(0)), True),
    ("rope-kv-position", ArgumentError, r"rope_kv_append: pos=1.0 must be an integer in \[0, 4294967295\] or a u32 GPU tensor",
     lambda e: wg.ops.rope_kv_append(e.f32(2, 32), e.f32(8, 4), e.f32(8, 4), (e.f32(8, 1, 8), e.f32(8, 1, 8)), 1.0,
                                     q_heads=2), True),
    ("block-format", UnsupportedError, r"quantize: ggml_type='TQ1_0' is not a block format wgraph computes on",
     lambda e: ggml_blocks.quantize(np.ones((2, 32), np.float32), "TQ1_0"), True),
    ("quant-blocks-dtype", DtypeError, r"QuantizedWeight: blocks must be u32 words \(a native little-endian uint32 "
     r"numpy array, a u32 Tensor or a graph value\) holding the Q8_0 bytes, got float32",
     lambda e: ggml_blocks.QuantizedWeight("Q8_0", (1, 32), np.zeros(12, np.float32)), True),
    ("quantize-value", ArgumentError, r"quantize: weights\[0, 0:32\] reach \|w\| = 1e\+06, whose Q4_0 block scale is "
     r"past f16's largest, 65504 \(1 blocks\)", lambda e: ggml_blocks.quantize(np.full((1, 32), 1e6, np.float32), "Q4_0"),
     True),
    ("bdpa-value", ArgumentError, r"bdpa_decompose: k\[0, 0, 2\] = 100000 is past f16's largest, 65504",
     lambda e: wg.ops.bdpa_decompose(np.eye(1, 8, 2)[None] * 1e5, np.ones((1, 1, 8)), [0]), True),
    ("run-many-count", ArgumentError, r"Program.run_many: n=-1 must be an integer in \[0, 9223372036854775807\]",
     staged(lambda e: (lambda prog: lambda: prog.run_many(-1))(_graph().compile(e.dev))), True),
    ("query-position-past-u32", LimitError, r"start_pos 4294967294 \+ 4 queries reaches position 4294967297; "
     r"positions are u32 \(at most 4294967295\)", lambda e: attn(e, start_pos=2**32 - 2), True),
    ("kv-position-past-i32", LimitError, r"rows at positions 2147483647..2147483649 \(pos \+ pos_offset \+ row\) pass 2147483647",
     lambda e: kv_append((e.f32(8, 2, 8), e.f32(8, 2, 8)), e.f32(3, 2, 8), e.f32(3, 2, 8), 2**31 - 1,
                         layout="ring"), True),
    ("kv-len-past-2-31", LimitError, r"attention: kv_len 4294967295 is above 2147483648, the most keys the attention "
     r"kernels index", lambda e: attn(e, kv_layout="ring", kv_len=2**32 - 1, sliding_window=4), True),
    ("tiered-kv-len-past-i32", LimitError, r"tiered_attention: kv_len 2147483656 is above 2147483647: the kernels "
     r"place the queries at positions kv_len - S \+ i in i32",
     lambda e: tiered_attention(e.f32(1, 2, 16), e.f16(8, 1, 16), e.f16(8, 1, 16), e.f16(1024, 1, 16),
                                e.f16(1024, 1, 16), kv_len=2**31 + 8, causal=True, page_size=1024,
                                page_table=e.dev.tensor(np.zeros(2**21 + 1, np.uint32)), sliding_window=4), True),
    ("kv-len-above-rows", LimitError, r"kv_len 9 is above the k/v buffer's 8 rows", lambda e: attn(e, kv_len=9), True),
    ("kv-len-tensor-dtype", DtypeError, r"kv_len must be an int or a u32 tensor with one value",
     lambda e: attn(e, kv_len=e.f32(1)), True),
    ("kv-len-tensor-shape", ShapeError, r"kv_len must be an int or a u32 tensor with one value, got u32 \(2,\)",
     lambda e: attn(e, kv_len=e.dev.tensor(np.array([1, 2], np.uint32))), True),
    ("paged-no-table", ShapeError, r"paged layout needs page_table, a 1-D u32 tensor",
     lambda e: attn(e, kv_layout="paged", page_size=4), True),
    ("page-table-short", LimitError, r"page table too short: kv_len 8 needs 2 pages of 4, the table has 1",
     lambda e: attn(e, kv_layout="paged", page_size=4, page_table=e.u32(0), kv_len=8), True),
    ("not-whole-pages", ShapeError, r"k/v rows 8 are not whole pages of page_size 3",
     lambda e: attn(e, kv_layout="paged", page_size=3, page_table=e.u32(0, 1)), True),
    ("table-without-paged", ShapeError, r"page_table given but kv_layout is 'contiguous'",
     lambda e: attn(e, page_table=e.u32(0)), True),
    ("ring-too-short", LimitError, r"ring of 8 rows holds the last 8 of kv_len 20 keys",
     lambda e: attn(e, kv_layout="ring", kv_len=20), True),
    ("unknown-variant", PlanError, r"unknown variant 'fast'", lambda e: attn(e, variant="fast"), True),
    ("variant-wrong-phase", PlanError, r"forced attention variant decode_streaming_f32 does not fit: it is a decode kernel",
     lambda e: attn(e, variant="decode_streaming_f32"), True),
    ("variant-over-limit", LimitError, r"prefill_tiled_large_f32 does not fit: it takes head_dim <= 64; got 128",
     lambda e: attn(e, q=(4, 2, 128), kv=(8, 2, 128), variant="prefill_tiled_large_f32"), True),
    ("out-shape", ShapeError, r"out= has shape \(4, 2, 4\), the op makes \(4, 2, 8\)",
     lambda e: attn(e, out=e.f32(4, 2, 4)), True),
    ("out-dtype", DtypeError, r"out= has dtype f16, the op makes f32", lambda e: attn(e, out=e.f16(4, 2, 8)), True),
    ("aliasing", AliasingError, r"one buffer is bound to out \(read_write\) and to q",
     lambda e: (lambda q: wg.ops.attention(q, e.f32(8, 2, 8), e.f32(8, 2, 8), causal=True, out=q))(e.f32(4, 2, 8)),
     True),
    ("written-then-bound", AliasingError, r"kv_append: v_new and k_cache are one buffer .*which dispatch 0 \(kv_append\) "
     r"writes and dispatch 1 \(kv_append\) binds again",
     lambda e: (lambda c: kv_append((c, e.f32(8, 2, 8)), e.f32(1, 2, 8), c.prefix(1), 0))(e.f32(8, 2, 8)), True),
    ("kv-one-buffer", AliasingError, r"kv_append: the k cache and the v cache are one buffer .*the v rows would "
     r"overwrite the k rows", lambda e: (lambda c: kv_append((c, c), e.f32(3, 2, 8), e.f32(3, 2, 8), 0))(e.f32(8, 2, 8)),
     True),
    ("write-mid-word", ShapeError, r"dev.write into Tensor\(shape=\(1, 3\).*the view ends inside a 4-byte word",
     lambda e: e.dev.write(e.f16(2, 3).prefix(1), np.ones((1, 3), np.float16)), True),
    ("shared-states-one-buffer", AliasingError, r"graph 'kv': shared states 'kc' and 'vc' are one buffer .*nodes "
     r"write both", lambda e: _kv_graph().compile(e.dev, shared_states=dict.fromkeys(("kc", "vc"), e.f32(8, 2, 8))),
     True),
    ("program-input-is-another-input", AliasingError, r"program 'two', input 'x': the tensor given is input 'y''s own "
     r"buffer", _input_is_another_input, True),
    ("foreign-input", DeviceError, r"inputs live on different devices",
     lambda e: wg.ops.attention(e.f32(4, 2, 8), e.f32(8, 2, 8), e.other.tensor(np.ones((8, 2, 8), np.float32)),
                                causal=True), True),
    ("foreign-out", DeviceError, r"out= .* belongs to another device",
     lambda e: attn(e, out=e.other.tensor(np.ones((4, 2, 8), np.float32))), True),
    ("foreign-write", DeviceError, r"belongs to another device",
     lambda e: e.dev.write(e.other.tensor(np.ones(4, np.float32)), np.ones(4, np.float32)), True),
    ("not-a-tensor", ShapeError,
     r"a Tensor \(or a graph value\), got numpy.ndarray; upload host data with dev.tensor",
     lambda e: wg.ops.attention(np.ones((4, 2, 8), np.float32), e.f32(8, 2, 8), e.f32(8, 2, 8), causal=True), True),
    ("missing-input", ShapeError, r"rmsnorm: weight is required, got None",
     lambda e: wg.ops.rmsnorm(e.f32(2, 4), None), True),
    ("out-not-a-tensor", ShapeError, r"scale: out= must be a Tensor \(or a tuple of them\), got float",
     lambda e: wg.ops.scale(e.f32(4), 2.0, out=1.7), True),
    ("not-a-tensor-batched", ShapeError,
     r"attention_varlen: q must be a Tensor \(or a graph value\), got numpy.ndarray",
     lambda e: wg.ops.attention_varlen(np.ones((4, 2, 8), np.float32), e.f32(4, 2, 8), e.f32(4, 2, 8), [0, 4],
                                       [0, 4], max_seqlen_q=4, max_seqlen_k=4, causal=True), True),
    ("numpy-dtype", DtypeError, r"numpy dtype int8 has no wgraph dtype", lambda e: e.dev.tensor(np.ones(4, np.int8)), True),
    ("u32-from-negative", DtypeError, r"-1 is outside u32's range \[0, 4294967295\]",
     lambda e: e.dev.tensor([-1], "u32"), True),
    ("u32-from-fraction", DtypeError, r"7.9 is not an integer; a u32 tensor holds integers",
     lambda e: e.dev.tensor([7.9], "u32"), True),
    ("program-u32-input", DtypeError, r"input 'x': -1 is outside u32's range", _u32_program([-1]), True),
    ("program-u32-fraction", DtypeError, r"input 'x': 7.9 is not an integer", _u32_program([7.9]), True),
    ("bad-power-preference", ArgumentError,
     r"Device: power_preference='fast' must be one of 'high-performance', 'low-power'$",
     lambda e: wg.Device(power_preference="fast"), True),
    ("update-wrong-params", GraphError, r"update\(\): params must be the node's class ScaleParams, got BinaryParams", _update_wrong_params, True),
    ("unknown-dtype", DtypeError, r"dev.empty: dtype='f64' must be one of 'bf16', 'f16', 'f32', 'i32', 'u32' "
     r"\(or numpy's or torch's spelling of one, such as 'bfloat16', torch.bfloat16\); float64: wgraph computes in f32",
     lambda e: e.dev.empty((4,), "f64"), True),
    ("list-without-dtype", DtypeError, r"dev.tensor: a Python list has no dtype of its own \(numpy would make it "
     r"float64, which wgraph lacks\); say which with dtype=, as in dev.tensor\(x, dtype='f32'\)",
     lambda e: e.dev.tensor([1.0, 2.0]), True),
    ("negative-shape", ArgumentError, r"dev.empty: shape=\(4, -1\) must be a shape: a tuple of integers in "
     r"\[0, 4294967295\]", lambda e: e.dev.empty((4, -1)), True),
    ("shape-argument", ArgumentError, r"dev.empty: shape=\(4.0, 2.9\) must be a shape",
     lambda e: e.dev.empty((4.0, 2.9)), True),
    ("shape-string", ArgumentError, r"dev.empty: shape='abc' must be a shape", lambda e: e.dev.empty("abc"), True),
    ("reshape-size", ShapeError, r"Tensor.reshape: cannot view \(4,\) \(4 elements\) as shape=\(3,\)", lambda e: e.f32(4).reshape(3), True),
    ("write-size", ShapeError, r"^dev.write into Tensor\(shape=\(4,\), .*\): data of shape \(5,\) has 5 elements, "
     r"the tensor 4$",
     lambda e: e.dev.write(e.f32(4), np.ones(5, np.float32)), True),
    ("write-layout", ShapeError, r"^dev.write into Tensor\(shape=\(2, 3\), .*\): data of shape \(3, 2\) is laid out "
     r"otherwise; give the tensor's shape \(2, 3\) \(or flat data, data.reshape\(-1\), to fill it in order\)$",
     lambda e: e.dev.write(e.dev.empty((2, 3)), np.ones((3, 2), np.float32)), True),
    ("tensor-too-large", LimitError, r"the device binds at most \d+ bytes per storage buffer",
     lambda e: e.dev.empty((e.dev.caps.max_storage_binding_size // 4 + 1,), "f32"), True),
    ("quantized-kv-mode", ShapeError, r"QuantizedKV: packed int8 data must be u32 \(3, 2, 4\) for rows \(3, 2, 16\) "
     r"\(n, kv_heads, head_dim\), got u32 \(3, 2, 2\)", lambda e: wg.ops.QuantizedKV(e.u32(*[0] * 12).reshape(3, 2, 2), e.f16(3, 2), "int8", 16),
     True),
    ("broadcast-shapes", ShapeError, r"mul: shapes \(2, 4\) and \(2,\) do not broadcast",
     lambda e: wg.ops.mul(e.f32(2, 4), e.f32(2)), True),
    ("elementwise-dtypes", DtypeError, r"add: dtypes f32 and f16 differ \(no implicit casts\)",
     lambda e: wg.ops.add(e.f32(4), e.f16(4)), True),
    ("embedding-id", LimitError, r"embedding: id 10 at index 1 is outside the table's 10 rows",
     lambda e: wg.ops.embedding([3, 10], e.f32(10, 4)), True),
    ("sample-options", ArgumentError, r"sample: top_p=0.0 must be a finite real in \(0, 1\]",
     lambda e: wg.ops.sample(e.f32(1, 8), top_p=0.0), True),
    ("cache-full", LimitError, r"cache full: writing 3 rows at position 6 \(pos \+ pos_offset\) needs 9 rows, the cache holds 8",
     lambda e: kv_append((e.f32(8, 2, 8), e.f32(8, 2, 8)), e.f32(3, 2, 8), e.f32(3, 2, 8), 6), True),
    ("nested-recording", RecordingError, r"a recording is already open on this thread", _nested, True),
    ("recreate-in-recording", RecordingError, r"dev.recreate\(\) inside step, open on this thread: its ops are "
                                              r"recorded for the device \(epoch \d+\) that recreate would replace",
     _recreate_in_recording, True),
    ("use-after-submit", RecordingError, r"recording #\d+ was already submitted", _append_after_submit, True),
    ("submit-twice", RecordingError, r"recording #\d+ was already submitted", _submit_twice, True),
    ("read-inside-recording", RecordingError, r"is written by the open recording", _read_inside, True),
    ("recording-other-thread", RecordingError, r"recording #\d+ belongs to thread \d+, not to thread \d+",
     _other_thread, True),
    ("profile-unprofiled", RecordingError, r"not made with record\(profile=True\)", _profile_unprofiled, True),
    ("program-in-recording", RecordingError, r"run\(\) inside dev.record\(\) is not supported", _program_in_recording, True),
    ("program-missing-input", GraphError, r"missing inputs \['x'\]", _program(), True),
    ("program-input-shape", ShapeError, r"input 'x': expects shape \(4,\), got \(5,\)",
     _program(x=np.ones(5, np.float32)), True),
    ("program-input-dtype", DtypeError, r"input 'x': expects f32 \(float32\), got an array of int32; convert it "
     r"explicitly \(array.astype\(np.float32\)\)", _program(x=np.ones(4, np.int32)), True),
    ("float64-implicit", DtypeError, r"^dev.tensor: got float64 data; wgraph stores f32, f16, bf16, u32 and i32 and "
     r"never narrows silently: convert it explicitly \(dtype='f32' where the call takes dtype=",
     lambda e: e.dev.tensor(np.ones(4)), True),
    ("bool-as-number", DtypeError, r"dev.write into .*: got booleans \(\[1, True\]\); pass numbers, or convert them "
     r"explicitly", lambda e: e.dev.write(e.u32(0, 0), [1, True]), True),
    ("value-has-no-data", GraphError, r"^Value\('x', shape=\(4,\), dtype=f32\) is a value of graph 'g': it has no data "
     r"until a program runs; make it an output", lambda e: wg.Graph("g").input("x", (4,)).numpy(), True),
    ("tensor-as-host-array", DtypeError, r"^Tensor\(shape=\(4,\), dtype=f32, nbytes=16\) lives on the GPU, where numpy "
     r"cannot see it: read it with \.numpy\(\)", lambda e: np.allclose(e.f32(4), 1.0), True),
    ("tensor-truth-value", DtypeError, r"^the truth value \(bool, if, assert, and/or\) of Tensor\(shape=\(4,\), "
     r"dtype=f32, nbytes=16\): its data lives on the GPU", lambda e: bool(e.f32(4)), True),
    ("tensor-operator", DtypeError, r"^the \+ operator on Tensor\(shape=\(4,\), dtype=f32, nbytes=16\): its data lives "
     r"on the GPU, where Python cannot read it; wgraph's math is its ops", lambda e: e.f32(4) + 1.0, True),
    ("tensor-deepcopy-or-pickle", DtypeError, r"^copy.deepcopy of Tensor\(shape=\(4,\), dtype=f32, nbytes=16\): its data "
     r"lives on the GPU, where Python cannot copy it; copy.copy\(t\) is another handle",
     lambda e: __import__("copy").deepcopy(e.f32(4)), True),
    ("value-truth-value", GraphError, r"^the truth value \(bool, if, assert, and/or\) of Value\('x', shape=\(4,\), "
     r"dtype=f32\) is a value of graph 'g': it has no data", lambda e: bool(wg.Graph("g").input("x", (4,))), True),
    ("not-an-array", DtypeError, r"dev.tensor: cannot view object as a numpy array", lambda e: e.dev.tensor(object()),
     True),
    ("f16-overflow", DtypeError, r"dev.tensor: 1000000.0 is outside f16's range \+-65504",
     lambda e: e.dev.tensor(np.array([1e6], np.float32), "f16"), True),
    ("complex-data", DtypeError, r"dev.tensor: f32 data cannot come from an array of complex128",
     lambda e: e.dev.tensor(np.array([1 + 2j]), "f32"), True),
    ("inexact-integer", DtypeError, r"dev.tensor: -1 is outside u32's range \[0, 4294967295\]",
     lambda e: e.dev.tensor(np.array([-1]), dtype="u32"), True),
    ("json-foreign-class", GraphError, r"from_json: 'os:system' is not one of wgraph's op param classes",
     _json_with(_set_params_class), True),
    ("json-short-init", GraphError, r"state 's' is \(4,\) f32 \(16 bytes\); its init holds 4 bytes",
     _json_with(_short_init), True),
    ("json-not-json", GraphError, r"from_json: text is not a JSON document", lambda e: wg.Graph.from_json("{nodes: ["), True),
    ("json-not-object", GraphError, r"from_json: text holds a JSON list; a graph file is a JSON object",
     lambda e: wg.Graph.from_json("[1, 2]"), True),
    ("json-missing-field", GraphError, r"from_json: the 'nodes' field is missing", _json_with(lambda d: d.pop("nodes")),
     True),
    ("json-bad-name", GraphError, r"from_json: name=\{'a': 1\} must be a str", _json_with(lambda d: d.update(name={"a": 1})),
     True),
    ("json-bad-shape", ArgumentError, r"from_json: node 's': shape='abcd' must be a shape",
     _json_with(lambda d: d["nodes"][0].update(shape="abcd")), True),
    ("json-bad-number", ArgumentError, r"node 'scale_1' \(scale\): scale: factor='abc' must be 0 or a finite real",
     _json_with(lambda d: [n for n in d["nodes"] if n["op"] == "scale"][0]["params"]["fields"].update(factor="abc")),
     True),
    ("json-unknown-output", GraphError, r"from_json: output 'y' names value 'ghost', which the graph does not have",
     _json_with(lambda d: d["outputs"].update(y="ghost")), True),
    ("graph-name", ArgumentError, r"Graph: name=\{'a': 1\} must be a str", lambda e: wg.Graph({"a": 1}), True),
    ("unknown-state", GraphError, r"program 'cat': reset_state\(name='ghost'\): no such state",
     staged(lambda e: (lambda prog: lambda: prog.reset_state("ghost"))(_graph().compile(e.dev))), True),
    ("unknown-node", GraphError, r"program 'cat': update\(node_name='ghost'\): no such node",
     staged(lambda e: (lambda prog: lambda: prog.update("ghost", BinaryParams()))(_graph().compile(e.dev))), True),
    # device loss: the call is made on a fresh device that the entry destroys (and maybe re-creates)
    ("op-after-destroy", DeviceError, r"is lost or destroyed; call dev.recreate\(\)", "op", True),
    ("replay-after-loss", DeviceError, r"program 'cat' was compiled for .* epoch \d+; the device is now lost",
     "program", True),
    ("tensor-of-old-epoch", DeviceError, r"was made before the device was re-created", "old-tensor", True),
    ("dispatches-of-old-epoch", DeviceError, r"a captured item of another device or of epoch \d+", "old-items", True),
    ("run-foreign-tensor", DeviceError, r"^dev\.run: items\[0\] \(scale\), y: Tensor\(shape=\(4,\), dtype=f32, "
     r"nbytes=16\) belongs to another device \('.*', epoch \d+; this one is epoch \d+\)",
     staged(lambda e: _scale_items_with_y(e, e.other.tensor(np.ones(4, np.float32)))), True),
    ("run-unusable-tensor", RecordingError, r"^dev\.run: items\[0\] \(scale\), y: Tensor 'scale\.out0'.*: this "
     r"tensor was made inside recording #\d+ .* which was discarded", staged(lambda e: _scale_items_with_y(e, _discarded(e))),
     True),
    ("program-unusable-state", RecordingError, r"^program 'cat': shared state 's' \(Tensor 'scale\.out0'.*\) is "
     r"unusable: this tensor was made inside fill .*which was discarded", _program_unusable_state, True),
    ("program-of-old-epoch", DeviceError, r"the device is now epoch \d+: compile the graph again", "old-program", True),
]

# Entries whose call makes an f16 tensor (the error is about f16 data, the tiered cache's f16 hot ring, a quantized
# cache's f16 scales): on a device without shader-f16 that tensor is refused first, so they skip there.
NEEDS_F16 = {"kv-dtypes-differ", "dtype-combination", "tiered-kv-len-past-i32", "out-dtype", "write-mid-word",
             "quantized-kv-mode", "elementwise-dtypes"}


@pytest.fixture(scope="module")
def env(dev):
    return Env(dev, wg.Device())


def _work(stats):
    return stats.submits, stats.compute_passes, stats.dispatches


@pytest.mark.parametrize("entry", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_catalogue_entry(env, entry):
    name, exc, message, call, pre_gpu = entry
    if name in NEEDS_F16:
        skip_unless_f16(env.dev)
    if isinstance(call, str):
        device, fn = _lost(env, call)
    elif getattr(call, "staged", False):
        device, fn = env.dev, call(env)
    else:
        device, fn = env.dev, lambda: call(env)
    # Items an earlier test left pending, or buffers waiting for deferred destruction past its budget, would make
    # the call's own uploads submit (a flush, a wait for the GPU): both are cleared first.
    if not device.lost:
        device.scheduler.wait_idle()
    before = _work(device.stats), _work(env.other.stats)
    with pytest.raises(exc) as info:
        fn()
    assert re.search(message, str(info.value)), f"{name}: {info.value}"
    assert isinstance(info.value, wg.WgraphError)
    if pre_gpu:
        assert (_work(device.stats), _work(env.other.stats)) == before, f"{name}: GPU work before the error"


def test_every_entry_is_documented():
    text = DOC.read_text()
    missing = [c[0] for c in CATALOGUE if f"`{c[0]}`" not in text]
    assert not missing, f"docs/errors.md lacks {missing}"
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", text, re.M))
    assert documented == {c[0] for c in CATALOGUE} | set(BEHAVIOURS), documented ^ ({c[0] for c in CATALOGUE} | set(BEHAVIOURS))


# ---- defined behaviours (docs/errors.md, second table) ----

BEHAVIOURS = ("no-queries", "zero-length-kv", "nan-propagates", "inf-propagates", "fully-masked-row",
              # tested where their op is (docs/errors.md names each test)
              "sdpa-nan-as-torch", "sample-nan-row", "elementwise-nonfinite", "batched-huge-window", "failing-call-leaves-buffers",
              "quant-nonfinite-scale", "norm-square-overflow")
# prefill_flash_d64 stands for the GPU prefill kernels (one file, one code path); its larger head-dim classes
# compile for tens of seconds cold on lavapipe.
PREFILL = ("prefill_tiled_large_f32", "prefill_tiled_small_f16kv", "prefill_streaming_f16", "prefill_flash_d64_f32",
           "prefill_gemm_d64_f16")
DECODE = ("decode_streaming_f32", "decode_subgroup_f16kv", "decode_chunked_f32", "decode_chunked_f16", "decode_splitk_g4_f32",
          "decode_splitk_g8_f16", "decode_fused_g4_f16", "decode_fused_g8_f32", "decode_single_f32",
          "decode_single_f16")


def _qkv(rng, dtype, S, L, hq=4, hkv=2, d=16):
    qdt = np.float16 if dtype == "f16" else np.float32
    kdt = np.float32 if dtype == "f32" else np.float16
    return (rng.standard_normal((S, hq, d)).astype(qdt), rng.standard_normal((L, hkv, d)).astype(kdt),
            rng.standard_normal((L, hkv, d)).astype(kdt))


def test_no_queries_gives_an_empty_output_without_gpu_work(dev):
    q, k = dev.tensor(np.zeros((0, 2, 8), np.float32)), dev.tensor(np.ones((5, 2, 8), np.float32))
    before = _work(dev.stats)
    out = wg.ops.attention(q, k, k, causal=True)
    assert _work(dev.stats) == before
    assert out.shape == (0, 2, 8) and out.numpy().shape == (0, 2, 8)


@pytest.mark.parametrize("variant", PREFILL + DECODE)
def test_zero_length_kv_gives_zeros(dev, rng, variant):
    if lacks_subgroups(dev, variant):
        pytest.skip("no subgroups")
    dtype = variant.rsplit("_", 1)[1]
    skip_unless_f16(dev, dtype)
    S = 1 if variant.startswith("decode") else 5
    q, k, v = _qkv(rng, dtype, S, 6)
    Q, K, V = dev.tensor(q), dev.tensor(k), dev.tensor(v)
    empty = dev.tensor(np.zeros((0, 2, 16), k.dtype))
    for kw in (dict(kv_len=0), dict(kv_len=dev.tensor(np.array([0], np.uint32)))):
        got = wg.ops.attention(Q, K, V, causal=True, variant=variant, **kw).numpy()
        assert not got.any() and np.isfinite(got).all(), (variant, kw)
    got = wg.ops.attention(Q, empty, empty, causal=True, variant=variant).numpy()   # a k/v with no rows at all
    assert got.shape == q.shape and not got.any()


@pytest.mark.parametrize("variant", PREFILL + DECODE)
@pytest.mark.parametrize("where", ["q", "k", "v"])
@pytest.mark.parametrize("softcap", [0.0, 30.0])
def test_nan_propagates_to_the_rows_that_see_it_only(dev, rng, variant, where, softcap):
    """NaN in q[i, h] -> out[i, h] NaN; NaN in k/v row j, kv head g -> NaN exactly in the (query, q head)
    rows that see key j through head g (causal mask, GQA); every other row matches the reference. With a
    softcap too: tanh_safe clamped a NaN score to +-15 on lavapipe, so the NaN of q or k was dropped. The lse
    of a row whose scores hold the NaN (q, k) is NaN, the others finite: decode_subgroup's merge skipped a
    subgroup whose l was NaN (`l > 0` is false) and gave a finite lse, or -inf (every subgroup saw it)."""
    if lacks_subgroups(dev, variant):
        pytest.skip("no subgroups")
    dtype = variant.rsplit("_", 1)[1]
    skip_unless_f16(dev, dtype)
    S, L = (1, 300) if variant.startswith("decode") else (6, 40)
    q, k, v = _qkv(rng, dtype, S, L)
    a = {"q": q, "k": k, "v": v}
    j = L - 2 if S > 1 else 5
    if where == "q":
        a["q"][S - 1, 1, 3] = np.nan
        affected = np.zeros((S, 4), bool)
        affected[S - 1, 1] = True
    else:
        a[where][j, 0, 3] = np.nan          # kv head 0 serves q heads 0, 1
        affected = visible_mask(S, L)[:, j][:, None] & (np.arange(4) < 2)[None, :]
    got, lse = wg.ops.attention(*(dev.tensor(a[n]) for n in "qkv"), causal=True, variant=variant, softcap=softcap,
                                return_lse=True)
    got = got.numpy().astype(np.float64)
    row_nan = np.isnan(got).any(axis=2)
    np.testing.assert_array_equal(row_nan, affected)
    lse = lse.numpy().T                     # [Hq, S] -> [S, Hq]
    np.testing.assert_array_equal(np.isnan(lse), affected if where != "v" else np.zeros_like(affected))
    assert np.isfinite(lse[~np.isnan(lse)]).all()
    # a NaN score spoils the whole row; a NaN in v[j, g, 3] only output dim 3 of the rows that see it
    nan_elems = np.zeros(got.shape, bool)
    nan_elems[affected] = True
    if where == "v":
        nan_elems[..., np.arange(16) != 3] = False
    np.testing.assert_array_equal(np.isnan(got), nan_elems)
    clean = {n: np.nan_to_num(a[n]) for n in "qkv"}
    want = attention_reference(clean["q"], clean["k"], clean["v"], softcap=softcap)
    tol = 2e-2 if dtype != "f32" else 1e-4
    np.testing.assert_allclose(got[~nan_elems], want[~nan_elems], atol=tol, rtol=0)


@pytest.mark.parametrize("variant", ("prefill_tiled_small_f32", "prefill_streaming_f32", "prefill_gemm_d64_f32",
                                     "decode_streaming_f32",
                                     "decode_chunked_f32", "decode_fused_g4_f32", "decode_single_f32"))
def test_inf_in_v_makes_the_rows_that_see_it_non_finite(dev, rng, variant):
    S, L = (1, 300) if variant.startswith("decode") else (6, 40)
    q, k, v = _qkv(rng, "f32", S, L)
    j = L - 2 if S > 1 else 5
    v[j, 1, 0] = np.inf                     # kv head 1 serves q heads 2, 3
    got = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), causal=True, variant=variant).numpy()
    affected = visible_mask(S, L)[:, j][:, None] & (np.arange(4) >= 2)[None, :]
    assert not np.isfinite(got[affected][..., 0]).any()
    assert np.isfinite(got[~affected]).all()
    want = attention_reference(q, k, np.where(np.isinf(v), 0, v))   # numpy's 0 * inf would spoil masked rows
    np.testing.assert_allclose(got[~affected], want[~affected], atol=1e-4, rtol=0)


def test_fully_masked_row_is_zero_not_nan(dev, rng):
    q, k, v = _qkv(rng, "f32", 5, 9)
    got = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), causal=True, start_pos=0, kv_start=100).numpy()
    assert np.isfinite(got).all() and not got.any()


def test_softcap_below_f32s_smallest_normal_is_refused(dev, rng):
    """A softcap of 1e-50 is 0 in the f32 uniform: a score of 0 became 0 / 0 and its row NaN (a zero q row gave
    NaN where float64 gives the mean of v). Every attention entry point refuses it, as ops.softcap its cap."""
    q, k, v = (dev.tensor(a) for a in _qkv(rng, "f32", 1, 4))
    pattern = r"softcap=1e-50 must be 0 \(off\) or a finite real in \[1.1754944e-38, 3.4028235e\+38\]"
    with pytest.raises(ArgumentError, match="attention: " + pattern):
        wg.ops.attention(q, k, v, causal=True, softcap=1e-50)
    with pytest.raises(ArgumentError, match="attention_varlen: " + pattern):
        wg.ops.attention_varlen(q, k, v, [0, 1], [0, 4], max_seqlen_q=1, max_seqlen_k=4, causal=True, softcap=1e-50)
    with pytest.raises(ArgumentError, match="softcap: cap=1e-50 must be a finite real in"):
        wg.ops.softcap(q, 1e-50)
    tiny = float(np.finfo(np.float32).tiny)   # the smallest accepted: every score capped to about 0
    got = wg.ops.attention(dev.tensor(np.zeros((1, 4, 16), np.float32)), k, v, causal=True, softcap=tiny).numpy()
    np.testing.assert_allclose(got, np.broadcast_to(np.repeat(v.numpy().mean(0), 2, axis=0), got.shape), atol=1e-6)


def test_u32_index_tensors_of_another_dtype_are_dtype_errors(dev):
    """A GPU position, length, step or table given as f32 (or bf16) raised ShapeError at these sites, where every
    other tensor argument's wrong dtype is a DtypeError; now a DtypeError, and a u32 of the wrong shape stays a
    ShapeError. No dispatch runs for a refused call."""
    f32 = lambda *s: dev.tensor(np.zeros(s, np.float32))  # noqa: E731
    u32 = lambda *s: dev.tensor(np.zeros(s, np.uint32))  # noqa: E731
    x, tab = f32(2, 1, 8), f32(16, 4)
    cache = (f32(8, 1, 8), f32(8, 1, 8))
    k_new = f32(1, 1, 8)
    calls = {
        "rope pos": lambda t: wg.ops.rope(x, tab, tab, pos=t),
        "kv_append pos": lambda t: wg.ops.kv_append(cache, k_new, k_new, t),
        "kv_append page_table": lambda t: wg.ops.kv_append(cache, k_new, k_new, 0, layout="paged", page_table=t,
                                                           page_size=4),
        "attention page_table": lambda t: wg.ops.attention(f32(1, 1, 8), *cache, causal=True, kv_layout="paged",
                                                           page_table=t, page_size=4),
        "seqlens_advance": lambda t: wg.ops.seqlens_advance(t),
        "sample step": lambda t: wg.ops.sample(f32(1, 16), temperature=1.0, step=t),
    }
    good_shape = {"rope pos": (1,), "kv_append pos": (1,), "kv_append page_table": (2,),
                  "attention page_table": (2,), "seqlens_advance": (2,), "sample step": (1,)}
    bad_shape = {"rope pos": (2,), "kv_append pos": (2,), "kv_append page_table": (2, 1),
                 "attention page_table": (2, 1), "seqlens_advance": (2, 1), "sample step": (2,)}
    dev.flush()
    before = dev.stats.snapshot()
    for name, call in calls.items():
        with pytest.raises(DtypeError, match="u32"):
            call(f32(*good_shape[name]))
        with pytest.raises(ShapeError) as e:
            call(u32(*bad_shape[name]))
        assert not isinstance(e.value, DtypeError), name
    assert dev.stats.since(before).dispatches == 0


def test_float_tensor_arguments_of_another_dtype_are_dtype_errors(dev, rng):
    """bdpa_attention's f16 basis and residual_scale and its f32 RoPE table of another dtype raised ShapeError (one
    check of dtype and shape, as the u32 sites above did); now a DtypeError with the same message, and the right
    dtype of the wrong shape stays a ShapeError. No dispatch runs for a refused call."""
    skip_unless_f16(dev, why=BDPA_BASIS)
    L, hkv, D = 8, 2, 16
    cache = wg.ops.bdpa_decompose(rng.standard_normal((L, hkv, D)), rng.standard_normal((L, hkv, D)),
                                  np.arange(L) % 3).upload(dev)
    rope = dev.tensor(rope_table(*wg.ops.rope_tables(32, D)))
    q = dev.tensor(np.zeros((1, 2 * hkv, D), np.float32))
    calls = {
        "basis": lambda t: wg.ops.bdpa_attention(q, attrs.evolve(cache, basis=t), rope, causal=True, q_pos=0),
        "residual_scale": lambda t: wg.ops.bdpa_attention(q, attrs.evolve(cache, residual_scale=t), rope,
                                                          causal=True, q_pos=0),
        "rope": lambda t: wg.ops.bdpa_attention(q, cache, t, causal=True, q_pos=0),
    }
    given = {"basis": cache.basis, "residual_scale": cache.residual_scale, "rope": rope}
    dev.flush()
    before = dev.stats.snapshot()
    for name, call in calls.items():
        host, dtype = given[name].numpy(), given[name].dtype
        other = np.float32 if dtype == "f16" else np.float16
        with pytest.raises(DtypeError, match=rf"bdpa_attention: {name} must be {dtype} "):
            call(dev.tensor(host.astype(other)))
        with pytest.raises(ShapeError, match=rf"bdpa_attention: {name} must be {dtype} ") as e:
            call(dev.tensor(np.ascontiguousarray(host[:, :1])))   # the right dtype, a dimension cut to 1
        assert not isinstance(e.value, DtypeError), name
    assert dev.stats.since(before).dispatches == 0
