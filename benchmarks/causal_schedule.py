"""A list-schedule model of a causal prefill grid's tail (no GPU): the finish time, in tile-units, of the query blocks
of `heads` heads started in launch order on `slots` workgroup slots (an H100: 132 SMs x the workgroups an SM holds),
block i of a head costing i + 1 key tiles (causal, BLOCK_M = BLOCK_N). Compares the order of the grid (query blocks,
heads) with the block index reversed inside each head (the grid before 385b350) with the grid (heads, query blocks),
every head's heaviest block first, against the ideal (the work divided evenly).

    python benchmarks/causal_schedule.py [slots] [block_m]
"""
import heapq
import sys


def finish(costs: list[int], slots: int) -> int:
    """When the last workgroup ends if each starts, in list order, on the first slot to free up."""
    free = [0] * slots
    end = 0
    for c in costs:
        t = heapq.heappop(free) + c
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def main() -> None:
    slots = int(sys.argv[1]) if len(sys.argv) > 1 else 132
    block_m = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    print(f"{slots} slots, {block_m}-row blocks: finish in tile-units (ideal = total / slots)")
    for seq_len, heads in ((512, 16), (1024, 16), (2048, 16), (4096, 16), (2048, 32), (4096, 32)):
        blocks = -(-seq_len // block_m)
        per_head = [blocks - i for i in range(blocks)]                  # heaviest first inside a head
        head_major = [c for _ in range(heads) for c in per_head]        # grid (blocks, heads): heads in turn
        heavy_first = sorted(head_major, reverse=True)                  # grid (heads, blocks)
        ideal = sum(head_major) / slots
        print(f"S={seq_len:5d} heads={heads:2d}: ideal {ideal:6.1f}  heads in turn {finish(head_major, slots):4d}"
              f"  heaviest first {finish(heavy_first, slots):4d}")


if __name__ == "__main__":
    main()
