"""What a CPU adapter (Mesa's lavapipe) cannot run: it stops any one shader invocation's loops after
CPU_LOOP_LIMIT iterations in total, silently (docs/lavapipe.md), so an op plans a CPU device so that no
invocation loops past it. Measured: every pass through a loop body counts one and so does the test that
leaves a loop, summed over all loops of the invocation (a loop of n trips costs n + 1); lavapipe unrolls small
constant-trip loops, which then cost nothing, so counts made with `loop` are upper bounds whatever a driver
unrolls. Each kernel family counts its own loop nest with these (attention_loops.py, rows.py, sdpa.py)."""

from __future__ import annotations

import logging

from wgraph.errors import LimitError

log = logging.getLogger(__name__)

CPU_LOOP_LIMIT = 65_535  # Mesa's LP_MAX_TGSI_LOOP_ITERATIONS
# The words every planner's reason uses for a kernel passed over on a CPU adapter (GPU-tuned, or past the loop
# cap): EncodeContext.chose finds those rejections by them to log the CPU fallback.
CPU_DEVICE = "a CPU device"
# Attention on lavapipe ran at 0.15-0.3 GFLOP/s on 2 cores (bench --quick, docs/benchmarks.md): past this much
# work a call takes seconds, and a caller deserves a word before it goes quiet for that long.
CPU_SLOW_FLOPS = 1e9
CPU_ATTENTION_FLOPS_PER_S = 0.3e9


def loop(trips: int, body: int = 0) -> int:
    """Iterations of a loop of `trips` passes whose body runs `body` iterations of inner loops each."""
    return trips + 1 + trips * body


def halvings(n: int) -> int:
    """Trips of `for (s = n / 2; s > 0; s /= 2)` (a workgroup tree reduction over n threads)."""
    return max(0, int(n).bit_length() - 1)


def loop_cap_refusal(caps, count, in_features: int) -> str | None:
    """Why a CPU adapter cannot run a GEMV whose invocations loop `count()` times over rows of `in_features` (past
    CPU_LOOP_LIMIT), or None; `count` is called on CPU adapters only. caps None: any device can."""
    if caps is None or not caps.is_cpu:
        return None
    n = count()
    if n <= CPU_LOOP_LIMIT:
        return None
    return (f"loops {n} times per invocation for in_features {in_features}; {caps.adapter_name!r} (a CPU adapter) "
            f"stops an invocation's loops at {CPU_LOOP_LIMIT}, silently")


def check_cpu_loops(caps, iterations: int, what: str) -> None:
    """LimitError where a CPU adapter would silently cut one invocation's `iterations` loop iterations short.
    `what` starts the message (the op and the size that made the count)."""
    if caps.is_cpu and iterations > CPU_LOOP_LIMIT:
        raise LimitError(f"{what} takes {iterations} loop iterations per invocation on {caps.adapter_name!r}, "
                         f"which stops an invocation's loops at {CPU_LOOP_LIMIT}, silently")


def note_cpu_work(caps, what: str, flops: float) -> None:
    """INFO on a CPU adapter when one call plans CPU_SLOW_FLOPS or more: about how long it will be silent."""
    if caps.is_cpu and flops >= CPU_SLOW_FLOPS:
        log.info("%s: %.1f GFLOP on the CPU adapter %s, roughly %.0f s at lavapipe's measured %.2f GFLOP/s",
                 what, flops / 1e9, caps.adapter_name, flops / CPU_ATTENTION_FLOPS_PER_S,
                 CPU_ATTENTION_FLOPS_PER_S / 1e9)
