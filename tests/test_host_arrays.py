"""Host data in (wgraph/host_arrays.py): array-likes accepted by dev.tensor, dev.write and Program.run alike;
conversions only with dtype=; float64 raises the same error in all three; 0-d stays 0-d."""

import array
import re
import warnings

import numpy as np
import pytest

import wgraph as wg
from wgraph.host_arrays import FLOAT64


class ArrayLike:
    """Something with __array__ only (not an ndarray, no buffer protocol)."""

    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a


def _program(dev, shape, dtype="f32"):
    g = wg.Graph("feed")
    x = g.input("x", shape, dtype)
    g.output("y", wg.ops.scale(x, 2.0) if dtype == "f32" else x)
    return g.compile(dev)


def test_array_likes_are_accepted_everywhere(dev):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    prog = _program(dev, (2, 3))
    for value in (memoryview(a), ArrayLike(a), a.T.copy().T):  # a buffer, __array__, a Fortran-order array
        np.testing.assert_array_equal(dev.tensor(value).numpy(), a)
        t = dev.empty((2, 3), "f32")
        dev.write(t, value)
        np.testing.assert_array_equal(t.numpy(), a)
        np.testing.assert_array_equal(prog.run(x=value)["y"].numpy(), 2 * a)
    flat = array.array("f", [1.5, -2.0, 3.25])  # the buffer protocol of the standard library
    np.testing.assert_array_equal(dev.tensor(flat).numpy(), np.array([1.5, -2.0, 3.25], np.float32))
    np.testing.assert_array_equal(dev.tensor(memoryview(np.arange(4, dtype=np.uint32))).numpy(), np.arange(4))


def test_torch_cpu_tensors_are_accepted(dev):
    torch = pytest.importorskip("torch", reason="torch is an optional test dependency")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4
    want = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    np.testing.assert_array_equal(dev.tensor(x).numpy(), want)
    np.testing.assert_array_equal(dev.tensor(x.half()).numpy(), want.astype(np.float16))
    t = dev.empty((2, 3), "f32")
    dev.write(t, x.T.contiguous().T)  # a strided torch view
    np.testing.assert_array_equal(t.numpy(), want)
    np.testing.assert_array_equal(_program(dev, (2, 3)).run(x=x)["y"].numpy(), 2 * want)
    np.testing.assert_array_equal(dev.tensor(x.double(), dtype="f32").numpy(), want)
    with pytest.raises(wg.ShapeError, match=r"scale: x must be a Tensor \(or a graph value\), got torch.Tensor; "
                                            r"upload host data with dev.tensor"):
        wg.ops.scale(x, 2.0)  # ops take wgraph Tensors: the message says which Tensor it got
    with pytest.raises(wg.ShapeError, match=r"sdpa: query must be a Tensor \(or a graph value\), got torch.Tensor"):
        wg.ops.sdpa(x, x, x)
    g = wg.Graph("torch_const")
    g.output("y", wg.ops.scale(g.const("w", x), 2.0))
    np.testing.assert_array_equal(g.compile(dev).run()["y"].numpy(), 2 * want)
    with pytest.raises(wg.DtypeError, match=r"dev.tensor: cannot view Tensor as a numpy array \(Got unsupported "
                                            r"ScalarType BFloat16\)"):
        dev.tensor(x.bfloat16())
    with pytest.raises(wg.DtypeError, match=r"float64"):
        dev.tensor(x.double())


