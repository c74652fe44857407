"""Batched greedy decoding (wgraph/models/batched.py): each sequence's ids equal that sequence decoded alone
(Llama.generate) and the float64 reference (tests/llama_reference.py) or transformers' goldens, for ragged
prompts and B = 1, 3, 8; the step's logits against float64; dispatches per step independent of B; per-sequence
stop ids; the weights shared with the model, not copied; bad arguments refused before any GPU work. The step's
own ops: tests/test_batched_decode_ops.py."""

import numpy as np
import pytest

from wgraph.errors import ArgumentError, LimitError, RecordingError, UnsupportedError
from wgraph.models import Llama, LlamaConfig
from wgraph.models.batched import BatchedDecoder
from wgraph.models.quantized import QuantizedLlama, quantize_checkpoint

import llama_reference as ref
from llama_reference import rel_err
from thread_runner import run_together
from transformers_data import ARCH, checkpoint, golden

PROMPTS = [[3], [3, 14, 15, 92, 65], list(range(5, 17)), [7, 7], [40, 2, 99, 1, 5, 6, 8], [60, 61, 62],
           [9, 8, 7, 6, 5, 4, 3, 2, 1], [11]]  # lengths 1, 5, 12, 2, 7, 3, 9, 1
STEPS = 8


@pytest.fixture(scope="module")
def model(tiny_llama, dev):
    cfg, w = tiny_llama
    return Llama.from_weights(LlamaConfig.from_dict(cfg), w, dev, dtype="f32", max_seq=64)


@pytest.fixture(scope="module")
def alone(model):
    """Each prompt decoded by itself with Llama.generate."""
    return [model.generate(p, STEPS) for p in PROMPTS]


def test_logits_past_the_binding_limit_are_refused_by_name(dev):
    """The step's [B, vocab] f32 logits are one tensor: past the device's binding limit the decoder raised
    dev.empty's LimitError, naming neither the batch nor the vocabulary; it names both and the batch that fits."""
    from wgraph.models.random_checkpoint import random_weights, tiny_config

    cfg = tiny_config(vocab_size=4096)
    model = Llama.from_weights(LlamaConfig.from_dict(cfg), random_weights(cfg, seed=0), dev, dtype="f32", max_seq=8)
    limit = dev.caps.max_storage_binding_size
    most = limit // (4 * 4096)
    if most + 1 > dev.caps.max_workgroups_per_dim:
        pytest.skip(f"this device binds {limit} bytes: no batch within its grid limit reaches it")
    with pytest.raises(LimitError, match=rf"BatchedDecoder: the logits of batch {most + 1} x vocab 4096 \(f32\) would "
                                         rf"take {(most + 1) * 4096 * 4} bytes, above the device's {limit} per storage "
                                         rf"buffer: use a batch of at most {most}"):
        BatchedDecoder(model, most + 1, max_seq=2)


def test_a_head_dim_above_the_batched_kernels_is_refused_up_front(dev):
    """A model of head_dim 512 (the single-sequence kernels take it) raised attention_kvcache's LimitError from
    inside the step's graph build, naming neither BatchedDecoder nor the model; the constructor refuses it first,
    with the limit the batched attention planner checks."""
    from wgraph.models.random_checkpoint import random_weights, tiny_config
    from wgraph.ops.attention_planner import max_head_dim

    limit = max_head_dim("attention_batched")
    cfg = tiny_config(num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1, head_dim=2 * limit,
                      vocab_size=16, intermediate_size=32)
    model = Llama.from_weights(LlamaConfig.from_dict(cfg), random_weights(cfg, seed=0), dev, dtype="f32", max_seq=8)
    with pytest.raises(LimitError, match=rf"^BatchedDecoder: the model's head_dim {2 * limit} is above the batched "
                                         rf"attention kernels' limit of {limit}"):
        BatchedDecoder(model, 2, max_seq=4)


@pytest.mark.parametrize("batch, count", [(1, 1), (3, 3), (8, 8), (8, 3)])
def test_each_sequence_decodes_as_it_does_alone(tiny_llama, model, alone, batch, count):
    """B sequences of ragged prompts at once (count < batch: the rest of the batch decodes pads); the prompt of
    length 12 goes first when B = 1."""
    cfg, w = tiny_llama
    order = [2, 0, 1, 3, 4, 5, 6, 7][:count]
    prompts = [PROMPTS[i] for i in order]
    got = BatchedDecoder(model, batch).generate(prompts, STEPS)
    assert got == [alone[i] for i in order]
    assert got[0] == ref.greedy(cfg, w, prompts[0], STEPS)[0]  # the float64 reference too


