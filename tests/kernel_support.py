"""Which registry variants a test device can run: by the features the registry says a variant needs, not by
its name (prefill_flash_* needs subgroups without saying so in its name)."""

from wgraph.kernels.registry import registry
from wgraph.ops.gemv import device_refusal


def lacks_subgroups(dev, variant: str | None) -> bool:
    """True when `variant` needs the subgroup feature and the device has none (None: the planner picks)."""
    return variant is not None and "subgroup" in registry()[variant].features and not dev.caps.has_subgroups


def cannot_run(dev, variant: str) -> str | None:
    """Why the device cannot run `variant` (a feature it lacks, more workgroup memory, threads or storage buffers
    than it has: gemv.device_refusal, which reads any kernel), or None. A test that forces a kernel skips with it
    on such a device (WebGPU's default 16 KiB of workgroup memory holds neither split-K decode, 16.5 KB, nor the
    GEMM-shaped flash kernels, 30 KB), where the planner takes another kernel and a forced one is refused with
    LimitError."""
    why = device_refusal(registry()[variant], dev.caps)
    return f"{variant} {why}" if why else None


def skip_unless_runs(dev, *variants: str) -> None:
    """pytest.skip when the device cannot run one of `variants` (see cannot_run)."""
    import pytest

    for v in variants:
        why = cannot_run(dev, v)
        if why:
            pytest.skip(why)


F16_TAGS = ("f16", "f16kv", "f16w")   # the suffixes of kernel names (and test parameters) that mean f16 data


def skip_unless_f16(dev, *dtypes, why: str = "") -> None:
    """pytest.skip when the device lacks shader-f16 and a dtype of `dtypes` is f16 (wgraph's name or numpy's or
    torch's spelling, or a kernel name's tag: f16kv, f16 K and V, and f16w, f16 weights; none given: the test needs
    f16 regardless). bf16 is stored in u32 words and needs no feature.
    why: what needs f16 where no dtype says so (quantized KV caches store f16 scales), added to the reason.
    A test of the refusal itself (UnsupportedError on such a device) must not call it."""
    import pytest

    from wgraph import args

    if dev.caps.has_f16:
        return
    if not dtypes or any(d in F16_TAGS or args.dtype_name_of(d) == "f16" for d in dtypes):
        why = f" ({why})" if why else ""
        pytest.skip(f"needs the shader-f16 feature, which {dev.caps.adapter_name!r} lacks{why}")


QUANT_SCALES = "quantized KV caches store f16 scales"   # skip_unless_f16's why for kv_quantize and the quantized caches
TIERED_HOT = "the tiered cache's hot ring is f16"
BDPA_BASIS = "bdpa's basis and residual scales are f16"


def f16_or_f32(dev):
    """np.float16 where the device has shader-f16, else np.float32 (wgraph takes numpy's spelling of a dtype): for a
    test whose dtype is not its point (a layout, an error message, a graph), so that it runs on a device without the
    feature too, and as before on one with it."""
    import numpy as np

    return np.float16 if dev.caps.has_f16 else np.float32