def test_float64_without_dtype_raises_the_same_error_everywhere(dev):
    a64 = np.ones((2, 3))
    t = dev.empty((2, 3), "f32")
    prog = _program(dev, (2, 3))
    before = dev.stats.snapshot()
    messages = {}
    for name, call in (("dev.tensor", lambda: dev.tensor(a64)), ("dev.write", lambda: dev.write(t, a64)),
                       ("prog.run", lambda: prog.run(x=a64)),
                       ("g.const", lambda: wg.Graph("c").const("w", a64)),
                       ("g.state", lambda: wg.Graph("s").state("w", (2, 3), "f32", init=a64))):
        with pytest.raises(wg.DtypeError) as info:
            call()
        messages[name] = str(info.value)
    for name, message in messages.items():  # "<where>: " + the one message
        assert message.endswith(": " + FLOAT64), (name, message)
    assert re.search(r"convert it explicitly \(dtype='f32' where the call takes dtype=, or "
                     r"array.astype\(np.float32\)\)", FLOAT64)
    d = dev.stats.since(before)
    assert (d.submits, d.dispatches) == (0, 0)
    # explicit: dtype= converts (rounded as numpy rounds)
    x = np.array([0.1, 1 / 3, 1e-8])
    np.testing.assert_array_equal(dev.tensor(x, dtype="f32").numpy(), x.astype(np.float32))
    if dev.caps.has_f16:   # an f16 tensor needs shader-f16
        np.testing.assert_array_equal(dev.tensor(x, dtype="f16").numpy(), x.astype(np.float16))


def test_float64_into_a_tensor_of_another_dtype_names_that_dtype(dev):
    """float64 data for a u32, i32, f16 or bf16 tensor or input: the error names the dtype it needs. It said to
    convert to float32, which is refused next ("expects u32 (uint32), got an array of float32")."""
    a64 = np.ones(2)
    prog = _program(dev, (2,), "u32")
    for dtype, how in (("u32", r"array.astype\(np.uint32\)"), ("i32", r"array.astype\(np.int32\)"),
                       ("f16", r"array.astype\(np.float16\)"), ("bf16", r"wgraph.dtypes.to_bf16\(array\)")):
        with pytest.raises(wg.DtypeError, match=rf"dev.write into .*: expects {dtype} \(.*\), got an array of "
                                                 rf"float64; convert it explicitly \({how}\)$"):
            dev.write(dev.empty((2,), dtype), a64)
    with pytest.raises(wg.DtypeError, match=r"program 'feed', input 'x': expects u32 \(uint32\), got an array of float64"):
        prog.run(x=a64)


def test_integer_conversions_are_exact_or_raise(dev):
    np.testing.assert_array_equal(dev.tensor(np.array([0, 7, 2**32 - 1]), dtype="u32").numpy(), [0, 7, 2**32 - 1])
    with pytest.raises(wg.DtypeError, match=r"4294967296 is outside u32's range \[0, 4294967295\]"):
        dev.tensor(np.array([2**32]), dtype="u32")
    with pytest.raises(wg.DtypeError, match=r"1.5 is not an integer; a i32 tensor holds integers"):
        dev.tensor(np.array([1.5]), dtype="i32")
    t = dev.empty((2,), "u32")
    dev.write(t, [3, 4])  # Python numbers have no dtype: they take the tensor's, checked
    np.testing.assert_array_equal(t.numpy(), [3, 4])
    with pytest.raises(wg.DtypeError, match=r"-4 is outside u32's range"):
        dev.write(t, [3, -4])
    with pytest.raises(wg.DtypeError, match=r"expects u32 \(uint32\), got an array of int64"):
        dev.write(t, np.array([3, 4]))


def test_zero_d_stays_zero_d(dev):
    t = dev.tensor(np.float32(2.5))
    assert t.shape == () and t.numpy().shape == () and t.numpy() == np.float32(2.5)
    u = dev.tensor(np.array(7, np.uint32))
    assert u.shape == () and u.numpy() == 7
    dev.write(t, np.array(-1.0, np.float32))
    assert t.numpy() == -1.0
    prog = _program(dev, ())
    assert prog.run(x=np.float32(3.0))["y"].numpy().shape == ()
    assert prog.run(x=np.float32(3.0))["y"].numpy() == 6.0
    one = _program(dev, (1,))
    np.testing.assert_array_equal(one.run(x=np.float32(4.0))["y"].numpy(), [8.0])  # a scalar fills 1 element
    with pytest.raises(wg.ShapeError, match=r"input 'x': expects shape \(2, 3\), got \(\)"):
        _program(dev, (2, 3)).run(x=np.float32(1.0))