def test_step_logits_match_float64_and_states_advance(tiny_llama, model):
    """A step consumes each sequence's last prompt id at its own position: its logits row is the float64
    forward's last row of that prompt; then token, pos, kv_len and the history row advance per sequence."""
    cfg, w = tiny_llama
    prompts = [PROMPTS[1], PROMPTS[0], PROMPTS[2]]
    dec = BatchedDecoder(model, 3)
    dec.prefill(prompts)
    st = dec.program.state
    lens = [len(p) for p in prompts]
    assert st("pos").numpy().tolist() == [n - 1 for n in lens] and st("kv_len").numpy().tolist() == lens
    logits = dec.step().numpy()
    assert logits.shape == (3, cfg["vocab_size"])
    for b, p in enumerate(prompts):
        want = ref.forward(cfg, w, p)[-1]
        assert rel_err(logits[b], want) < 1e-4, f"sequence {b}"
        assert st("token").numpy()[b] == int(np.argmax(want))
        assert st("history").numpy()[b, :lens[b] + 1].tolist() == p + [int(np.argmax(want))]
    assert st("pos").numpy().tolist() == lens and st("kv_len").numpy().tolist() == [n + 1 for n in lens]
    second = dec.step().numpy()  # the next position of each sequence, after its first new id
    for b, p in enumerate(prompts):
        ids = p + [int(np.argmax(ref.forward(cfg, w, p)[-1]))]
        assert rel_err(second[b], ref.forward(cfg, w, ids)[-1]) < 1e-4, f"sequence {b}"


def test_prefill_leaves_room_for_the_first_id(model):
    """prefill takes prompts of up to max_seq - 1 ids: the first step's id lands at each prompt's length. A prompt
    of max_seq ids was taken (its first id, past the history row, was dropped on the GPU) and a longer one failed
    in numpy's broadcast; both are refused like generate's, before any GPU work."""
    dec = BatchedDecoder(model, 2, max_seq=8)
    for n in (8, 9):
        with pytest.raises(LimitError, match=rf"BatchedDecoder.prefill: prompt 1 \({n} ids\) \+ 1 new tokens exceed "
                                             r"the KV cache of 8 positions \(max_seq\)"):
            dec.prefill([[1], [2] * n])
    dec.prefill([[1], [3] * 7])
    dec.step()
    history = dec.program.state("history").numpy()
    assert history[1, :7].tolist() == [3] * 7 and history[1, 7] == dec.program.state("token").numpy()[1]


def test_dispatches_per_step_do_not_depend_on_batch(model, dev):
    """Every op of the step is one plan for the whole batch: the dispatch count is the same for B = 1, 3, 8 (the
    GEMV's rows), and the same for B = 9, 16 (the GEMM's, where a linear's norm, swiglu and residual are
    dispatches of their own); a replayed step is one submit, no readback, nothing created."""
    rows = {b: BatchedDecoder(model, b).program.rows for b in (1, 3, 8, 9, 16)}
    assert len(rows[1]) == len(rows[3]) == len(rows[8])
    assert len(rows[9]) == len(rows[16])
    gemm_steps = sum(r.op == "linear" and not r.variant.startswith(("gemv", "linear_gemm")) for r in rows[9])
    assert len(rows[9]) - gemm_steps == len(rows[8])  # the same ops; only the linear's own steps are added
    dec = BatchedDecoder(model, 8)
    dec.prefill(PROMPTS)
    before = dev.stats.snapshot()
    dec.run_steps(5, in_flight=2)
    d = dev.stats.since(before)
    assert (d.submits, d.readbacks, d.dispatches) == (2, 0, 5 * len(dec.program.rows))  # 4 + 1 steps a submit
    assert (d.pipelines_created, d.bind_groups_created, d.buffers_created) == (0, 0, 0)


