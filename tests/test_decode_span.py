"""The short decode program (wgraph/models/decode_span.py): a Llama whose attention plans another kernel over the
first rows of its KV cache runs a second program there, on views of the same caches, then the whole cache's.
Checked: which rows the planner asks for (against the registry's plans for each storage), the step split at the
edges, Tensor.prefix, and ids through the switch equal to a single program's (greedy and sampled) on lavapipe,
where the switch is forced (lavapipe plans the same kernel for every storage)."""

import numpy as np
import pytest

import wgraph as wg
import wgraph.models.llama as llama_module
from wgraph.device import Caps
from wgraph.models import Llama
from wgraph.models.decode_span import short_cache_rows, split_steps
from wgraph.models.random_checkpoint import random_weights, tiny_config, write_checkpoint
from wgraph.tensor import TensorSpec

GPU = Caps.synthetic(has_f16=True, has_subgroups=True, max_workgroup_storage=49152)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    cfg = tiny_config(max_position_embeddings=4096)
    return write_checkpoint(tmp_path_factory.mktemp("span"), cfg, random_weights(cfg, seed=3))


def _decode_variant(rows: int, caps: Caps) -> tuple[str, str]:
    """(variant, tier) the decode attention of the tiny model (4/2 heads, D 16, f32) plans over `rows` keys of
    storage with the length on the GPU."""
    kv_len = TensorSpec((1,), "u32")
    plan = wg.ops.attention_plan(TensorSpec((1, 4, 16), "f32"), TensorSpec((rows, 2, 16), "f32"),
                                 TensorSpec((rows, 2, 16), "f32"), causal=True, kv_len=kv_len, caps=caps)
    return plan.variant, plan.tier


def test_short_rows_follow_the_plan_table(tiny, dev):
    model = Llama.from_pretrained(tiny, dev, dtype="f32", max_seq=2048)
    graph = model.program.graph
    short = short_cache_rows(graph, GPU, 2048)
    # the registry's one-pass kernel: planned over its max_kv_span keys of storage, split-K over the whole cache
    variant, tier = _decode_variant(short, GPU)
    whole, whole_tier = _decode_variant(2048, GPU)
    assert tier == "single" and whole_tier != "single"
    assert short == wg.kernels.registry.registry()[variant].facts["max_kv_span"]
    assert _decode_variant(short + 1, GPU)[0] == whole
    assert short_cache_rows(graph, GPU, short) is None   # a cache no longer than that span: no second program
    # other devices: a second program exactly where attention_plan gives the decode another kernel at 512 keys
    for caps in (Caps.synthetic(), Caps.synthetic(is_cpu=True, has_subgroups=True), dev.caps):
        differs = _decode_variant(512, caps) != _decode_variant(2048, caps)
        assert short_cache_rows(graph, caps, 2048) == (512 if differs else None), caps
    # the model runs this device's answer (differs: dev.caps's, the loop's last): lavapipe plans the same kernel
    # at every storage (the one-pass kernel is GPU-tuned), a GPU with subgroups (an H100) a second program
    assert model.short_rows == (512 if differs else None)
    if dev.caps.is_cpu:
        assert model.short_rows is None


@pytest.mark.parametrize("position, steps, want", [
    (None, 5, (0, 5)), (0, 5, (5, 0)), (6, 5, (2, 3)), (8, 5, (0, 5)), (30, 1, (0, 1)), (7, 1, (1, 0)),
    (3, 0, (0, 0))])
def test_split_steps_at_the_edges(position, steps, want):
    assert split_steps(position, steps, 8) == want
    assert split_steps(position, steps, None) == (0, steps)


def test_prefix_is_a_view_of_the_first_rows(dev):
    data = np.arange(5 * 3 * 2, dtype=np.float32).reshape(5, 3, 2)
    t = dev.tensor(data)
    view = t.prefix(2)
    assert view.shape == (2, 3, 2) and view.buffer is t.buffer and view.nbytes == 2 * 3 * 2 * 4
    np.testing.assert_array_equal(view.numpy(), data[:2])
    dev.write(view, np.full((2, 3, 2), -1, np.float32))
    np.testing.assert_array_equal(t.numpy()[:2], -1)
    np.testing.assert_array_equal(t.numpy()[2:], data[2:])
    for bad in (0, 6, 2.0, True):
        with pytest.raises(wg.ArgumentError, match=r"Tensor.prefix: rows"):
            t.prefix(bad)
    with pytest.raises(wg.ShapeError, match="0-dimensional"):
        dev.tensor(np.float32(1)).prefix(1)


