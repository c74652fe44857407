"""Soak, CI size: 300 replays of a compiled decode step and 300 immediate attention calls; after warm-up the
live GPU buffers do not grow and RSS stays within a small margin. The 10,000-step run is `python -m wgraph
soak` (figures in docs/benchmarks.md, "Soak")."""

from wgraph.soak import growth_after, soak_immediate, soak_replay

RSS_MARGIN = 4 << 20  # allocator noise; a leak of a buffer's worth per call would be far above it over 200 calls


def test_compiled_decode_replay_does_not_grow(dev):
    samples = soak_replay(dev, 300, every=50)
    buffers, rss = growth_after(samples, warmup=100)
    assert buffers == 0, samples
    assert rss <= RSS_MARGIN, samples


def test_immediate_attention_does_not_grow(dev):
    # kv_len cycles over 300 values: the uniform cache (256 entries) fills during the first 300 calls
    samples = soak_immediate(dev, 600, every=50)
    buffers, rss = growth_after(samples, warmup=300)
    assert buffers == 0, samples
    assert rss <= RSS_MARGIN, samples
