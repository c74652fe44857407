"""The Llama model against a float64 numpy reference (tests/llama_reference.py) on tiny checkpoints the tests
write: prefill logits, greedy decode through the replayed program, submits and readbacks per token, in-flight
and read_every independence, stop ids, f16/bf16/sharded/tied/rope-scaled checkpoints, bad checkpoints."""

import attrs
import numpy as np
import pytest

import wgraph as wg
from wgraph.errors import CheckpointError
from wgraph.models import Llama, LlamaConfig
from wgraph.models.random_checkpoint import random_weights, stored_values, tiny_config, write_checkpoint

import llama_reference as ref
from llama_reference import rel_err
from thread_runner import run_together

PROMPT = [3]          # its greedy continuation under seed 0 varies (no fixed point within 16 tokens)
STEPS = 16


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(config dict, f32 weights, checkpoint path) of the default tiny model."""
    cfg = tiny_config()
    w = random_weights(cfg, seed=0)
    return cfg, w, write_checkpoint(tmp_path_factory.mktemp("tiny"), cfg, w)


@pytest.fixture(scope="module")
def model32(tiny, dev):
    return Llama.from_pretrained(tiny[2], dev, dtype="f32", max_seq=64)


def test_prefill_and_greedy_decode_match_reference_f32(tiny, model32):
    cfg, w, _ = tiny
    prompt = [3, 14, 15, 92, 65]
    logits = model32.prefill(prompt, all_logits=True).numpy()
    assert rel_err(logits, ref.forward(cfg, w, prompt)) < 1e-4
    want_ids, want_logits = ref.greedy(cfg, w, prompt, STEPS + 1)
    st = model32.program.state
    assert (st("token").numpy()[0], st("pos").numpy()[0], st("kv_len").numpy()[0]) == (want_ids[0], 5, 6)
    for i in range(STEPS):  # step i consumes id i and yields the logits id i + 1 was chosen from
        assert rel_err(model32.step().numpy()[0], want_logits[i + 1]) < 1e-4, f"step {i}"
    assert st("history").numpy()[5:5 + STEPS + 1].tolist() == want_ids


def test_positions_past_max_position_embeddings_as_transformers_computes_them(tiny, dev):
    """max_seq may exceed the config's max_position_embeddings (docs/models.md): RoPE goes on past the trained
    context as transformers' rotary embedding does (positions are not clipped, wrapped or refused), so prompt and
    decode steps at positions 8..23 of a model trained for 8 match the float64 reference there; the cache's end
    is a LimitError."""
    cfg = dict(tiny[0], max_position_embeddings=8)
    w = tiny[1]
    model = Llama.from_weights(LlamaConfig.from_dict(cfg), w, dev, dtype="f32", max_seq=24)
    assert model.max_seq == 24 and model.rope_tables()[0].shape[0] == 24
    prompt = [3, 14, 15, 92, 65, 35, 89, 79, 32, 38]   # positions 0..9: past 8 already
    assert rel_err(model.prefill(prompt, all_logits=True).numpy(), ref.forward(cfg, w, prompt)) < 1e-4
    want_ids, want_logits = ref.greedy(cfg, w, prompt, 15)
    for i in range(14):   # step i consumes the id at position 10 + i and appends its K/V row there: up to row 23
        assert rel_err(model.step().numpy()[0], want_logits[i + 1]) < 1e-4, f"step {i}"
    assert model.program.state("history").numpy()[10:24].tolist() == want_ids[:14]
    with pytest.raises(wg.LimitError, match=r"step: 1 decode steps from position 24 pass the KV cache of 24"):
        model.step()


def test_one_submit_and_no_readback_per_token(model32, dev):
    n, every = 12, 4
    before = dev.stats.snapshot()
    ids = model32.generate(PROMPT, n, read_every=every)
    d = dev.stats.since(before)
    reads = n // every
    assert len(ids) == n
    assert d.readbacks == reads
    # one submit for the prompt; the 11 further tokens run between reads as 3 + 4 + 4 steps, 4 steps a submit
    # (STEPS_PER_SUBMIT): 1 + 1 + 1; one submit per read (the copy to the staging buffer)
    assert d.submits == 1 + 3 + reads
    # the decode steps alone: 4 a submit, nothing read, created or planned; per_submit=1: a submit each
    before = dev.stats.snapshot()
    model32.run_steps(6, in_flight=2)
    d = dev.stats.since(before)
    assert (d.submits, d.readbacks, d.dispatches) == (2, 0, 6 * len(model32.program.rows))
    before = dev.stats.snapshot()
    model32.run_steps(6, in_flight=2, per_submit=1)
    assert dev.stats.since(before).submits == 6
    assert (d.pipelines_created, d.bind_groups_created, d.buffers_created) == (0, 0, 0)


def test_same_ids_for_any_in_flight_and_read_every(tiny, model32):
    cfg, w, _ = tiny
    want, _ = ref.greedy(cfg, w, PROMPT, STEPS)
    assert len(set(want)) > 3  # a sequence that actually changes
    for in_flight, every in ((1, None), (8, None), (8, 5), (3, 1)):
        assert model32.generate(PROMPT, STEPS, in_flight=in_flight, read_every=every) == want, (in_flight, every)


def test_stop_ids_cut_after_the_first_stop(tiny, model32):
    cfg, w, _ = tiny
    want, _ = ref.greedy(cfg, w, PROMPT, STEPS)
    stop = want[6]
    first = want.index(stop)
    for every in (1, 4, None):
        assert model32.generate(PROMPT, STEPS, stop_ids=[stop], read_every=every) == want[:first + 1]
    # the prefill's own token can be the stop
    assert model32.generate(PROMPT, STEPS, stop_ids=[want[0]], read_every=3) == want[:1]


def test_stops_at_the_first_of_several_and_not_in_the_prompt(tiny, model32):
    """Of several stop ids the first generated one ends it (kept); a stop id in the prompt stops nothing; a
    prompt plus max_new_tokens filling max_seq exactly decodes to the last history row."""
    cfg, w, _ = tiny
    want, _ = ref.greedy(cfg, w, PROMPT, STEPS)
    late, early = want[7], want[4]
    first = min(want.index(late), want.index(early))
    for every in (1, 3, None):
        assert model32.generate(PROMPT, STEPS, stop_ids=[late, early], read_every=every) == want[:first + 1]
    prompt = PROMPT + want[:3]                               # holds want[1], not made again soon after
    cont, _ = ref.greedy(cfg, w, prompt, 6)
    stop = next(t for t in prompt if t not in cont)
    assert model32.generate(prompt, 6, stop_ids=[stop], read_every=1) == cont
    full = [5] * (64 - 10)                                   # 54 + 10 = max_seq
    assert model32.generate(full, 10, read_every=4, in_flight=50) == ref.greedy(cfg, w, full, 10)[0]
    model32.device.check_errors()
    assert model32.program.state("pos").numpy()[0] == 63


def test_sampled_ids_are_the_draws_of_the_float64_logits(tiny, model32, dev):
    """Each sampled id is sample()'s draw from the float64 reference's logits of the ids so far (as f32), keyed
    by the position of the token the logits came from: the prefill's draw and each decode step's."""
    cfg, w, _ = tiny
    for temperature, top_k, top_p, seed in ((1.0, 0, 1.0, 5), (0.8, 10, 0.9, 2**63)):
        got = model32.generate(PROMPT, 8, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                               read_every=3)
        ids = list(PROMPT)
        for _ in range(8):
            logits = ref.forward(cfg, w, ids)[-1:].astype(np.float32)
            ids.append(int(wg.ops.sample(dev.tensor(logits), temperature=temperature, top_k=top_k, top_p=top_p,
                                         seed=seed, step=len(ids) - 1).numpy()[0]))
        assert got == ids[len(PROMPT):], (temperature, got, ids)


def test_generate_checks_its_arguments(model32):
    with pytest.raises(wg.LimitError, match=r"generate: prompt_ids holds token id 100, outside the vocabulary"):
        model32.generate([1, 100], 4)
    with pytest.raises(wg.ArgumentError, match=r"generate: stop_ids=\[5, 100\] must be"):   # never matched
        model32.generate([1], 4, stop_ids=[5, 100])
    with pytest.raises(wg.LimitError, match="exceed the KV cache of 64"):
        model32.generate([1] * 60, 5)
    with pytest.raises(wg.ArgumentError, match=r"generate: in_flight=0 must be an integer in \[1, "):
        model32.generate([1], 4, in_flight=0)
    model32.generate([1], 2)
    assert model32.generate([1], 0) == [] and model32.last_stats["tokens"] == 0   # not the call before's


@pytest.mark.parametrize("case", ["bf16_sharded", "tied", "llama3_rope", "bf16_model", "partial_rotary",
                                  "interleaved_partial"])
def test_checkpoint_variants_match_reference(case, tmp_path, dev):
    storage, shards, over, dtype = "f32", 1, {}, "f32"
    if case == "bf16_sharded":
        storage, shards = "bf16", 3
    elif case == "partial_rotary":  # RoPE on the first 12 of 16 dims per head (rotate-half within them); config.json's
        over = {"partial_rotary_factor": 0.75}  # partial_rotary_factor is refused, so the config is built
    elif case == "interleaved_partial":  # GPT-J pairs: no config.json key means it, so the config is built
        over = {"partial_rotary_factor": 0.5, "rope_interleaved": True}
    elif case == "bf16_model":  # an f32 checkpoint loaded as bf16: matrices rounded to bf16, norms kept f32
        dtype = "bf16"
    elif case == "tied":
        over = {"tie_word_embeddings": True}
    else:  # a short original context so that positions up to 40 fall into all three frequency bands
        over = {"rope_theta": 500000.0,
                "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 32}}
    cfg = tiny_config(**over)
    plain = {k: v for k, v in cfg.items() if k not in ("rope_interleaved", "partial_rotary_factor")}
    w = random_weights(plain, seed=1)
    stored = {k: stored_values(v, "bf16" if dtype == "bf16" and v.ndim == 2 else storage) for k, v in w.items()}
    if "partial_rotary_factor" in cfg:  # the reference reads the factor; the config is built with its rotary_dim
        config = attrs.evolve(LlamaConfig.from_dict(plain), rope_interleaved=bool(cfg.get("rope_interleaved")),
                              rotary_dim=int(cfg["head_dim"] * cfg["partial_rotary_factor"]))
        model = Llama.from_weights(config, w, dev, dtype=dtype, max_seq=48)
    else:
        path = write_checkpoint(tmp_path, cfg, w, storage=storage, shards=shards)
        model = Llama.from_pretrained(path, dev, dtype=dtype, max_seq=48)
    prompt = list(range(7, 47))
    assert rel_err(model.prefill(prompt, all_logits=True).numpy(), ref.forward(cfg, stored, prompt)) < 1e-4
    want_ids, want_logits = ref.greedy(cfg, stored, prompt, 3)
    for i in range(2):
        assert rel_err(model.step().numpy()[0], want_logits[i + 1]) < 1e-4
    assert model.program.state("history").numpy()[40:43].tolist() == want_ids


def test_f16_weights_greedy_ids_where_the_margin_is_clear(tiny, dev):
    if not dev.caps.has_f16:
        pytest.skip("no shader-f16")
    cfg, w, path = tiny
    model = Llama.from_pretrained(path, dev, dtype="f16", max_seq=64)
    w16 = {k: stored_values(v, "f16") for k, v in w.items()}
    got = model.generate(PROMPT, STEPS)
    ids, compared = list(PROMPT), 0
    for t in got:
        exact, rounded = ref.forward(cfg, w, ids)[-1], ref.forward(cfg, w16, ids)[-1]
        bound = 2 * np.max(np.abs(rounded - exact)) + 1e-3  # what rounding the weights to f16 moves the logits
        top2 = np.sort(exact)[-2:]
        if top2[1] - top2[0] <= bound:
            break  # a near-tie: f16 may pick the other one and the sequences part
        assert t == int(np.argmax(exact)), f"token {compared}"
        ids.append(t)
        compared += 1
    assert compared >= 8, f"only {compared} tokens had a clear margin"


def test_bad_checkpoints_name_the_tensor_or_field(tmp_path, dev):
    cfg = tiny_config()
    w = random_weights(cfg)
    name = "model.layers.1.mlp.down_proj.weight"
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.")):
        Llama.from_pretrained(write_checkpoint(tmp_path / "a", cfg, {k: v for k, v in w.items() if k != name}), dev,
                              dtype="f32")
    bad = dict(w, **{name: w[name][:, :64]})
    with pytest.raises(CheckpointError, match=r"down_proj.*shape \[64, 64\].*\[64, 128\]"):
        Llama.from_pretrained(write_checkpoint(tmp_path / "b", cfg, bad), dev, dtype="f32")
    with pytest.raises(CheckpointError, match=r"model\.layers\.0\.self_attn\.q_proj\.bias' is missing"):
        Llama.from_pretrained(write_checkpoint(tmp_path / "c", tiny_config(attention_bias=True), w), dev, dtype="f32")
    with pytest.raises(CheckpointError, match="lm_head.weight"):  # untied without an lm_head
        no_head = {k: v for k, v in w.items() if k != "lm_head.weight"}
        Llama.from_pretrained(write_checkpoint(tmp_path / "d", cfg, no_head), dev, dtype="f32")


def test_sampling_reproducible_by_seed_and_switches_back_to_greedy(tiny, model32):
    cfg, w, _ = tiny
    greedy, _ = ref.greedy(cfg, w, PROMPT, STEPS)
    a = model32.generate(PROMPT, STEPS, temperature=1.5, top_k=40, top_p=0.95, seed=7, in_flight=8)
    b = model32.generate(PROMPT, STEPS, temperature=1.5, top_k=40, top_p=0.95, seed=7, in_flight=1, read_every=5)
    c = model32.generate(PROMPT, STEPS, temperature=1.5, top_k=40, top_p=0.95, seed=8)
    assert a == b and a != c and a != greedy
    assert all(0 <= t < cfg["vocab_size"] for t in a + c)
    # top_k=1 keeps only the largest logit: the greedy ids, through the sampling program
    assert model32.generate(PROMPT, STEPS, temperature=0.7, top_k=1, seed=3) == greedy
    assert model32.generate(PROMPT, STEPS) == greedy  # back to the argmax program, weights intact


def test_model_arguments_are_checked_not_truncated(tiny, model32, dev):
    """max_seq=0 became the default and 10.9 became 10; generate(..., 2.7) made 2 tokens; in_flight=1.5 ran as 1;
    stop_ids=[15.5] stopped at 15; stop_ids=None / "ab" / 5 and in_flight=None raised raw Python errors. Each now
    raises an ArgumentError naming the argument and the value, before any GPU work."""
    for max_seq in (0, 10.9, "64", True, 2**21):
        with pytest.raises(wg.ArgumentError, match=rf"Llama.from_pretrained: max_seq={max_seq!r} must be an integer "
                                                   rf"in \[2, 1048576\] or None"):
            Llama.from_pretrained(tiny[2], dev, dtype="f32", max_seq=max_seq)
    before = dev.stats.snapshot()
    bad = [(dict(max_new_tokens=2.7), "max_new_tokens=2.7 must be an integer"),
           (dict(in_flight=1.5), "in_flight=1.5 must be an integer"),
           (dict(in_flight=None), "in_flight=None must be an integer"),
           (dict(stop_ids=[15.5]), r"stop_ids=\[15.5\] must be a list of integers"),
           (dict(stop_ids=None), "stop_ids=None must be a list of integers"),
           (dict(stop_ids="ab"), "stop_ids='ab' must be a list of integers"),
           (dict(stop_ids=5), "stop_ids=5 must be a list of integers"),
           (dict(read_every=0.5), r"read_every=0.5 must be an integer in \[1, 1048576\] or None"),
           (dict(temperature="0.7"), "temperature='0.7' must be a finite real"),
           (dict(temperature=float("nan")), "temperature=nan must be a finite real"),
           # numpy compared np.float16(inf) <= F32_MAX in f16 (F32_MAX is inf there): generate took it, switched to a
           # sampling program and only then raised, from Program.update, naming program 'llama_decode_sample'
           (dict(temperature=np.float16(np.inf)), r"temperature=np.float16\(inf\) must be a finite real"),
           (dict(top_k=True), "top_k=True must be an integer"),
           (dict(seed=-1), "seed=-1 must be an integer")]
    for kwargs, match in bad:
        call = dict(max_new_tokens=4, **kwargs) if "max_new_tokens" not in kwargs else kwargs
        with pytest.raises(wg.ArgumentError, match=f"generate: {match}"):
            model32.generate([1, 2], **call)
    with pytest.raises(wg.ArgumentError, match=r"prompt_ids=\[1, 2.0\] must be a list of integers"):
        model32.prefill([1, 2.0])
    with pytest.raises(wg.ArgumentError, match=r"run_steps: in_flight=0 must be an integer"):
        model32.run_steps(1, in_flight=0)
    d = dev.stats.since(before)
    assert (d.submits, d.dispatches) == (0, 0)
    assert model32.generate([1, 2], np.int64(3), stop_ids={99}, in_flight=np.int32(2)) == \
        model32.generate([1, 2], 3, stop_ids=[99], in_flight=2)


def test_prefill_checks_its_sample_settings_before_switching_programs(tiny, model32, dev):
    """prefill(sample=SampleSettings(nan, ...)) (or temperature 0, top_k -1, seed -5) switched the model to a new
    sampling program (empty caches, position 0) and only then raised, naming program 'llama_decode_sample' and a
    node; the next step() ran without an error from position 0 with temperature 1: history [0, 60, 15, 44] where
    the greedy decode it interrupted goes on [3, 35, 13, 77]. Each field is now checked first, the model as it
    was."""
    from wgraph.ops.sampling import SampleSettings

    cfg, w, _ = tiny
    want, _ = ref.greedy(cfg, w, PROMPT, 6)
    model32.prefill(PROMPT)
    model32.step()
    before = dev.stats.snapshot()
    for bad, match in [(SampleSettings(float("nan"), 0, 1.0, 0), r"sample\.temperature=nan must be a finite real"),
                       (SampleSettings(0.0, 0, 1.0, 0), r"sample\.temperature=0\.0 must be a finite real in \(0, "),
                       (SampleSettings(1.0, -1, 1.0, 0), r"sample\.top_k=-1 must be an integer"),
                       (SampleSettings(1.0, 0, 0.0, 0), r"sample\.top_p=0\.0 must be a finite real in \(0, 1\]"),
                       (SampleSettings(1.0, 0, 1.0, -5), r"sample\.seed=-5 must be an integer"),
                       (SampleSettings(True, 0, 1.0, 0), r"sample\.temperature=True must be a finite real")]:
        with pytest.raises(wg.ArgumentError, match=rf"^prefill: {match}"):
            model32.prefill([5, 6], sample=bad)
    assert dev.stats.since(before).submits == 0 and not model32.sampling
    for _ in range(4):
        model32.step()
    assert model32.program.state("history").numpy()[:len(PROMPT) + 6].tolist() == list(PROMPT) + want


def test_one_generation_at_a_time_on_a_model(tiny, model32):
    """Two threads generating on one model interleaved their steps on its caches and position (wrong ids, or a
    GpuValueError naming a position); each call now runs whole. After a sampled run, prefill(sample=None) and the
    steps after it are greedy again (the steps kept sampling)."""
    cfg, w, _ = tiny
    want, _ = ref.greedy(cfg, w, PROMPT, STEPS)
    got = run_together(2, lambda _: [model32.generate(PROMPT, STEPS, read_every=2) for _ in range(2)])
    assert got == [[want] * 2] * 2
    model32.generate(PROMPT, 4, temperature=0.9, seed=3)
    model32.prefill(PROMPT)
    for _ in range(STEPS - 1):
        model32.step()
    assert model32.program.state("history").numpy()[:len(PROMPT) + STEPS].tolist() == list(PROMPT) + want


def test_steps_past_the_cache_are_refused_on_the_host(tiny, model32, dev):
    """After a prefill of 62 ids (max_seq 64), run_steps(3) submitted a step at position 64: the GPU flagged it and
    the NEXT readback raised a GpuValueError, here a correct generate's, whose ids were lost. The host knows the
    position: a LimitError names it, before any GPU work; the 2 steps that fit run, the step after them is
    refused; a following generate gives the reference's ids."""
    cfg, w, _ = tiny
    prompt = list(range(1, 63))
    model32.prefill(prompt)
    before = dev.stats.snapshot()
    with pytest.raises(wg.LimitError, match=r"run_steps: 3 decode steps from position 62 pass the KV cache of 64 "
                                            r"positions \(max_seq\): at most 2 fit"):
        model32.run_steps(3)
    assert dev.stats.since(before).submits == 0
    model32.run_steps(2)   # positions 62 and 63: the last row of the cache
    with pytest.raises(wg.LimitError, match=r"step: 1 decode steps from position 64 pass .* at most 0 fit"):
        model32.step()
    assert model32.generate(PROMPT, 4) == ref.greedy(cfg, w, PROMPT, 4)[0]