@pytest.fixture(scope="module")
def forced_pair(tiny, dev):
    """(model with the short program forced at 8 rows, model without), same weights, max_seq 40."""
    real = llama_module.short_cache_rows
    llama_module.short_cache_rows = lambda graph, caps, rows: 8
    try:
        forced = Llama.from_pretrained(tiny, dev, dtype="f32", max_seq=40)
    finally:
        llama_module.short_cache_rows = real
    return forced, Llama.from_pretrained(tiny, dev, dtype="f32", max_seq=40)


@pytest.mark.parametrize("sampled", [False, True])
def test_ids_through_the_switch_equal_one_program(forced_pair, sampled):
    forced, plain = forced_pair
    assert forced.short_rows == 8 and plain.short_rows is None
    opts = {"temperature": 0.9, "top_k": 20, "seed": 5} if sampled else {}
    prompt = [3, 14, 15]
    # 3 prompt rows, then decode steps at positions 3..: 5 on the short program (rows 3..7), 24 after it
    want = plain.generate(prompt, 30, **opts)
    got = forced.generate(prompt, 30, **opts)
    assert got == want
    assert forced._short is not None and forced._position == 3 + 29
    # a prompt past the short rows never runs the short program: the same ids from a long prompt
    long_prompt = list(range(10, 22))
    assert forced.generate(long_prompt, 6, **opts) == plain.generate(long_prompt, 6, **opts)


def test_step_and_run_steps_cross_the_switch(forced_pair):
    forced, plain = forced_pair
    for m in (forced, plain):
        m.prefill([7, 8, 9, 10, 11, 12])   # the next step consumes position 6: 2 steps on the short program
    logits = [(forced.step().numpy(), plain.step().numpy()) for _ in range(3)]
    for got, want in logits:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    forced.run_steps(4, in_flight=1)
    plain.run_steps(4, in_flight=1)
    hist = [m.program.state("history").numpy()[:13] for m in (forced, plain)]
    np.testing.assert_array_equal(hist[0], hist[1])


def test_quantized_llama_through_the_switch(dev):
    """QuantizedLlama builds its short program through the same hooks (its weight states, f32 caches): with the
    switch forced at 6 rows, the greedy ids of the same Q8_0 weights with and without it."""
    from wgraph.models import LlamaConfig
    from wgraph.models.quantized import QuantizedLlama, quantize_checkpoint

    cfg = tiny_config()
    quantized = quantize_checkpoint(random_weights(cfg, seed=5), "Q8_0")
    config = LlamaConfig.from_dict(cfg)
    real = llama_module.short_cache_rows
    llama_module.short_cache_rows = lambda graph, caps, rows: 6
    try:
        forced = QuantizedLlama.from_weights(config, quantized, dev, max_seq=24)
    finally:
        llama_module.short_cache_rows = real
    plain = QuantizedLlama.from_weights(config, quantized, dev, max_seq=24)
    assert forced.short_rows == 6 and plain.short_rows is None
    prompt = [1, 17, 42]
    assert forced.generate(prompt, 14) == plain.generate(prompt, 14)
    assert forced._short.graph.name == "llama_decode_quantized_first6"


# ---- a batch's short program (BatchedDecoder): the caches read as pages of every sequence's first rows ----

def _batched_variant(rows: int, caps: Caps, batch: int, paged: bool) -> tuple[str, str]:
    """(variant, tier) the batched decode attention of the tiny model (4/2 heads, D 16, f32) plans over `rows`
    keys per sequence of a contiguous [B, rows] cache or a paged pool of that capacity."""
    from wgraph.ops.attention_planner import PlanFacts, plan

    p = plan(PlanFacts("decode", "f32", 1, 4, 16, rows, layout="paged" if paged else "contiguous", num_kv_heads=2,
                       family="attention_batched", batch=batch), caps)
    return p.variant, p.tier


