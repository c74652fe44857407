"""How many dispatches a decoder's step takes, from the attention plan table rather than from running it: the
decode attention is one dispatch where the planner picks a one-pass kernel for the storage (an H100 over a short
cache) and two (chunks + combine) where it picks split-K (lavapipe), so a fixed count holds on one device only."""

import wgraph as wg
from wgraph.tensor import TensorSpec


def decode_attention_plan(model, layer: int, rows: int):
    """The KernelPlan attention_plan gives layer `layer`'s decode attention of `model` on its device: q [1, Hq, D]
    (f32) over K/V storage of `rows` positions in the model's cache dtype, kv_len on the GPU."""
    c = model.config
    cache = model.program.state(f"l{layer}.k_cache")
    kv = TensorSpec((rows, *cache.shape[1:]), cache.dtype)
    return wg.ops.attention_plan(TensorSpec((1, c.num_attention_heads, c.head_dim), "f32"), kv, kv, causal=True,
                                 kv_len=TensorSpec((1,), "u32"), scale=c.attention_scale,
                                 sliding_window=c.window(layer), softcap=c.attn_softcap, caps=model.device.caps)


def step_dispatches(model, position: int, per_layer: int = 4, per_step: int = 4) -> int:
    """Dispatches of one decode step at `position`: in each layer `per_layer` fused ops (norm + qkv GEMV with RoPE
    and the K/V append in its epilogue, o_proj + residual, norm + gate_up + swiglu, down + residual) and its
    attention's plan (over the short program's short_rows rows below them, else the whole cache), then `per_step`
    (embedding, norm + lm_head, argmax, decode_advance)."""
    rows = model.short_rows if model.short_rows is not None and position < model.short_rows else model.max_seq
    return per_step + sum(per_layer + len(decode_attention_plan(model, i, rows).dispatches)
                          for i in range(model.config.num_hidden_layers))


def whole_cache_attention_variants(model) -> list[str]:
    """The variants the plan table dispatches for every layer's attention over the whole cache, in order: what
    the model's program rows of op 'attention' must be (so the plans above are the model's own arguments')."""
    return [v for i in range(model.config.num_hidden_layers)
            for v, _ in decode_attention_plan(model, i, model.max_seq).dispatches]