def test_objects_numpy_cannot_view_raise(dev):
    with pytest.raises(wg.DtypeError, match=r"dev.tensor: cannot view dict as a numpy array"):
        dev.tensor({"a": 1})
    with pytest.raises(wg.DtypeError, match=r"numpy dtype uint8 has no wgraph dtype"):
        dev.tensor(memoryview(b"abcd"))


def test_big_endian_data_is_named_and_converts_when_asked(dev):
    """A big-endian array was refused with numpy's dtype reprs as the list of what wgraph stores; it says what
    it is and how to convert it now, and dtype= converts it to the right values (byte-swapped, not reinterpreted)."""
    big = np.array([[1.5, -2.0, 3.25]], dtype=">f4")
    with pytest.raises(wg.DtypeError, match=r"numpy dtype >f4 is big-endian; wgraph stores little-endian data"):
        dev.tensor(big)
    np.testing.assert_array_equal(dev.tensor(big, "f32").numpy(), [[1.5, -2.0, 3.25]])
    np.testing.assert_array_equal(dev.tensor(np.array([7, -8], ">i4"), "i32").numpy(), [7, -8])
    with pytest.raises(wg.DtypeError, match=r"wgraph stores f32 \(float32\), f16 \(float16\), bf16"):
        dev.tensor(np.ones(4, np.int8))


def test_float_conversions_never_overflow_or_drop_parts_silently(dev):
    """dev.tensor(np.array([1e6], np.float32), "f16") gave inf with no error (the checkpoint loader refuses the
    same); complex data to "f32" dropped the imaginary part; strings became numbers. Each raises naming the value,
    wherever host data is converted (dev.tensor with dtype=, g.const with dtype=)."""
    with pytest.raises(wg.DtypeError, match=r"dev.tensor: 1000000.0 is outside f16's range \+-65504"):
        dev.tensor(np.array([1.0, 1e6], np.float32), "f16")
    with pytest.raises(wg.DtypeError, match=r"dev.tensor: -70000.0 is outside f16's range"):
        dev.tensor([-70000.0], "f16")
    with pytest.raises(wg.DtypeError, match=r"const 'w': 1e\+39 is outside f32's range \+-3.4028235e\+38"):
        wg.Graph("g").const("w", np.array([1e39]), "f32")
    with pytest.raises(wg.DtypeError, match=r"f32 data cannot come from an array of complex128"):
        dev.tensor(np.array([1 + 2j]), "f32")
    with pytest.raises(wg.DtypeError, match=r"f32 data cannot come from an array of <U3"):
        dev.tensor(np.array(["1.5"]), "f32")
    # what is in range converts as numpy rounds; inf and NaN were inf and NaN before and stay so (where the device
    # has shader-f16: an f16 tensor needs it; the range checks above come first, on any device)
    if dev.caps.has_f16:
        got = dev.tensor(np.array([65504.0, np.inf, -np.inf, np.nan, 1e-9]), "f16").numpy()
        np.testing.assert_array_equal(got, np.array([65504.0, np.inf, -np.inf, np.nan, 1e-9]).astype(np.float16))


@pytest.mark.parametrize("shape", [(4.0, 2.9), (4, 2.0), "abc", (True, 2), 5, None, (2**32,), np.array([2, 2])])
def test_shapes_are_integers_never_truncated(dev, shape):
    """dev.empty((4.0, 2.9)) made a (4, 2) tensor; dev.empty("abc") raised a raw ValueError. Shapes are tuples
    (or lists) of integers, here, in g.input / g.state and in Tensor.reshape."""
    with pytest.raises(wg.ArgumentError, match=r"dev.empty: shape=.* must be a shape: a tuple of integers"):
        dev.empty(shape)
    with pytest.raises(wg.ArgumentError, match=r"Graph.input: shape=.* must be a shape"):
        wg.Graph("g").input("x", shape)
    assert dev.empty((np.int64(4), 2)).shape == (4, 2) and dev.empty([3]).shape == (3,)


