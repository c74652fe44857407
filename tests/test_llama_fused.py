"""The Llama decode step on the fused ops (norm + [q; k; v] GEMV, rope_kv_append, o_proj + residual, norm +
[gate; up] + swiglu GEMV, down_proj + residual, norm + lm_head): its logits against the same weights run
through separate ops (rmsnorm, linear, rope, kv_append, add, swiglu) and against the float64 numpy reference,
greedy ids for 64 tokens, 4 dispatches and the attention's plan per layer plus 4 per token (dev.stats), f16 KV
caches for f16 models."""

import numpy as np
import pytest

import wgraph.ops as ops
from wgraph.models import Llama
from wgraph.models.config import LlamaConfig

import llama_reference as ref
from decode_plan import step_dispatches, whole_cache_attention_variants
from llama_reference import rel_err
from kernel_support import skip_unless_f16

PROMPT = [3, 14, 15]


@pytest.fixture(scope="module")
def model(tiny_llama, dev):
    return Llama.from_weights(LlamaConfig.from_dict(tiny_llama[0]), tiny_llama[1], dev, dtype="f32", max_seq=96)


def _unfused_logits(dev, model, ids):
    """Logits of the last id of `ids` from separate ops on the model's weights (f32 caches of its own)."""
    c = model.config
    hq, hkv, d, eps = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rms_norm_eps
    st = model.program.state
    cos, sin = st("rope_cos"), st("rope_sin")
    x = ops.embedding(dev.tensor(np.array(ids, np.uint32)), st("embed"), dtype="f32")
    s = len(ids)
    for i in range(c.num_hidden_layers):
        wqkv = st(f"l{i}.w_qkv").numpy()
        wq, wk, wv = (dev.tensor(a) for a in np.split(wqkv, [hq * d, (hq + hkv) * d]))
        cache = (dev.tensor(np.zeros((model.max_seq, hkv, d), np.float32)),
                 dev.tensor(np.zeros((model.max_seq, hkv, d), np.float32)))
        h = ops.rmsnorm(x, st(f"l{i}.attn_norm"), eps=eps)
        q = ops.rope(ops.linear(h, wq).reshape(s, hq, d), cos, sin, pos=0)
        k = ops.rope(ops.linear(h, wk).reshape(s, hkv, d), cos, sin, pos=0)
        ops.kv_append(cache, k, ops.linear(h, wv).reshape(s, hkv, d), 0)
        o = ops.attention(q, cache[0], cache[1], causal=True, kv_len=s)
        x = ops.add(x, ops.linear(o.reshape(s, hq * d), st(f"l{i}.wo")))
        h = ops.rmsnorm(x, st(f"l{i}.mlp_norm"), eps=eps)
        x = ops.add(x, ops.linear(ops.swiglu(ops.linear(h, st(f"l{i}.w_gate_up"))), st(f"l{i}.w_down")))
    last = ops.rmsnorm(x, st("norm"), eps=eps).numpy()[-1:]
    lm = st("embed") if c.tie_word_embeddings else st("lm_head")
    return ops.linear(dev.tensor(last), lm).numpy()[0]


def test_fused_step_matches_unfused_ops_and_reference(tiny_llama, model, dev):
    cfg, w = tiny_llama
    want_ids, want_logits = ref.greedy(cfg, w, PROMPT, 5)
    model.prefill(PROMPT)
    ids = PROMPT + want_ids[:1]
    for i in range(4):  # step i consumes id i of the continuation and yields the logits id i + 1 comes from
        got = model.step().numpy()[0]
        assert rel_err(got, want_logits[i + 1]) < 1e-4, f"step {i} against float64"
        unfused = _unfused_logits(dev, model, ids)
        assert rel_err(got, unfused.astype(np.float64)) < 1e-4, f"step {i} against the unfused ops"
        ids.append(want_ids[i + 1])


def test_greedy_ids_for_64_tokens(tiny_llama, model):
    cfg, w = tiny_llama
    want, _ = ref.greedy(cfg, w, [3], 64)
    assert len(set(want)) > 3
    assert model.generate([3], 64) == want


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_four_dispatches_and_attention_per_layer_plus_four(tiny_llama, model, dev, dtype):
    skip_unless_f16(dev, dtype)
    m = model if dtype == "f32" else Llama.from_weights(LlamaConfig.from_dict(tiny_llama[0]), tiny_llama[1], dev, dtype="f16",
                                                        max_seq=96)
    m.prefill([3])
    before = dev.stats.snapshot()
    m.run_steps(5, in_flight=2)
    d = dev.stats.since(before)
    # a layer: norm+qkv GEMV with RoPE and the K/V append in its epilogue, o_proj+residual, norm+gate_up+swiglu,
    # down+residual and the attention the plan table gives this device (split-K's chunks and combine on lavapipe,
    # the one-pass kernel over a short cache on a GPU); then embedding, norm+lm_head, argmax, decode_advance
    assert (d.submits, d.dispatches) == (2, sum(step_dispatches(m, p) for p in range(1, 6)))   # 4 + 1 steps a submit
    assert [r.variant for r in m.program.rows if r.op == "attention"] == whole_cache_attention_variants(m)
    ops_run = {r.op for r in m.program.rows}
    assert "linear_rope_kv_append" in ops_run
    assert not ops_run & {"rmsnorm", "add_rmsnorm", "add", "swiglu", "rope", "kv_append", "rope_kv_append"}, ops_run
    cache = m.program.state("l0.k_cache")
    assert cache.dtype == dtype and cache.nbytes == m.max_seq * m.config.num_key_value_heads * m.config.head_dim * (
        2 if dtype == "f16" else 4)
