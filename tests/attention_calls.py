"""One wgraph attention call made from a test case's options, and the same options as the float64 reference's
keyword arguments (tests/attention_reference.py): the test modules that check forced variants share it."""

import numpy as np

import wgraph as wg


def run_attention(dev, variant, q, k, v, opt, page_table):
    """(out tensor, reference kwargs) of `wg.ops.attention` on host arrays q, k, v with case options `opt`: causal
    (default True), start_pos, kv_start, sliding_window, softcap, scale, kv_len; rows (a ring layout), paged (the
    page size: the first rows / paged entries of `page_table`), gpu_kv_len (kv_len as a u32 GPU tensor)."""
    kw = {"causal": opt.get("causal", True)}
    ref = dict(kw)
    for key in ("start_pos", "kv_start", "sliding_window", "softcap", "scale", "kv_len"):
        if key in opt:
            kw[key] = ref[key] = opt[key]
    if opt.get("rows"):
        kw["kv_layout"] = ref["kv_layout"] = "ring"
    if opt.get("paged"):
        table = page_table[: k.shape[0] // opt["paged"]]
        kw.update(kv_layout="paged", page_table=dev.tensor(np.array(table, np.uint32)), page_size=opt["paged"])
        ref.update(kv_layout="paged", page_table=table, page_size=opt["paged"])
    if opt.get("gpu_kv_len"):
        kw["kv_len"] = dev.tensor(np.array([opt["kv_len"]], np.uint32))
    out = wg.ops.attention(dev.tensor(q), dev.tensor(k), dev.tensor(v), variant=variant, **kw)
    return out, ref
