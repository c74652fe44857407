"""llama.cpp's K-quant file types (its quantizer's presets Q3_K_S .. Q5_K_M) for a dense Llama: which block format
each matrix of a checkpoint gets, as llama.cpp's `llama_tensor_get_type` chooses it without an importance matrix
(not Falcon, no experts; its rule for 70B models aside), then its fallback for a matrix whose rows are not whole
blocks of that format. The presets named as a block format (Q2_K, IQ4_XS, Q4_0, ...) are that format for every
matrix here (llama.cpp's `--pure`). `models.quantized.checkpoint_formats` applies it to HF-named weights."""

from __future__ import annotations

from wgraph.ggml_blocks import FORMATS

# file type -> the format of the matrices no rule below raises (llama_ftype_get_default_type)
FILE_TYPES = {"Q3_K_S": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_L": "Q3_K", "Q4_K_S": "Q4_K", "Q4_K_M": "Q4_K",
              "Q5_K_S": "Q5_K", "Q5_K_M": "Q5_K"}
# a format whose block does not divide the rows -> llama.cpp's fallback (tensor_type_fallback)
FALLBACK = {"Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
ROLES = ("output", "attn_v", "ffn_down", "attn_output", "other")


def use_more_bits(layer: int, layers: int) -> bool:
    """llama.cpp's use_more_bits: the first and last eighth of the layers and every third one between."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def _chosen(file_type: str, role: str, layer: int, layers: int, in_features: int) -> str:
    """The format llama_tensor_get_type_impl picks (before the fallback)."""
    t = file_type
    if role == "output":   # lm_head, or the token table when it is the output too
        return "Q8_0" if in_features % 256 else "Q6_K"
    if role == "attn_v":
        if t == "Q3_K_M":
            return "Q5_K" if layer < 2 else "Q4_K"
        if t == "Q3_K_L":
            return "Q5_K"
        if t in ("Q4_K_M", "Q5_K_M") and use_more_bits(layer, layers):
            return "Q6_K"
        if t == "Q4_K_S" and layer < 4:
            return "Q5_K"
    elif role == "ffn_down":
        if t == "Q3_K_M":   # llama.cpp: use_more_bits only decides it for Falcon
            return "Q5_K" if layer < layers // 16 else "Q4_K"
        if t == "Q3_K_L":
            return "Q5_K"
        if t in ("Q4_K_M", "Q5_K_M") and use_more_bits(layer, layers):
            return "Q6_K"
        if t == "Q4_K_S" and layer < layers // 8:
            return "Q5_K"
    elif role == "attn_output" and t in ("Q3_K_M", "Q3_K_L"):
        return "Q4_K" if t == "Q3_K_M" else "Q5_K"
    return FILE_TYPES[t]


def tensor_format(file_type: str, role: str, layer: int, layers: int, in_features: int) -> str | None:
    """The block format of one matrix in a `file_type` file: `role` one of ROLES, `layer` its layer of `layers`
    (the attn_v and ffn_down rules count them); None where neither the format nor its fallback's block divides
    `in_features` (llama.cpp keeps such a matrix F16)."""
    fmt = _chosen(file_type, role, layer, layers, in_features)
    if in_features % FORMATS[fmt].block_weights:
        fmt = FALLBACK.get(fmt, fmt)
    return None if in_features % FORMATS[fmt].block_weights else fmt
