"""The argument rules (wgraph/args.py) on values at their edges: every bad value is an ArgumentError naming the
function, the argument and the value, never a raw numpy error or warning, and nothing is converted first."""

import warnings

import numpy as np
import pytest

import wgraph as wg
from wgraph import args
from wgraph.errors import ArgumentError

from kernel_support import QUANT_SCALES, skip_unless_f16


REAL_RULES = [
    lambda v: args.eps("rmsnorm", v),
    lambda v: args.normal_real("attention", "softcap", v, or_zero=True),
    lambda v: args.normal_real("softcap", "cap", v),
    lambda v: args.factor("scale", "factor", v),
    lambda v: args.real("f", "x", v),
    lambda v: args.optional_real("f", "x", v),
]


@pytest.mark.parametrize("rule", REAL_RULES)
@pytest.mark.parametrize("value", [np.array([1e-5, 1e-5]), np.array([0.0, 0.0]), np.timedelta64(1, "D"),
                                   np.timedelta64(5)])
def test_real_rules_refuse_arrays_and_durations(rule, value):
    """eps=np.array([1e-5, 1e-5]) raised numpy's 'truth value of an array ... is ambiguous' ValueError (normal_real
    compared it with 0 before asking whether it is a real); np.timedelta64 (a numpy integer subclass) passed as a
    number or raised numpy's UFuncTypeError."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ArgumentError, match=r"=.* must be "):
            rule(value)


def test_the_most_negative_int64_is_the_number_it_is():
    """scale(x, np.int64(-2**63)) was refused ('must be 0 or a finite real of magnitude in [1.1754944e-38,
    3.4028235e+38]': abs() wrapped it to itself, negative, with numpy's overflow RuntimeWarning) where the Python int
    -2**63, the same number (|x| = 9.2e18, within f32's range), passed; the positive rules refused it with the
    warning, an error under -W error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for rule in (lambda v: args.factor("scale", "factor", v), lambda v: args.real("f", "x", v)):
            assert rule(np.int64(-2**63)) == rule(-2**63) == -9223372036854775808.0
        for rule in REAL_RULES[:3]:
            with pytest.raises(ArgumentError, match=r"=np.int64\(-9223372036854775808\) must be"):
                rule(np.int64(-2**63))


@pytest.mark.parametrize("value", [np.timedelta64(5), np.timedelta64(1, "D")])
def test_integer_rules_refuse_durations(value):
    """np.timedelta64(5) was the integer 5 (numpy makes timedelta64 a signedinteger), np.timedelta64(1, 'D') a raw
    TypeError from int()."""
    for rule in (lambda v: args.integer("f", "x", v), lambda v: args.optional_integer("f", "x", v),
                 lambda v: args.shape("f", "x", (v,)), lambda v: args.ids("f", "x", [v])):
        with pytest.raises(ArgumentError, match="must be"):
            rule(value)


def test_numpy_scalars_within_the_rules_pass_as_python_numbers():
    assert args.factor("scale", "factor", np.int64(-3)) == -3.0 and type(args.factor("s", "f", np.int64(-3))) is float
    assert args.eps("rmsnorm", np.float16(1e-3)) == float(np.float16(1e-3))
    assert args.normal_real("attention", "softcap", np.float32(0.0), or_zero=True) == 0.0
    assert args.integer("f", "x", np.uint64(7)) == 7 and type(args.integer("f", "x", np.uint64(7))) is int


def test_an_eps_array_is_an_argument_error_before_gpu_work(dev):
    x, w = dev.tensor(np.ones((2, 4), np.float32)), dev.tensor(np.ones(4, np.float32))
    before = dev.stats.snapshot()
    with pytest.raises(ArgumentError, match=r"rmsnorm: eps=array\(\[1.e-05, 1.e-05\]\) must be a finite real"):
        wg.ops.rmsnorm(x, w, eps=np.array([1e-5, 1e-5]))
    assert dev.stats.since(before).dispatches == 0


def test_choice_takes_a_str_subclass_by_its_characters_and_returns_the_plain_str():
    """np.str_ (and any str subclass) was refused by choice, which took only type(value) is str. It is compared by
    its characters (str.__str__: a subclass's own __eq__ or __str__ cannot make another value match) and the plain
    str comes back, the value params hold."""
    class Liar(str):
        def __eq__(self, other):
            return True
        __hash__ = str.__hash__

        def __str__(self):
            return "tanh"

    got = args.choice("gelu", "approximate", np.str_("tanh"), ("none", "tanh"))
    assert got == "tanh" and type(got) is str
    with pytest.raises(ArgumentError, match=r"gelu: approximate='erf' must be one of 'none', 'tanh'"):
        args.choice("gelu", "approximate", Liar("erf"), ("none", "tanh"))


def test_text_takes_a_str_subclass_and_keeps_the_plain_str():
    """args.text took only type(value) is str: wg.Graph(np.str_("g")) was refused ('Graph: name=np.str_('g') must
    be a str') where choice takes it. The characters come back as a plain str, the name the graph keeps."""
    class Liar(str):
        def __str__(self):
            return "other"

    g = wg.Graph(np.str_("g"))
    g.input(np.str_("x"), (2,))
    g.state(Liar("s"), (2,))
    assert type(g.name) is str and g.name == "g" and [(type(k), k) for k in (*g.inputs, *g.states)] == [
        (str, "x"), (str, "s")]
    with pytest.raises(ArgumentError, match=r"Graph: name=b'g' must be a str"):
        wg.Graph(b"g")



def _str_entries(dev):
    """The public entry points that take or look up a name, each given the name as `s(name)`: what each returns to
    compare with the plain call (an op's output bytes, a plan, the node or state a lookup found)."""
    rng = np.random.default_rng(0)
    q, k, v = (dev.tensor(rng.standard_normal((3, 2, 32)).astype(np.float32)) for _ in range(3))
    g = wg.Graph("strs")
    x = g.input("x", (4,), "f32")
    g.state("s", (4,), "f32")
    g.output("y", wg.ops.scale(x, 2.0))
    prog = g.compile(dev)
    node = g.topological_order()[-1]
    pages = dev.tensor(np.arange(3, dtype=np.uint32))
    qkv = wg.ops.kv_quantize(k) if dev.caps.has_f16 else None   # QUANT_SCALES: the entry that reads it skips
    return {
        "attention variant": lambda s: wg.ops.attention(
            q, k, v, causal=True, variant=s("prefill_streaming_f32")).numpy().tobytes(),
        "attention kv_layout": lambda s: wg.ops.attention(
            q, k, v, causal=True, kv_layout=s("paged"), page_table=pages, page_size=1).numpy().tobytes(),
        "attention_varlen variant": lambda s: wg.ops.attention_varlen(
            q, k, v, [0, 3], [0, 3], max_seqlen_q=3, max_seqlen_k=3, causal=True,
            variant=s("batched_tiled_d128_f32")).numpy().tobytes(),
        "plan_linear_q fused": lambda s: wg.ops.plan_linear_q(1, 32, 64, "Q8_0", fused=(s("bias"),)),
        "QuantizedKV mode": lambda s: wg.ops.kv_dequantize(
            wg.ops.QuantizedKV(qkv.packed, qkv.scales, s("int8"), 32)).numpy().tobytes(),
        "Graph.node": lambda s: g.node(s(node)),
        "Graph.consumers": lambda s: g.consumers(s("x")),
        "Program.state": lambda s: prog.state(s("s")),
        "Program.reset_state": lambda s: prog.reset_state(s("s")),
        "Program.update": lambda s: (prog.update(s(node), wg.ops.elementwise.ScaleParams(3.0)), prog.params[node]),
    }


@pytest.mark.parametrize("entry", [
    "attention variant", "attention kv_layout", "attention_varlen variant", "plan_linear_q fused", "QuantizedKV mode",
    "Graph.node", "Graph.consumers", "Program.state", "Program.reset_state", "Program.update"])
def test_a_name_given_as_np_str_does_what_the_plain_str_does(dev, entry):
    """Where a name is taken or looked up, np.str_("paged") is the str "paged" (args.plain_str, the rule of choice and
    text): attention's variant and kv_layout, a varlen variant, plan_linear_q's fused names and QuantizedKV's mode
    were refused, and Graph.node / consumers, Program.state / reset_state / update answered 'no such ...'."""
    if entry == "QuantizedKV mode":
        skip_unless_f16(dev, why=QUANT_SCALES)
    call = _str_entries(dev)[entry]
    assert call(np.str_) == call(str)


@pytest.mark.parametrize("spell", [2, 2.0, np.float32(2), -0.0, 0.0, np.float64(-0.0)], ids=repr)
def test_a_scale_factor_is_one_value_however_spelled_and_wherever_given(dev, spell):
    """scale's factor is the float the rule returns, +0.0 for either zero, by a direct call, in a graph and through
    Program.update: update kept ScaleParams(2) an int and ScaleParams(-0.0) gave -0 outputs where scale(x, 0.0) gives
    +0 (np.float32 * -0.0 flips every sign)."""
    canon = float(spell) + 0.0
    host = np.array([1.0, -1.0, 0.0, 3.0], np.float32)
    want = (host * np.float32(canon)).tobytes()   # float64 -> f32 exact here; +0.0 keeps x's signs

    def graph(factor):
        g = wg.Graph("canon")
        g.output("y", wg.ops.scale(g.input("x", (4,), "f32"), factor))
        return g

    assert wg.ops.scale(dev.tensor(host), spell).numpy().tobytes() == want
    assert graph(spell).to_json() == graph(canon).to_json()
    g = graph(5.0)
    prog = g.compile(dev)
    node = g.topological_order()[-1]
    prog.update(node, wg.ops.elementwise.ScaleParams(spell))
    got = prog.params[node]
    assert type(got.factor) is float and repr(got.factor) == repr(canon)
    assert prog.run(x=host)["y"].numpy().tobytes() == want


def test_a_zero_softcap_is_plus_zero_whichever_zero_came_first():
    """softcap=-0.0 (off, as 0.0) was kept: the op's params cache finds -0.0 == 0.0, so after a -0.0 call a graph made
    with 0.0 said "softcap": -0.0 in its JSON (and the other way round)."""
    def graph(cap):
        g = wg.Graph("cap")
        q = g.input("q", (4, 2, 16), "f32")
        g.output("o", wg.ops.attention(q, q, q, causal=True, softcap=cap))
        return g.to_json()

    first = graph(-0.0)
    assert first == graph(0.0) and '"softcap": 0.0' in first and "-0.0" not in first
    assert args.normal_real("f", "cap", -0.0, or_zero=True).hex() == "0x0.0p+0"
    assert args.real("f", "x", -0.0).hex() == args.optional_real("f", "x", np.float32(-0.0)).hex() == "0x0.0p+0"
