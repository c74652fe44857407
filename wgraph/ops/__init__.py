"""Op functions. Each takes tensors (immediate or recorded) or graph values (a node) the same way."""

from wgraph.ops.attention import AttentionParams, KernelPath, attention, attention_plan, kernel_path
from wgraph.ops.attention_planner import KernelPlan
from wgraph.ops.attention_batched import attention_kvcache, attention_varlen, seqlens_advance
from wgraph.ops.elementwise import add, geglu, gelu, mul, scale, silu, softcap, swiglu
from wgraph.ops.dense import linear, reshape, rope, rope_tables
from wgraph.ops.embedding import embedding
from wgraph.ops.norms import add_rmsnorm, layernorm, rmsnorm
from wgraph.ops.rows import softmax
from wgraph.ops.quantized import embedding_q, linear_q, plan_linear_q
from wgraph.ops.sampling import argmax, sample
from wgraph.ops.kv_cache import QuantizedKV, kv_append, kv_append_quantized, kv_dequantize, kv_quantize
from wgraph.ops.tiered import tiered_attention, tiered_quant_attention
from wgraph.ops.tiered_cache import TieredKVCache
from wgraph.ops.decode import decode_advance
from wgraph.ops.decode_batched import decode_advance_batched
from wgraph.ops.rope_kv import rope_kv_append
from wgraph.ops.linear_rope_kv import linear_rope_kv_append
from wgraph.ops.rope_kv_batched import rope_kv_append_batched
from wgraph.ops.bdpa import BDPACache, bdpa_attention, bdpa_decompose
from wgraph.ops.sdpa import sdpa, transpose01

__all__ = [
    "AttentionParams", "BDPACache", "KernelPath", "KernelPlan", "QuantizedKV", "TieredKVCache", "add", "add_rmsnorm",
    "argmax", "attention", "attention_kvcache", "attention_plan", "attention_varlen", "bdpa_attention",
    "bdpa_decompose", "decode_advance", "decode_advance_batched", "embedding", "embedding_q", "geglu", "gelu", "kernel_path", "kv_append", "kv_append_quantized",
    "kv_dequantize", "kv_quantize", "layernorm", "linear", "linear_q", "linear_rope_kv_append", "mul",
    "plan_linear_q", "reshape", "rmsnorm", "rope", "rope_kv_append", "rope_kv_append_batched",
    "rope_tables",
    "sample", "scale", "sdpa", "seqlens_advance", "silu", "softcap", "softmax", "swiglu", "tiered_attention",
    "tiered_quant_attention", "transpose01",
]
