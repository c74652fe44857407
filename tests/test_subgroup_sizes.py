"""The subgroup kernels at subgroup sizes other than lavapipe's default 8: WebGPU leaves the size to the device
(4 to 128: Mali 4-16, Intel 8-32 chosen per pipeline, Apple 32, AMD 32/64), and the kernels read it at run time
(gemv_entry_subgroup.wgsl: below SG_FLOOR = 8 lanes the sums go through workgroup memory; the subgroup decode
counts its lanes with subgroupAdd). lavapipe's subgroups are its SIMD width / 32 lanes, set by
LP_NATIVE_VECTOR_WIDTH at process start: 128 bits give 4 lanes, 512 bits 16; a subprocess runs the kernels
there and the results are checked here against float64 numpy. Only on lavapipe (the adapter name says its
width). The GPU-tuned fused / one-pass decode kernels compile for tens of seconds on lavapipe, too slow here."""

import os
import subprocess
import sys

import numpy as np
import pytest

from attention_reference import tolerance_check
from linear_reference import fused_linear_reference

CODE = """
import sys
import numpy as np
import wgraph as wg
dev = wg.default_device()
print(dev.caps.adapter_name)
d = dict(np.load(sys.argv[1]))
plan = wg.ops.dense.plan_linear(2, d["w"].shape[0], d["w"].shape[1], "f16", dev.caps, norm=True)
y = wg.ops.linear(dev.tensor(d["x"]), dev.tensor(d["w"]), dev.tensor(d["b"]), norm=dev.tensor(d["norm"]), eps=1e-5)
o = wg.ops.attention(dev.tensor(d["q"]), dev.tensor(d["k"]), dev.tensor(d["v"]), causal=True,
                     variant="decode_subgroup_f32")
np.savez(sys.argv[2], y=y.numpy(), o=o.numpy(), variant=plan.variant)
"""


@pytest.mark.parametrize("bits,lanes", [(128, 4), (512, 16)])
def test_subgroup_kernels_at_lavapipe_subgroup_sizes(dev, rng, tmp_path, bits, lanes):
    if not dev.caps.adapter_name.startswith("llvmpipe"):
        pytest.skip("the subgroup size is set through lavapipe's SIMD width")
    x = (rng.standard_normal((2, 520)) * 2).astype(np.float32)
    w = (rng.standard_normal((37, 520)) / np.sqrt(520)).astype(np.float16)
    b = rng.standard_normal(37).astype(np.float32)
    norm = (1 + 0.2 * rng.standard_normal(520)).astype(np.float32)
    q = rng.standard_normal((1, 4, 80)).astype(np.float32)
    k = rng.standard_normal((33, 2, 80)).astype(np.float32)
    v = rng.standard_normal((33, 2, 80)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, w=w, b=b, norm=norm, q=q, k=k, v=v)
    # no shader cache: a pipeline compiled at another width must not be reused
    env = dict(os.environ, LP_NATIVE_VECTOR_WIDTH=str(bits), MESA_SHADER_CACHE_DISABLE="true")
    run = subprocess.run([sys.executable, "-c", CODE, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert f"{bits} bits" in run.stdout, run.stdout   # lavapipe took the width: subgroups of bits / 32 lanes
    got = np.load(tmp_path / "out.npz")
    assert str(got["variant"]).startswith("gemv_")   # the subgroup GEMV (lavapipe has subgroups)
    exact = fused_linear_reference(x, w, b, norm, None, False, 1e-5, np.float64)
    same_f32 = fused_linear_reference(x, w, b, norm, None, False, 1e-5, np.float32)
    bound = 2 * np.abs(same_f32.astype(np.float64) - exact) + 1e-5 * np.sqrt(520) * (1 + np.abs(exact))
    assert np.all(np.abs(got["y"].astype(np.float64) - exact) <= bound), lanes
    ok, err, base, bound = tolerance_check(got["o"], q, k, v, causal=True, out_dtype=np.float32)
    assert ok, f"decode_subgroup at {lanes} lanes: error {err:.3g} > bound {bound:.3g}"
