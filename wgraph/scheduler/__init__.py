"""Planning and submission: registry, uniforms, pipelines, buffer pool, dispatches and batches."""
