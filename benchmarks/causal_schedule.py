"""A list-schedule model of a causal prefill grid's tail (no GPU): the finish time, in tile-units, of the query blocks
of `heads` heads started in launch order on an H100's 132 SMs, block i of a head costing i + 1 key tiles (causal,
BLOCK_M = BLOCK_N).

One workgroup an SM (the GEMM-shaped prefill at 167 registers, before its two-phase workgroup memory): compares the
order of the grid (query blocks, heads) with the block index reversed inside each head (the grid before 385b350)
with the grid (heads, query blocks), every head's heaviest block first, against the ideal (the work divided evenly).

Two workgroups an SM (127 registers since bf6136c): an SM running two runs them at `tau` / 2 each (tau: its
throughput with two against one; tau ~1.1-1.2 reproduces the H100's ratios in h100-prefill-two-phase-ab-1207.log:
0.89-0.91x the time where the grid makes several waves, 1.25x at 16/16 S = 1024), and the first workgroups are
placed on slot 0 of every SM, then slot 1 (round robin; an SM-major placement would read 1.57x there). At 256
workgroups (one wave) the heaviest blocks share SMs with the next-heaviest and run at tau / 2 most of the way.
"fold" reverses the second SM-count segment of the launch order, so SM j runs the j-th heaviest block beside the
j-th lightest of that segment: 0.98-0.99x at 16/16 S = 1024 in the model, the other shapes unchanged. The kernel
launches so since 2026-12-07 (FOLD = SMS in attention_prefill_gemm.wgsl, a tuned constant resting on the placement
assumed here): on an H100 the 16/16 S = 1024 rows took 0.82-0.85x the unfolded order's time
(benchmarks/results/h100-rev-candidates-1207.log).

    python benchmarks/causal_schedule.py [block_m] [tau]
"""
import heapq
import sys

SMS = 132


def finish(costs: list[int], slots: int) -> int:
    """When the last workgroup ends if each starts, in list order, on the first slot to free up."""
    free = [0] * slots
    end = 0
    for c in costs:
        t = heapq.heappop(free) + c
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def finish_two(costs: list[int], sms: int, tau: float) -> float:
    """When the last workgroup ends with two slots an SM: placed in list order on slot 0 of every SM, then slot 1,
    then on whichever slot frees up; two residents of an SM each run at tau / 2, one alone at 1."""
    queue = iter(costs)
    resident: list[list[float]] = [[] for _ in range(sms)]
    for slot in range(2):
        for sm in range(sms):
            c = next(queue, None)
            if c is not None:
                resident[sm].append(float(c))
    t = 0.0
    while any(resident):
        speed = [(tau / 2 if len(r) == 2 else 1.0) for r in resident]
        dt = min(min(r) / s for r, s in zip(resident, speed) if r)
        t += dt
        for sm, r in enumerate(resident):
            left = [w - speed[sm] * dt for w in r]
            resident[sm] = [w for w in left if w > 1e-9]
            for _ in range(len(left) - len(resident[sm])):
                c = next(queue, None)
                if c is not None:
                    resident[sm].append(float(c))
    return t


def main() -> None:
    block_m = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    tau = float(sys.argv[2]) if len(sys.argv) > 2 else 1.15
    print(f"{SMS} SMs, {block_m}-row blocks: finish in tile-units (ideal = total / SMs); two an SM at tau = {tau}")
    for seq_len, heads in ((512, 16), (1024, 16), (2048, 16), (4096, 16), (1024, 32), (2048, 32), (4096, 32)):
        blocks = -(-seq_len // block_m)
        per_head = [blocks - i for i in range(blocks)]                  # heaviest first inside a head
        head_major = [c for _ in range(heads) for c in per_head]        # grid (blocks, heads): heads in turn
        heavy_first = sorted(head_major, reverse=True)                  # grid (heads, blocks)
        fold = heavy_first[:SMS] + heavy_first[SMS:2 * SMS][::-1] + heavy_first[2 * SMS:]
        ideal = sum(head_major) / SMS
        one = finish(heavy_first, SMS)
        two, two_fold = finish_two(heavy_first, SMS, tau), finish_two(fold, SMS, tau)
        print(f"S={seq_len:5d} heads={heads:2d}: ideal {ideal:6.1f}  one an SM: heads in turn "
              f"{finish(head_major, SMS):4d}, heaviest first {one:4d};  two an SM: heaviest first {two:6.1f} "
              f"({two / one:.2f}x), fold {two_fold:6.1f} ({two_fold / one:.2f}x)")


if __name__ == "__main__":
    main()
