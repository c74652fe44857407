"""What runs kernels: the registry of variants (registry, wgsl), uniform packing, pipelines and bind groups,
the buffer pool, and the one path to the GPU (commands: CommandList; recording; profiling; fences)."""
