"""decode_advance: token, history, pos and kv_len updated on the GPU, immediately and as a replayed graph node."""

import numpy as np
import pytest

import wgraph as wg


def _u32(*v):
    return np.array(v, np.uint32)


def test_advance_immediate(dev):
    token, history = dev.tensor(_u32(0)), dev.tensor(np.zeros(6, np.uint32))
    pos, kv_len = dev.tensor(_u32(2)), dev.tensor(_u32(0))
    wg.ops.decode_advance(dev.tensor(_u32(77)), token=token, history=history, pos=pos, kv_len=kv_len)
    assert (token.numpy()[0], pos.numpy()[0], kv_len.numpy()[0]) == (77, 3, 4)
    assert history.numpy().tolist() == [0, 0, 0, 77, 0, 0]
    pos_end = dev.tensor(_u32(5))  # p + 1 == len(history): no history write, the counters still move
    wg.ops.decode_advance(dev.tensor(_u32(9)), token=token, history=history, pos=pos_end, kv_len=kv_len)
    assert history.numpy().tolist() == [0, 0, 0, 77, 0, 0] and pos_end.numpy()[0] == 6 and kv_len.numpy()[0] == 7


def test_advance_replayed_feeds_back(dev):
    """Replayed: each run advances from where the previous one left the GPU counters (one submit each)."""
    g = wg.Graph("advance")
    token, hist = g.state("token", (1,), "u32", init=_u32(1)), g.state("history", (8,), "u32")
    pos, kv_len = g.state("pos", (1,), "u32"), g.state("kv_len", (1,), "u32")
    nxt = g.input("next", (1,), "u32")
    wg.ops.decode_advance(nxt, token=token, history=hist, pos=pos, kv_len=kv_len)
    prog = g.compile(dev)
    before = dev.stats.snapshot()
    for i in range(4):
        prog.run(next=11 + 10 * i)
    d = dev.stats.since(before)
    assert (d.submits, d.readbacks) == (4, 0)
    assert prog.state("history").numpy().tolist() == [0, 11, 21, 31, 41, 0, 0, 0]
    assert (prog.state("pos").numpy()[0], prog.state("kv_len").numpy()[0], prog.state("token").numpy()[0]) == (4, 5, 41)


def test_advance_rejects_bad_buffers(dev):
    one = dev.tensor(_u32(0))
    with pytest.raises(wg.DtypeError, match="token"):
        wg.ops.decode_advance(one, token=dev.tensor(np.zeros(1, np.float32)), history=dev.tensor(_u32(0, 0)),
                              pos=dev.tensor(_u32(0)), kv_len=dev.tensor(_u32(0)))
    with pytest.raises(wg.ShapeError, match="pos"):
        wg.ops.decode_advance(one, token=dev.tensor(_u32(0)), history=dev.tensor(_u32(0, 0)),
                              pos=dev.tensor(_u32(0, 0)), kv_len=dev.tensor(_u32(0)))


def test_advance_at_the_u32_limit_is_reported_not_wrapped(dev):
    """pos and kv_len are u32 on the GPU: pos 2^32 - 2 advanced to 2^32 - 1 with kv_len 0 (p + 1 wrapped), pos
    2^32 - 1 to position 0 (kv_len 1) over history[0], silently. Now that sequence is left as it was and the device
    error flag names the op, the value and the limit; the largest position that fits (2^32 - 3) still advances, and
    in a batch the other sequences do."""
    top = 2**32 - 3
    token, history = dev.tensor(_u32(0)), dev.tensor(_u32(5, 6, 7))
    pos, kv_len = dev.tensor(_u32(top)), dev.tensor(_u32(9))
    wg.ops.decode_advance(dev.tensor(_u32(77)), token=token, history=history, pos=pos, kv_len=kv_len)
    assert (token.numpy()[0], pos.numpy()[0], kv_len.numpy()[0]) == (77, top + 1, top + 2)   # 2^32 - 1: fits
    for start in (2**32 - 2, 2**32 - 1):
        token, pos, kv_len = dev.tensor(_u32(0)), dev.tensor(_u32(start)), dev.tensor(_u32(9))
        wg.ops.decode_advance(dev.tensor(_u32(77)), token=token, history=history, pos=pos, kv_len=kv_len)
        with pytest.raises(wg.GpuValueError, match=rf"decode_advance: the GPU position pos .* was {start}; it must be "
                                                   rf"<= {top}, the largest position whose new position"):
            dev.check_errors()
        assert (token.numpy()[0], pos.numpy()[0], kv_len.numpy()[0]) == (0, start, 9)
        assert history.numpy().tolist() == [5, 6, 7]
    starts = _u32(1, 2**32 - 2, 0)
    token, pos, kv_len = dev.tensor(_u32(0, 0, 0)), dev.tensor(starts), dev.tensor(_u32(9, 9, 9))
    history = dev.tensor(np.zeros((3, 4), np.uint32))
    wg.ops.decode_advance_batched(dev.tensor(_u32(11, 12, 13)), token=token, history=history, pos=pos, kv_len=kv_len)
    with pytest.raises(wg.GpuValueError, match=rf"was {2**32 - 2}; it must be <= {top}"):
        dev.check_errors()
    assert token.numpy().tolist() == [11, 0, 13] and pos.numpy().tolist() == [2, 2**32 - 2, 1]
    assert kv_len.numpy().tolist() == [3, 9, 2]
    assert history.numpy().tolist() == [[0, 0, 11, 0], [0, 0, 0, 0], [0, 13, 0, 0]]


def test_fence_waits_without_readback(dev):
    x = dev.tensor(np.ones(64, np.float32))
    y = wg.ops.scale(x, 3.0)
    before = dev.stats.snapshot()
    dev.wait(dev.fence())
    assert dev.stats.since(before).readbacks == 0
    assert np.array_equal(y.numpy(), np.full(64, 3.0, np.float32))
    with pytest.raises(wg.DeviceError, match="never issued"):
        dev.wait(dev.fence() + 1000)


def test_advance_refuses_a_history_of_several_rows(dev):
    """history is [L] (one sequence): a [2, 3] history was taken as 6 flat positions, so advancing from pos 3 wrote
    next_id into history[1, 1], a second row, where the contract (history[p] while p < len(history) = 2) writes
    nothing. Now it is a ShapeError naming the shape, before any GPU work; a [L] history still advances."""
    hist = np.array([[1, 2, 3], [4, 5, 6]], np.uint32)
    history, pos = dev.tensor(hist), dev.tensor(_u32(3))
    before = dev.stats.snapshot()
    with pytest.raises(wg.ShapeError, match=r"decode_advance: history must be \[positions\] .* got shape \(2, 3\)"):
        wg.ops.decode_advance(dev.tensor(_u32(77)), token=dev.tensor(_u32(0)), history=history, pos=pos,
                              kv_len=dev.tensor(_u32(0)))
    assert dev.stats.since(before).dispatches == 0
    assert history.numpy().tolist() == hist.tolist() and pos.numpy().tolist() == [3]
    flat = dev.tensor(hist.reshape(-1))
    wg.ops.decode_advance(dev.tensor(_u32(77)), token=dev.tensor(_u32(0)), history=flat, pos=pos,
                          kv_len=dev.tensor(_u32(0)))
    assert flat.numpy().tolist() == [1, 2, 3, 4, 77, 6] and pos.numpy().tolist() == [4]
