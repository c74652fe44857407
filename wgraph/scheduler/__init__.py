"""When and how work reaches the GPU queue: command lists and their encoding (one compute pass per run of
dispatches, one submit per list), recordings, op templates (captured dispatches with slots), the buffer
pool's deferred destruction by submission serial, fences and GPU timestamps."""