def test_a_step_before_any_prefill_is_refused(tiny, dev):
    """A fresh model's step() ran from token 0 at position 0 with kv_len 0: its attention read no key, its logits were
    those of no sequence (1.27 relative error from the float64 logits of the prompt [0]) and its id went into the
    history, with no error. The decode state is empty until a prefill: step and run_steps now say so before any
    GPU work, and the model decodes as ever once a prompt is prefilled."""
    from wgraph.models.quantized import QuantizedLlama, quantize_checkpoint

    cfg, w, _ = tiny
    small = tiny_config(hidden_size=32, intermediate_size=64, head_dim=8, vocab_size=64)
    sw = random_weights(small, seed=2)
    models = [Llama.from_weights(LlamaConfig.from_dict(cfg), w, dev, dtype="f32", max_seq=8),
              QuantizedLlama.from_weights(LlamaConfig.from_dict(small), quantize_checkpoint(sw, "Q8_0"), dev,
                                          max_seq=8)]
    for model in models:
        before = dev.stats.snapshot()
        with pytest.raises(wg.RecordingError, match=r"^step: no prompt was prefilled on this model: .*call "
                                                    r"prefill\(prompt_ids\) first"):
            model.step()
        with pytest.raises(wg.RecordingError, match=r"^run_steps: no prompt was prefilled"):
            model.run_steps(2)
        assert dev.stats.since(before).submits == 0
        assert model.run_steps(0) == 0.0   # no step: nothing to refuse
    model = models[0]
    want_ids, want_logits = ref.greedy(cfg, w, PROMPT, 3)
    model.prefill(PROMPT)
    assert rel_err(model.step().numpy()[0], want_logits[1]) < 1e-4
    model.run_steps(1)
    assert model.program.state("history").numpy()[:4].tolist() == PROMPT + want_ids