def test_booleans_are_not_numbers_unless_asked(dev):
    """True is not silently the number 1 where the call takes numbers (Python bools, lists holding one, bool
    arrays); dtype= converts them on purpose."""
    t = dev.empty((2,), "u32")
    prog = _program(dev, (2, 3))
    for name, call in (("prog.run", lambda: prog.run(x=[[True, 0.5, 1.0]] * 2)),
                       ("dev.write", lambda: dev.write(t, [1, True])),
                       ("dev.write", lambda: dev.write(t, np.array([True, False]))),
                       ("g.state", lambda: wg.Graph("s").state("w", (2,), "u32", init=[True, False]))):
        with pytest.raises(wg.DtypeError, match=r": got booleans \(.*\); pass numbers, or convert them explicitly"):
            call()
    np.testing.assert_array_equal(dev.tensor(np.array([True, False]), dtype="u32").numpy(), [1, 0])


def test_text_is_not_offered_a_conversion_to_numbers(dev):
    """A string where numbers go was told "convert it explicitly (array.astype(np.uint32))", which reads '3' as 3:
    text is refused as text, nothing written."""
    t = dev.tensor(np.array([7, 7], np.uint32))
    for value in ("3", np.array(["3", "4"]), np.array([b"3", b"4"])):
        with pytest.raises(wg.DtypeError, match=r"dev.write into .*: expects u32 \(uint32\), got text \(.*\): "
                                                r"pass numbers$"):
            dev.write(t, value)
    assert t.numpy().tolist() == [7, 7]


def test_write_takes_the_tensors_shape_or_flat_data(dev, rng):
    """dev.write of a (3, 2) array into a (2, 3) tensor (a transpose forgotten) has the right count and wrote it in
    order, silently; prog.run refused the same. The tensor's shape (sizes of 1 aside) or flat data are taken."""
    t = dev.empty((2, 3), "f32")
    a = rng.standard_normal((2, 3)).astype(np.float32)
    with pytest.raises(wg.ShapeError, match=r"data of shape \(3, 2\) is laid out otherwise"):
        dev.write(t, np.ascontiguousarray(a.T))
    for given in (a, a.reshape(-1), a.reshape(1, 2, 3), a.reshape(2, 1, 3)):
        dev.write(t, np.zeros((2, 3), np.float32))
        dev.write(t, given)
        np.testing.assert_array_equal(t.numpy(), a)


def test_float32_past_the_integer_range_raises_not_wraps(dev):
    """np.float32(2**31) to i32 was checked against 2^31 - 1 in float32 (where it is 2^31, so it passed) and wrapped
    to -2^31; np.float32(2**32) to u32 became 0. Both raise naming the value now; the largest float32 in range
    still converts exactly."""
    with pytest.raises(wg.DtypeError, match=r"dev.tensor: 2147483648.0 is outside i32's range "
                                            r"\[-2147483648, 2147483647\]"):
        dev.tensor(np.array([1.0, 2.0**31], np.float32), "i32")
    with pytest.raises(wg.DtypeError, match=r"dev.tensor: 4294967296.0 is outside u32's range \[0, 4294967295\]"):
        dev.tensor(np.array([2.0**32], np.float32), "u32")
    got = dev.tensor(np.array([2.0**31 - 128, -2.0**31], np.float32), "i32").numpy()
    np.testing.assert_array_equal(got, np.array([2147483520, -2147483648], np.int32))
    np.testing.assert_array_equal(dev.tensor(np.array([2.0**32 - 256], np.float32), "u32").numpy(), [4294967040])


def test_python_ints_past_64_bits_are_named(dev):
    """numpy holds a Python int past int64 / uint64 as an object: dev.tensor([2**64], "u32") said it could not view
    a list ('pass an ndarray, a buffer ...'), naming neither the value nor the range; it names both now, wherever
    Python data takes a dtype (dev.write too), and an object ndarray is named as one (not 'cannot view ndarray')."""
    with pytest.raises(wg.DtypeError, match=r"^dev.tensor: 18446744073709551616 is outside u32's range "
                                            r"\[0, 4294967295\]$"):
        dev.tensor([1, 2**64], "u32")
    with pytest.raises(wg.DtypeError, match=r"^dev.tensor: -9223372036854775809 is outside i32's range"):
        dev.tensor([[0], [-2**63 - 1]], "i32")
    with pytest.raises(wg.DtypeError, match=r"^dev.tensor: an int of 3322 bits is outside i32's range"):
        dev.tensor(10**1000, "i32")   # its digits are not spelled out (str() of a huge int raises)
    with pytest.raises(wg.DtypeError, match=r"dev.write into .*: 1180591620717411303424 is outside u32's range"):
        dev.write(dev.empty((2,), "u32"), [3, 2**70])
    with pytest.raises(wg.DtypeError, match=r"^dev.tensor: the Python int 1180591620717411303424 is past numpy's "
                                            r"64-bit integers .*float\(x\)"):
        dev.tensor([2**70], "f32")
    with pytest.raises(wg.DtypeError, match=r"^dev.tensor: an array of dtype object \(Python objects\) has no "
                                            r"wgraph dtype; convert it"):
        dev.tensor(np.array([1.0, 2.0], dtype=object), "f32")