def test_submits_and_readbacks_of_generate(model, alone, dev):
    dec = BatchedDecoder(model, 3)
    calls = []
    before = dev.stats.snapshot()
    got = dec.generate(PROMPTS[:3], STEPS, read_every=3, in_flight=2, progress=lambda n, s: calls.append(n))
    d = dev.stats.since(before)
    assert got == alone[:3]
    assert calls == [3, 6, 8]  # the steps made at each read
    reads = -(-STEPS // 3)
    assert d.readbacks == reads == dec.last_stats["readbacks"]
    # the prefill; the steps between reads (3, 3, 2) one submit each (at most 4 steps a submit); one per read
    # (the copy to the staging buffer)
    assert d.submits == 1 + 3 + reads
    for in_flight, every in ((1, 1), (8, None), (3, 5)):
        assert dec.generate(PROMPTS[:3], STEPS, in_flight=in_flight, read_every=every) == alone[:3]


def test_stop_ids_per_sequence(model, alone):
    """A sequence ends at its first stop id (kept); the others go on; ids shared by all or one list each."""
    prompts = PROMPTS[:3]
    want = alone[:3]
    stops = [[want[0][4]], [], [want[2][2], want[2][6]]]
    cut = [want[0][:want[0].index(stops[0][0]) + 1], want[1],
           want[2][:min(want[2].index(t) for t in stops[2]) + 1]]
    dec = BatchedDecoder(model, 3)
    for every in (1, 3, None):
        assert dec.generate(prompts, STEPS, stop_ids=stops, read_every=every) == cut, every
    shared = want[1][3]
    got = dec.generate(prompts, STEPS, stop_ids=(shared,), read_every=2)
    assert got == [w[:w.index(shared) + 1] if shared in w else w for w in want]
    everywhere = [[w[0]] for w in want]  # every sequence stops at its first id: one read, then the end
    assert dec.generate(prompts, STEPS, stop_ids=everywhere, read_every=1) == everywhere
    assert dec.last_stats["steps"] == 1
    # the shared ids as Llama.generate takes them, a range or a 1-D integer array, and a range per prompt (refused
    # as "not a mix" of ids and lists before)
    for ids in (np.array([shared], np.int64), range(shared, shared + 1)):
        assert dec.generate(prompts, STEPS, stop_ids=ids, read_every=2) == got
    assert dec.generate(prompts, STEPS, stop_ids=[[], range(shared, shared + 1), []]) == [want[0], got[1], want[2]]
    # a set of per-prompt lists has no order to match the prompts with: refused, not applied in any order
    with pytest.raises(ArgumentError, match="per-prompt lists in a list or tuple, in the prompts' order"):
        dec.generate(prompts[:2], STEPS, stop_ids={(want[0][4],), (want[1][3],)})
    assert dec.generate(prompts, 0) == [[], [], []] and dec.last_stats["tokens"] == 0   # not the call before's


def test_a_decoder_runs_new_prompts_each_call(model, alone):
    """A decoder is reused: each generate starts its prompts afresh (caches, positions, history rows); the model
    switching programs (sampling, then greedy again) compiles them on the same weight buffers, so the decoder
    and the model still share them."""
    dec = BatchedDecoder(model, 3)
    assert dec.generate(PROMPTS[:3], STEPS) == alone[:3]
    assert dec.generate(PROMPTS[3:6], STEPS) == alone[3:6]
    held = dec.program.state("l0.w_qkv")
    model.generate([3], 2, temperature=0.8, seed=1)
    assert model.generate(PROMPTS[6], STEPS) == alone[6]
    assert model.program.state("l0.w_qkv").buffer is held.buffer
    assert dec.generate([PROMPTS[6], PROMPTS[0]], STEPS) == [alone[6], alone[0]]


def test_one_call_at_a_time_on_a_decoder(model, alone):
    """Two threads generating on one decoder overwrote each other's prompts and read each other's ids (wrong ids
    in 11 of 12 calls of a probe); each call now runs whole, as a model's (docs/concurrency.md)."""
    dec = BatchedDecoder(model, 2)
    work = {0: (PROMPTS[:2], alone[:2]), 1: (PROMPTS[2:4], alone[2:4])}
    got = run_together(2, lambda i: [dec.generate(work[i][0], STEPS, read_every=2) for _ in range(2)])
    assert got == [[work[i][1]] * 2 for i in (0, 1)]


def test_weights_are_the_models_buffers(model):
    """The batch program binds the model's weight tensors (no copy): its persistent bytes are its caches and
    per-sequence states only."""
    dec = BatchedDecoder(model, 4, max_seq=16)
    for name in ("embed", "l0.w_qkv", "l1.w_down", "rope_cos"):
        assert dec.program.state(name).buffer is model.program.state(name).buffer
    c = model.config
    caches = 2 * c.num_hidden_layers * 4 * 16 * c.num_key_value_heads * c.head_dim * 4
    sequences = 4 * 4 * 3 + 4 * 16 * 4  # token, pos, kv_len; history
    logits = 4 * c.vocab_size * 4  # the output
    assert dec.program.memory.persistent_bytes == caches + sequences + logits


@pytest.mark.parametrize("case", ["llama_bias", "qwen2", "mistral", "gemma2"])
def test_architectures_match_transformers_goldens(case, tmp_path, dev):
    """Biases, sliding windows of 4 keys on some layers (Qwen2, Mistral, Gemma 2), Gemma 2's softcaps, sandwich
    norms and scaled embeddings: the golden prompt's ids in a batch with two other prompts are transformers'
    greedy ids; the others decode as they do alone."""
    g = golden(ARCH / case)
    prompt, greedy = g["prompt"].tolist(), g["greedy"].tolist()
    model = Llama.from_pretrained(checkpoint(ARCH / case, tmp_path, "v5"), dev, dtype="f32", max_seq=32)
    others = [prompt[3:4], prompt[::-1][:6]]
    got = BatchedDecoder(model, 3).generate([others[0], prompt, others[1]], len(greedy))
    assert got[1] == greedy
    assert [got[0], got[2]] == [model.generate(p, len(greedy)) for p in others]


def test_f16_model_decodes_as_alone(tiny_llama, dev):
    """f16 weights and caches (rope_kv_append_batched's f16 kernel, f16 K/V attention): the same ids as the f16
    model alone (the same rounding, other reduction orders)."""
    if not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    cfg, w = tiny_llama
    m16 = Llama.from_weights(LlamaConfig.from_dict(cfg), w, dev, dtype="f16", max_seq=32)
    prompts = PROMPTS[:3]
    assert BatchedDecoder(m16, 3).generate(prompts, STEPS) == [m16.generate(p, STEPS) for p in prompts]


def test_quantized_model_decodes_as_alone(tiny_llama, dev):
    """A QuantizedLlama's Q8_0 block states are shared as they are; its batch decodes as it does alone."""
    cfg, w = tiny_llama
    model = QuantizedLlama.from_weights(LlamaConfig.from_dict(cfg), quantize_checkpoint(w, "Q8_0"), dev, max_seq=32)
    prompts = PROMPTS[:3]
    dec = BatchedDecoder(model, 3)
    assert dec.program.state("l0.w_qkv").buffer is model.program.state("l0.w_qkv").buffer
    assert dec.generate(prompts, STEPS) == [model.generate(p, STEPS) for p in prompts]


def test_architectures_without_fused_rope_are_refused(tmp_path, dev):
    model = Llama.from_pretrained(checkpoint(ARCH / "qwen3", tmp_path, "v5"), dev, dtype="f32", max_seq=16)
    with pytest.raises(UnsupportedError, match=r"BatchedDecoder: qwen3 .*\(qk_norm True"):
        BatchedDecoder(model, 2)


def test_bad_arguments_are_refused_before_gpu_work(tiny_llama, model, dev):
    dec = BatchedDecoder(model, 3, max_seq=24)
    # a layer's K cache [batch, max_seq, Hkv, D] (f32) past the device's binding limit with the batch in its grid's
    # [1, max_workgroups_per_dim]: lavapipe's 128 MiB is reached by the model's 64 positions (batch 16385); a GPU's
    # 2 GiB is not by 65535 x 64, so there a model of more positions (257 at 65535) is refused the same way
    limit, most = dev.caps.max_storage_binding_size, dev.caps.max_workgroups_per_dim
    row = model.config.num_key_value_heads * model.config.head_dim * 4   # one position's K bytes
    long = model if most * model.max_seq * row > limit else Llama.from_weights(
        LlamaConfig.from_dict(tiny_llama[0]), tiny_llama[1], dev, dtype="f32", max_seq=limit // (most * row) + 1)
    over = limit // (long.max_seq * row) + 1
    assert over <= most and over * long.max_seq * row > limit
    v = model.config.vocab_size
    A = ArgumentError
    lists = r"must be a list of 1 to 3 prompts \(the batch\), each a list of token ids"
    ids = rf"must be a list of integers in \[0, {v - 1}\]"
    generate = [
        (A, rf"prompts='abc' {lists}", ("abc", 4), {}),
        (A, rf"prompts=array\((?s:.)*{lists}", (np.ones((2, 2), np.int64), 4), {}),
        (A, rf"prompts=\[\] {lists}", ([], 4), {}),
        (A, rf"prompts=\[\[1\], \[1\], \[1\], \[1\]\] {lists}", ([[1]] * 4, 4), {}),
        (A, r"prompts\[1\]=\[\] must be a non-empty list of token ids", ([[1], []], 4), {}),
        (A, rf"prompts\[0\]=\[1, True\] {ids}", ([[1, True]], 4), {}),
        (A, rf"prompts\[0\]=\[1, 2.0\] {ids}", ([[1, 2.0]], 4), {}),
        (A, rf"prompts\[0\]=array\(\[1., 1.\], dtype=float32\) {ids}", ([np.ones(2, np.float32)], 4), {}),
        (A, rf"prompts\[0\]=5 {ids}", ([5], 4), {}),
        (A, rf"prompts\[1\]=\[2, {v}\] {ids}", ([[1], [2, v]], 4), {}),
        (A, rf"prompts\[0\]=\[-1\] {ids}", ([[-1]], 4), {}),
        (A, r"max_new_tokens=True must be an integer", ([[1]], True), {}),
        (A, r"max_new_tokens=4.0 must be an integer", ([[1]], 4.0), {}),
        (A, r"max_new_tokens=-1 must be an integer in \[0, ", ([[1]], -1), {}),
        (A, r"in_flight=0 must be an integer in \[1, ", ([[1]], 4), {"in_flight": 0}),
        (A, r"read_every=0 must be an integer in \[1, ", ([[1]], 4), {"read_every": 0}),
        (LimitError, r"prompt 1 \(20 ids\) \+ 5 new tokens exceed the KV cache of 24 positions",
         ([[1], [1] * 20], 5), {}),
        (A, r"stop_ids=\[2, \[3\]\] must be a list of ids .* not a mix of ids and lists", ([[1]], 4),
         {"stop_ids": [2, [3]]}),
        (A, r"stop_ids=\[\[2\]\] must be .* one such list per prompt \(2\)", ([[1], [2]], 4), {"stop_ids": [[2]]}),
        (A, rf"stop_ids=\[{v}\] {ids}", ([[1]], 4), {"stop_ids": [v]}),
        (A, r"stop_ids=2 must be a list of ids", ([[1]], 4), {"stop_ids": 2}),
        # a generator, dict or None was refused as '... or one such list per prompt, not a mix': now what was given
        (A, r"stop_ids=<generator .* must be a list of ids in \[0, \d+\] \(or a tuple, set, range or 1-D integer "
            r"array of them\) shared by every prompt, or one such list per prompt \(1\); got a generator$",
         ([[1]], 4), {"stop_ids": (i for i in [2])}),
        (A, r"stop_ids=\{2: 3\} must be a list of ids .*; got a dict$", ([[1]], 4), {"stop_ids": {2: 3}}),
        (A, r"stop_ids=None must be a list of ids .*; got None \(no stop ids: pass \(\)\)$", ([[1]], 4),
         {"stop_ids": None}),
    ]
    before = dev.stats.snapshot()
    state = dec.program.state("history").numpy()
    for err, pattern, args, kw in generate:
        with pytest.raises(err, match="BatchedDecoder.generate: " + pattern):
            dec.generate(*args, **kw)
    construct = [
        (A, r"batch=0 must be an integer in \[1, 65535\]", (model, 0), {}),
        (A, r"batch=True must be an integer", (model, True), {}),
        (A, r"batch=2.0 must be an integer", (model, 2.0), {}),
        (A, r"max_seq=65 must be an integer in \[2, 64\] or None", (model, 2), {"max_seq": 65}),
        (A, r"max_seq=1 must be an integer in \[2, 64\]", (model, 2), {"max_seq": 1}),
        (LimitError, rf"a layer.s K cache for batch {over} x max_seq {long.max_seq} would take "
                     rf"{over * long.max_seq * row} bytes, above the device's {limit} per storage buffer",
         (long, over), {}),
        (A, r"model='llama' must be a Llama", ("llama", 2), {}),
    ]

    for err, pattern, args, kw in construct:
        with pytest.raises(err, match="BatchedDecoder: " + pattern):
            BatchedDecoder(*args, **kw)
    d = dev.stats.since(before)
    assert (d.submits, d.dispatches) == (1, 0)  # the one submit is the history read above
    assert (dec.program.state("history").numpy() == state).all()
    assert dec.generate([[1]], 0) == [[]]


def test_steps_past_the_cache_are_refused_on_the_host(tiny_llama, model, dev):
    """The most advanced sequence's position is known on the host: steps past its cache (max_seq 8, a prompt of 7
    ids: the steps at positions 6 and 7 fit) were submitted, and a later call's readback raised the GPU's
    GpuValueError; now a LimitError names them before any GPU work, and the next generate is right."""
    cfg, w = tiny_llama
    dec = BatchedDecoder(model, 2, max_seq=8)
    dec.prefill([[1], [3] * 7])
    before = dev.stats.snapshot()
    with pytest.raises(LimitError, match=r"BatchedDecoder.run_steps: 3 decode steps from position 6 pass the KV "
                                         r"cache of 8 positions \(max_seq\): at most 2 fit"):
        dec.run_steps(3)
    assert dev.stats.since(before).submits == 0
    dec.run_steps(2)
    with pytest.raises(LimitError, match=r"BatchedDecoder.step: 1 decode steps from position 8 .* at most 0 fit"):
        dec.step()
    assert dec.generate([[5], [5, 6]], 3) == [ref.greedy(cfg, w, p, 3)[0] for p in ([5], [5, 6])]


def test_a_step_before_any_prefill_is_refused(tiny_llama, model, dev):
    """A fresh decoder's step() ran every row from token 0 at position 0 with kv_len 0: attention over no key, and an
    id of no sequence written into each row's history, with no error (as Llama.step did). step and run_steps now say
    so before any GPU work; once prompts are prefilled the step's logits are the float64 reference's."""
    cfg, w = tiny_llama
    dec = BatchedDecoder(model, 2, max_seq=8)
    before = dev.stats.snapshot()
    with pytest.raises(RecordingError, match=r"^BatchedDecoder.step: no prompts were prefilled on this decoder: "
                                                r".*call prefill\(prompts\) first"):
        dec.step()
    with pytest.raises(RecordingError, match=r"^BatchedDecoder.run_steps: no prompts were prefilled"):
        dec.run_steps(2)
    assert dev.stats.since(before).submits == 0
    assert dec.run_steps(0) == 0.0   # no step: nothing to refuse
    prompts = [[3, 14], [7]]
    dec.prefill(prompts)
    logits = dec.step().numpy()
    for b, p in enumerate(prompts):
        assert rel_err(logits[b], ref.forward(cfg, w, p)[-1]) < 1e-4, f"sequence {b}"


def test_a_prefill_that_fails_inside_its_recording_leaves_steps_refused(model, alone, monkeypatch):
    """The position was counted before the prefill's recording: a prefill failing inside it (a lost device, an
    interrupt; here the prompt's embedding raises) left steps accepted, decoding the new prompts' positions over the
    old caches (wrong ids, no error). Steps are refused until a prefill completes, and the next one decodes right."""
    dec = BatchedDecoder(model, 2, max_seq=32)
    dec.generate(PROMPTS[:2], 3)

    class Interrupted(RuntimeError):
        pass

    def interrupted(*_args, **_kw):
        raise Interrupted("inside the prefill's recording")

    monkeypatch.setattr(dec, "_embed", interrupted)
    with pytest.raises(Interrupted):
        dec.prefill([PROMPTS[1], PROMPTS[4]])
    monkeypatch.undo()
    with pytest.raises(RecordingError, match=r"BatchedDecoder.step: no prompts were prefilled on this decoder"):
        dec.step()
    with pytest.raises(RecordingError, match=r"BatchedDecoder.run_steps: no prompts were prefilled"):
        dec.run_steps(1)
    assert dec.generate([PROMPTS[1], PROMPTS[4]], STEPS) == [alone[1], alone[4]]


@pytest.mark.parametrize("batched", [False, True], ids=["Llama", "BatchedDecoder"])
def test_a_progress_callback_cannot_reenter_the_generation(model, alone, batched):
    """progress() runs inside generate, on its thread, under the model's re-entrant lock: a callback that called
    generate on the same model reset the caches and positions mid-run and the outer call returned ids of neither
    (no error). The inner call is refused, naming itself and the callback; the model works after it."""
    dec = BatchedDecoder(model, 2, max_seq=32) if batched else model
    name = "BatchedDecoder" if batched else "Llama"
    where = "BatchedDecoder.generate" if batched else "generate"   # as each names itself in its other errors
    prompts = [PROMPTS[1], PROMPTS[3]] if batched else PROMPTS[1]

    def progress(_done, _seconds):
        dec.generate(prompts, 2)

    with pytest.raises(RecordingError, match=rf"^{where}: called from inside {name}.generate's progress "
                                             r"callback; the generation in progress owns the caches"):
        dec.generate(prompts, STEPS, read_every=4, progress=progress)
    want = [alone[1], alone[3]] if batched else alone[1]
    assert dec.generate(prompts, STEPS, read_every=4, progress=lambda *_: None) == want