def test_a_failed_prefill_leaves_no_half_state_to_step_from(tiny, dev, monkeypatch):
    """prefill wrote the new prompt's position and history before its recording; where the recording then failed (a
    lost device, an op's limit, an interrupt), the host kept counting the prompt before it, and step() decoded
    from the new position over the old prompt's caches and token: logits of no sequence, no error. After a failed
    prefill the model now refuses steps until a prefill succeeds, which decodes as the reference does."""
    cfg, w, _ = tiny
    model = Llama.from_weights(LlamaConfig.from_dict(cfg), w, dev, dtype="f32", max_seq=16)
    model.prefill([7, 8, 9, 10, 11, 12])
    model.step()

    def fail(*_args, **_kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(model, "_logits", fail)   # the recording fails after the prompt's position and history are written
        with pytest.raises(KeyboardInterrupt):
            model.prefill(PROMPT)
    with pytest.raises(wg.RecordingError, match=r"^step: no prompt was prefilled"):
        model.step()
    want_ids, want_logits = ref.greedy(cfg, w, PROMPT, 3)
    model.prefill(PROMPT)
    assert rel_err(model.step().numpy()[0], want_logits[1]) < 1e-4


def test_each_generate_starts_afresh_whatever_the_prompts_spelling(tiny, model32):
    """A second generate (or prefill) sees nothing of the first's KV rows, position or history: a long prompt then a
    short one gives the short one's reference ids, its prefill logits too; a prompt given as an int64 or uint32 array
    or a list of numpy integers is the same prompt; a 2-D array, a negative id and an id past the vocabulary are
    refused naming them."""
    cfg, w, _ = tiny
    long, short = list(range(20, 60)), [9, 4]
    assert model32.generate(long, 5) == ref.greedy(cfg, w, long, 5)[0]
    want = ref.greedy(cfg, w, short, 6)[0]
    for spelling in (short, np.array(short, np.int64), np.array(short, np.uint32), [np.int16(9), np.uint64(4)]):
        assert model32.generate(spelling, 6) == want
    model32.generate(long, 3)
    assert rel_err(model32.prefill(short, all_logits=True).numpy(), ref.forward(cfg, w, short)) < 1e-4
    assert model32.program.state("history").numpy()[:3].tolist() == short + want[:1]
    for bad, error, match in [(np.array([short]), wg.ArgumentError, r"prompt_ids=array\(\[\[9, 4\]\]\) must be a list"),
                              ([9, -1], wg.ArgumentError, r"prompt_ids=\[9, -1\] must be a list of integers in \[0, "),
                              ([9, 100], wg.LimitError, r"prompt_ids holds token id 100, outside the vocabulary "
                                                        r"\[0, 100\)")]:
        with pytest.raises(error, match=r"^generate: " + match):
            model32.generate(bad, 2)


def _unblocked_tables(n: int, inv: np.ndarray, dtype) -> tuple[bytes, bytes]:
    """The reference: the whole float64 angle array at once, cos and sin rounded once to dtype."""
    angles = np.arange(n, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(angles).astype(dtype).tobytes(), np.sin(angles).astype(dtype).tobytes()


class _RopeOnly:
    """What Llama.rope_tables reads: max_seq and config.inv_freq() (a Llama-3-like 0.5 ** i spread)."""

    def __init__(self, max_seq: int, inv: np.ndarray):
        self.max_seq, self.config = max_seq, attrs.make_class("C", [])()
        self.config.inv_freq = lambda: inv


@pytest.mark.parametrize("n, block", [(5, None), (23, 7), (21, 7), (65536 + 3, None)])
def test_rope_tables_in_position_blocks_equal_the_whole_float64_tables(monkeypatch, n, block):
    """Llama.rope_tables and ops.rope_tables build the tables in blocks of positions (the whole float64 angle, cos
    and sin at max_seq 2**20, head_dim 256 were ~3 GB of temporaries): the bytes are the unblocked ones, at sizes
    within one block, crossing blocks with a tail, ending on a block's edge, and past the real block size."""
    from wgraph.ops import dense

    if block is not None:
        monkeypatch.setattr(dense, "ROPE_BLOCK_ROWS", block)
    inv = 0.5 ** np.arange(4, dtype=np.float64) * 1.3
    cos, sin = Llama.rope_tables(_RopeOnly(n, inv))
    assert cos.dtype == sin.dtype == np.float32 and cos.shape == sin.shape == (n, 4)
    assert (cos.tobytes(), sin.tobytes()) == _unblocked_tables(n, inv, np.float32)
    theirs = 10000.0 ** (-np.arange(0, 3, dtype=np.float64) * 2.0 / 6)
    for dtype in (np.float16, np.float32, np.float64):
        c, s = wg.ops.rope_tables(n, 6, dtype=dtype)
        assert (c.tobytes(), s.tobytes()) == _unblocked_tables(n, theirs, dtype)


def test_rope_tables_temporaries_are_one_block(monkeypatch):
    """With blocks of 64 positions the float64 temporaries are 64 x 16 x 8 bytes at a time, whatever max_seq: the
    peak allocation is the two f32 tables and little more (it held three 512 KB float64 arrays)."""
    import tracemalloc

    from wgraph.ops import dense

    monkeypatch.setattr(dense, "ROPE_BLOCK_ROWS", 64)
    inv = 0.9 ** np.arange(16, dtype=np.float64)
    model = _RopeOnly(4096, inv)
    tracemalloc.start()
    try:
        cos, sin = Llama.rope_tables(model)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak - cos.nbytes - sin.nbytes < 64 * 1024, peak
    assert (cos.tobytes(), sin.tobytes()) == _unblocked_tables(4096, inv, np.float32)
