"""When and how work reaches the GPU queue: the scheduler of a device epoch (the pending list of immediate ops
and its flush policy, recordings, the one ordered path of queue writes and submits, submission indices,
fences and waits: queue.py), command lists and their encoding (one compute pass per run of dispatches, one
submit per list), op templates (captured dispatches with slots), scratch placement, the buffer pool's
deferred destruction, in-flight windows for replays, and GPU timestamps."""