@pytest.mark.parametrize("batch", [1, 3])
def test_batched_short_rows_follow_the_plan_table(tiny, dev, batch):
    from wgraph.models.batched import BatchedDecoder, short_pages

    model = Llama.from_pretrained(tiny, dev, dtype="f32", max_seq=2048)
    decoder = BatchedDecoder(model, batch)
    graph = decoder.program.graph
    short = short_cache_rows(graph, GPU, 2048)
    if batch == 1:   # a batch of one runs the single-sequence kernels (attention_kvcache's own rule)
        variant, tier = _decode_variant(short, GPU)
        assert _decode_variant(2048, GPU)[1] != "single"
    else:
        variant, tier = _batched_variant(short, GPU, batch, paged=True)
        assert _batched_variant(2048, GPU, batch, paged=False)[1] != "single"
    assert tier == "single" and short == wg.kernels.registry.registry()[variant].facts["max_kv_span"]
    assert short_cache_rows(graph, GPU, short) is None
    # this device's answer from its plan table: lavapipe one kernel at every storage (no short program), a GPU
    # with subgroups (an H100) the one-pass kernel over the first 512 rows, read as pages of 512 (2048 = 4 x 512)
    if batch == 1:
        differs = _decode_variant(512, dev.caps) != _decode_variant(2048, dev.caps)
    else:
        differs = _batched_variant(512, dev.caps, batch, paged=True) != _batched_variant(2048, dev.caps, batch, False)
    assert (decoder.short_rows, decoder.short_page) == ((512, 512) if differs else (None, None))
    if dev.caps.is_cpu:
        assert decoder.short_rows is None
    # pages: the largest divisor of the capacity and the short rows, none under MIN_SHORT_PAGE rows
    assert short_pages(2048, 512) == 512 and short_pages(1536, 512) == 512 and short_pages(1600, 512) == 64
    assert short_pages(1000, 512) is None and short_pages(2048, None) is None


@pytest.fixture(scope="module")
def forced_batch(tiny, dev):
    """(decoder of 3 sequences with the short program forced at 8 rows in pages of 8, decoder without), the same
    model, max_seq 40."""
    import wgraph.models.batched as batched

    model = Llama.from_pretrained(tiny, dev, dtype="f32", max_seq=40)
    real, floor = batched.short_cache_rows, batched.MIN_SHORT_PAGE
    batched.short_cache_rows, batched.MIN_SHORT_PAGE = (lambda graph, caps, rows: 8), 8
    try:
        forced = batched.BatchedDecoder(model, 3)
    finally:
        batched.short_cache_rows, batched.MIN_SHORT_PAGE = real, floor
    return forced, batched.BatchedDecoder(model, 3)


def test_batched_ids_through_the_switch_equal_one_program(forced_batch):
    forced, plain = forced_batch
    assert (forced.short_rows, forced.short_page, plain.short_rows) == (8, 8, None)
    # ragged prompts: the longest's next position is 4, so steps at 4..7 run the short program, the rest after it
    prompts = [[3, 14, 15], [7], [1, 2, 3, 4, 5]]
    want = plain.generate(prompts, 20)
    assert forced.generate(prompts, 20) == want
    assert forced._short is not None and forced._position == 4 + 20
    assert forced._short.graph.states["short_table"].spec.shape == (3, 1)
    # a prompt past the short rows never runs it
    long_prompts = [list(range(10, 22)), [5, 6]]
    assert forced.generate(long_prompts, 5) == plain.generate(long_prompts, 5)


def test_batched_step_and_run_steps_cross_the_switch(forced_batch):
    forced, plain = forced_batch
    for d in (forced, plain):
        d.prefill([[7, 8, 9, 10, 11, 12], [4, 5]])   # the next step consumes position 5 (the longest): 3 short steps
    for _ in range(4):
        np.testing.assert_allclose(forced.step().numpy(), plain.step().numpy(), rtol=1e-5, atol=1e-5)
    forced.run_steps(5, in_flight=1)
    plain.run_steps(5, in_flight=1)
    np.testing.assert_array_equal(*(d.program.state("history").numpy()[:, :16] for d in (forced, plain)))
