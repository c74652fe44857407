"""What Python asks of a Tensor or a graph Value itself, which only data could answer: a Tensor's data lives on the
GPU (DtypeError, a TypeError), a Value has none until a program runs (GraphError). Each error says what to do."""

import numpy as np
import pytest

import wgraph as wg

TENSOR = r"Tensor\(shape=\(4,\), dtype=f32, nbytes=16\): its data lives on the GPU, where Python cannot read it; "


def test_a_tensor_has_no_truth_value(dev):
    """bool(t) was object's default, True: `if t:` and `assert t` passed for a tensor of zeros."""
    t = dev.tensor(np.zeros(4, np.float32))
    for use in (lambda: bool(t), lambda: not t, lambda: t or None, lambda: t and None):
        with pytest.raises(wg.DtypeError, match=r"^the truth value \(bool, if, assert, and/or\) of " + TENSOR
                           + r"read the data first \(t.numpy\(\).any\(\)\), or test that a tensor was given with "
                             r"t is not None$") as info:
            use()
        assert isinstance(info.value, TypeError)
    other = dev.tensor(np.zeros(4, np.float32))
    assert t == t and t != other and {t: 1, other: 2}[t] == 1 and t in [other, t]  # == is identity, as before


def test_views_of_views_and_their_poison_reach_the_owner(dev):
    """A view's owner was found with `base or self`, which asks a tensor's truth value."""
    t = dev.tensor(np.arange(4, dtype=np.float32))
    view = t.reshape(2, 2).reshape(4).prefix(2)
    assert view._base is t and view.buffer is t.buffer
    np.testing.assert_array_equal(view.numpy(), [0, 1])
    view.poison("discarded")
    assert t.poisoned == "discarded" and view.poisoned == "discarded"


def test_a_graph_value_has_no_truth_value():
    x = wg.Graph("g").input("x", (4,))
    with pytest.raises(wg.GraphError, match=r"^the truth value \(bool, if, assert, and/or\) of Value\('x', "
                                            r"shape=\(4,\), dtype=f32\) is a value of graph 'g': it has no data until "
                                            r"a program runs; .*; test that a value was given with value is not None$"):
        assert x
    assert x == x and x is not None


MATH = r"wgraph's math is its ops, not operators \(wg.ops.add\(t, u\), wg.ops.mul\(t, u\), wg.ops.scale\(t, factor\)\)"
HOST_USES = {   # each raised Python's bare TypeError ("unsupported operand type(s) for +: 'Tensor' and 'int'")
    "binary": [(lambda t: t + t, r"the \+ operator on", MATH), (lambda t: t * 2, r"the \* operator on", MATH),
               (lambda t: 1.0 - t, r"the - operator on", MATH), (lambda t: t @ t, r"the @ operator on", MATH)],
    "unary": [(lambda t: -t, r"the unary - operator on", MATH), (lambda t: abs(t), r"abs\(\) of", MATH)],
    "comparison": [(lambda t: t > 0, r"the > comparison of", r"read the data first \(t.numpy\(\)\)")],
    "indexing": [(lambda t: t[0], r"indexing \(t\[\.\.\.\]\) of", r"read the data first \(t.numpy\(\)\[\.\.\.\]\); "
                  r"t.reshape\(\) and t.prefix\(rows\) are views on the GPU"),
                 (lambda t: t.__setitem__(0, 1.0), r"item assignment \(t\[\.\.\.\] = x\) to",
                  r"write the whole tensor with dev.write\(t, data\)")],
    "len": [(lambda t: len(t), r"len\(\) of", r"its length is t.shape\[0\] \(t.size counts every element\)")],
    "iteration": [(lambda t: list(t), r"iterating over", r"read the data first"),
                  (lambda t: 0.0 in t, r"the in operator on", r"read the data first")],
    "conversion": [(lambda t: float(t), r"float\(\) of", r"read the data first \(t.numpy\(\).item\(\) for one value\)")],
}


@pytest.mark.parametrize("kind", sorted(HOST_USES))
def test_python_operators_indexing_and_len_of_a_tensor_name_what_to_do(dev, kind):
    t = dev.tensor(np.zeros(4, np.float32))
    for use, what, instead in HOST_USES[kind]:
        with pytest.raises(wg.DtypeError, match=f"^{what} {TENSOR}{instead}") as info:
            use(t)
        assert isinstance(info.value, TypeError)  # an `except TypeError` that caught Python's own still catches it
    np.testing.assert_array_equal(t.numpy(), 0)


def test_copy_is_a_view_and_deepcopy_and_pickle_are_refused(dev):
    """copy.copy(t) duplicated the slots, _base None included: a second owner of the buffer, so when both died the
    buffer went back to the pool twice and the next two tensors were given it (writing b changed a: both read
    [2, 2, 2, 2]). A copy is a view now (the owner stays alive, one release); deepcopy and pickle raised cffi's
    TypeError ("cannot pickle '_cffi_backend._CDataBase' object") and are refused saying what to do."""
    import copy
    import pickle

    t = dev.tensor(np.arange(4, dtype=np.float32))
    c = copy.copy(t)
    del t
    np.testing.assert_array_equal(c.numpy(), [0, 1, 2, 3])   # the copy keeps the buffer's owner alive
    del c
    a = dev.tensor(np.full(4, 1, np.float32))
    b = dev.tensor(np.full(4, 2, np.float32))
    np.testing.assert_array_equal(a.numpy(), [1, 1, 1, 1])
    np.testing.assert_array_equal(b.numpy(), [2, 2, 2, 2])
    for c in (copy.copy(a), copy.copy(a.reshape(2, 2))):
        assert c is not a and c.buffer is a.buffer and c._base is a
        np.testing.assert_array_equal(c.numpy().ravel(), [1, 1, 1, 1])
    with pytest.raises(wg.DtypeError, match=r"^copy.deepcopy of " + TENSOR.replace("Python cannot read it",
                                                                                  "Python cannot copy it")
                       + r"copy.copy\(t\) is another handle on the same buffer"):
        copy.deepcopy([a])
    with pytest.raises(wg.DtypeError, match=r"^pickling Tensor\(shape=\(4,\), dtype=f32, nbytes=16\): .*pickle "
                                            r"t.numpy\(\)"):
        pickle.dumps({"a": a})
