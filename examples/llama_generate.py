"""Generate with a Llama-architecture model: write a tiny random checkpoint in Hugging Face layout
(config.json + model.safetensors, with numpy and safetensors: this machine cannot download a model), load it
with `Llama.from_pretrained` and generate. The prompt is one recorded submit; every new token is one replay
of ONE compiled decode program (all layers, lm_head and argmax on the GPU, the id fed back on the GPU), with
8 steps in flight and the ids read back once at the end.

    python examples/llama_generate.py [--tokens 32] [--path DIR]   (an existing checkpoint DIR is loaded as is)
"""

import argparse
import tempfile
import time

import wgraph as wg
from wgraph.models import Llama
from wgraph.models.config import STEPS_PER_SUBMIT
from wgraph.models.random_checkpoint import write_random_checkpoint


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--path", help="a checkpoint directory (default: a new random one in a temp dir)")
    args = ap.parse_args()
    dev = wg.default_device()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.path or write_random_checkpoint(tmp, storage="bf16", vocab_size=100, hidden_size=64,
                                                    num_hidden_layers=2, num_attention_heads=4,
                                                    num_key_value_heads=2, head_dim=16)
        dtype = "f16" if dev.caps.has_f16 else "f32"
        model = Llama.from_pretrained(path, dev, dtype=dtype, max_seq=128)
    c = model.config
    print(f"model: {c.num_hidden_layers} layers, hidden {c.hidden_size}, heads {c.num_attention_heads}/"
          f"{c.num_key_value_heads}, vocab {c.vocab_size}, {dtype} weights ({model.weight_bytes} bytes) on "
          f"{dev.caps.adapter_name}")
    print(f"decode step: one program of {len(model.program.rows)} dispatches")
    prompt = [1, 2, 3, 4]
    model.generate(prompt, 4)  # warm-up: the first run builds pipelines
    before = dev.stats.snapshot()
    t0 = time.perf_counter()
    ids = model.generate(prompt, args.tokens, in_flight=8)
    dt = time.perf_counter() - t0
    d = dev.stats.since(before)
    print(f"prompt {prompt} -> {ids}")
    print(f"{len(ids)} tokens in {dt * 1e3:.1f} ms: {len(ids) / dt:.1f} tokens/s; "
          f"{d.submits} submits ({d.submits / len(ids):.2f} per token: one for the prompt, one per "
          f"{STEPS_PER_SUBMIT} steps, one to read the ids), {d.readbacks} readback")
    # the prompt's submit chose the first id; the other ids are steps, STEPS_PER_SUBMIT to a submit
    assert d.submits == 1 + -(-(len(ids) - 1) // STEPS_PER_SUBMIT) + d.readbacks


if __name__ == "__main__":
    main()