def test_a_list_of_float32_scalars_is_not_said_to_be_a_dtype_wgraph_lacks(dev):
    """A list of numpy float32 scalars needs dtype= as every list does, but the refusal said numpy would make it
    'float32, which wgraph lacks': float32 is f32."""
    with pytest.raises(wg.DtypeError, match=r"a Python list has no dtype of its own \(numpy would make it "
                                            r"float32\); say which with dtype=") as info:
        dev.tensor([np.float32(1.5), np.float32(2.0)])
    assert "lacks" not in str(info.value)
    with pytest.raises(wg.DtypeError, match=r"numpy would make it float64, which wgraph lacks\)"):
        dev.tensor([1.5, 2.0])


def test_signalling_nan_converts_without_a_warning(dev):
    """A float64 signalling NaN converted to f32 or bf16 stays NaN (documented) but numpy warned 'invalid value
    encountered in cast', which an application running with -W error (warnings as errors) got as an exception."""
    snan = np.array([1.0, np.nan], np.float64)
    snan.view(np.uint64)[1] = 0x7FF0000000000001  # exponent all ones, quiet bit clear: signalling
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for dtype in ("f32", "bf16"):
            got = dev.tensor(snan, dtype).numpy()
            assert got[0] == 1.0 and np.isnan(got[1]), (dtype, got)
        assert np.isnan(wg.dtypes.from_bf16(wg.dtypes.to_bf16(snan))[1])


def test_python_numbers_round_to_a_float_dtype_as_dtype_converts(dev):
    """Python numbers take the dtype the call needs and convert as dtype= does (README, docs/graphs.md): exact or
    refused for i32/u32, rounded to the nearest value (ties to even) for f32/f16/bf16, as 0.1 is. So an int past
    the float's exact integers rounds too: 2^24 + 1 = 16777217 is 16777216 in f32 (the tie goes to the even
    significand), 2^24 + 3 is 16777220, never truncated to 16777218; the same in g.state's init, dev.write and a
    run's input. Values by hand, not by numpy."""
    assert dev.tensor([16777217, 16777219, -16777219], dtype="f32").numpy().tolist() == [16777216.0, 16777220.0,
                                                                                        -16777220.0]
    assert dev.tensor(0.1, dtype="f32").numpy().item() == 13421773 * 2.0**-27   # 0.100000001490116119384765625
    if dev.caps.has_f16:   # an f16 tensor needs shader-f16
        assert dev.tensor([2049, 2051], dtype="f16").numpy().tolist() == [2048.0, 2052.0]   # 11 significant bits
    assert dev.tensor([257, 259], dtype="bf16").numpy().tolist() == [256.0, 260.0]      # bf16: 8
    t = dev.empty((2,), "f32")
    dev.write(t, [16777217, 16777219])
    assert t.numpy().tolist() == [16777216.0, 16777220.0]
    g = wg.Graph("ints")
    s = g.state("s", (2,), "f32", init=[16777217, 16777219])
    g.output("y", wg.ops.add(g.input("x", (2,), "f32"), s))
    prog = g.compile(dev)
    assert prog.run(x=[0, 0])["y"].numpy().tolist() == [16777216.0, 16777220.0]
    assert prog.run(x=[16777219, 1])["y"].numpy().tolist() == [33554436.0, 16777220.0]   # 16777221 ties to even
