"""Kernel loading: the registry of variants (shaders/registry/*.toml expanded into `Kernel` records), WGSL
parsing and includes, uniform layouts and packing, pipelines and bind groups."""
