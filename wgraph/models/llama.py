"""A Llama-architecture decoder (RMSNorm, RoPE with Llama 3 scaling, GQA, SwiGLU, tied or untied lm_head) built
only from wgraph's public ops and Graph.

The decode step is ONE compiled Program: it embeds the token held in a GPU state buffer, runs every layer
(KV caches are program states, appended at a GPU position; attention reads a GPU kv_len), the final norm and
lm_head, picks the next id on the GPU and `decode_advance` feeds it back (token, history, position, kv_len).
So a step needs no host input: `generate` submits steps back to back, a bounded number in flight, and reads
the history only every `read_every` tokens. Prefill runs the same layers on Tensors in one recorded submit,
writing into the program's own KV caches, with the program's weights (docs/models.md).
"""

from __future__ import annotations

import collections
import contextlib
import time
from pathlib import Path
from typing import Callable, Iterable

import attrs
import numpy as np

import wgraph.ops as ops
from wgraph.errors import CheckpointError, LimitError, ShapeError, UnsupportedError
from wgraph.graph import Graph
from wgraph.models.checkpoint import Checkpoint
from wgraph.models.config import LlamaConfig

DTYPES = ("f32", "f16")
DEFAULT_MAX_SEQ = 2048


@attrs.frozen
class SampleSettings:
    """How `sample` draws the next id (temperature > 0)."""

    temperature: float
    top_k: int
    top_p: float
    seed: int


def weight_shapes(cfg: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """Hugging Face tensor name -> shape, for every tensor the model reads."""
    h, i, v = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    for layer in range(cfg.num_hidden_layers):
        p = f"model.layers.{layer}."
        shapes.update({
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
            p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h), p + "mlp.down_proj.weight": (h, i),
        })
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (v, h)
    return shapes


def _program_weights(cfg: LlamaConfig, dtype: str) -> dict[str, tuple[tuple[int, ...], str, tuple[str, ...]]]:
    """Program state name -> (shape, dtype, the HF tensors stacked into it along axis 0). Matrices take the
    model dtype; norms stay f32 (activations are f32). q, k and v are stacked (one linear, then
    rope_kv_append), and so are gate and up (one linear with swiglu)."""
    out = {"embed": ((cfg.vocab_size, cfg.hidden_size), dtype, ("model.embed_tokens.weight",)),
           "norm": ((cfg.hidden_size,), "f32", ("model.norm.weight",))}
    shapes = weight_shapes(cfg)
    q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    for layer in range(cfg.num_hidden_layers):
        p = f"model.layers.{layer}."
        for name, hf, dt in (("attn_norm", "input_layernorm", "f32"), ("mlp_norm", "post_attention_layernorm", "f32"),
                             ("wo", "self_attn.o_proj", dtype), ("w_down", "mlp.down_proj", dtype)):
            out[f"l{layer}.{name}"] = (shapes[p + hf + ".weight"], dt, (p + hf + ".weight",))
        out[f"l{layer}.w_qkv"] = ((q + 2 * kv, cfg.hidden_size), dtype,
                                  tuple(p + f"self_attn.{n}_proj.weight" for n in "qkv"))
        out[f"l{layer}.w_gate_up"] = ((2 * cfg.intermediate_size, cfg.hidden_size), dtype,
                                      (p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"))
    if not cfg.tie_word_embeddings:
        out["lm_head"] = ((cfg.vocab_size, cfg.hidden_size), dtype, ("lm_head.weight",))
    return out


class Llama:
    """A Llama model on one device. Build with `from_pretrained` (a Hugging Face directory) or `from_weights`."""

    def __init__(self, config: LlamaConfig, device, get_weight: Callable[[str, tuple], np.ndarray], *,
                 dtype: str = "f16", max_seq: int | None = None):
        if dtype not in DTYPES:
            raise ShapeError(f"Llama: dtype must be one of {DTYPES}, got {dtype!r}")
        if dtype == "f16" and not device.caps.has_f16:
            raise UnsupportedError(f"Llama: dtype 'f16' needs shader-f16, which {device.caps.adapter_name!r} lacks; "
                                   f"use dtype='f32'")
        self.config, self.device, self.dtype = config, device, dtype
        self.max_seq = int(max_seq or min(config.max_position_embeddings, DEFAULT_MAX_SEQ))
        if not 2 <= self.max_seq <= 1 << 20:
            raise LimitError(f"Llama: max_seq {self.max_seq} must be in [2, {1 << 20}]")
        self.weight_bytes = 0  # bytes of every weight the program holds
        self.weight_bytes_per_token = 0  # bytes a decode step reads: all but the embedding rows it skips
        self.sampling = False  # whether the decode program draws with `sample` (else argmax)
        graph, self._choose_node = self._build_decode(sampling=False)
        self.program = graph.compile(device)
        self._load(get_weight)
        self.last_stats: dict = {}

    # ---- construction ----

    @classmethod
    def from_pretrained(cls, path, device=None, *, dtype: str = "f16", max_seq: int | None = None) -> Llama:
        """Load config.json and *.safetensors (sharded or not; F32/F16/BF16) from a Hugging Face directory."""
        from wgraph.device import default_device

        root = Path(path)
        config = LlamaConfig.from_file(root / "config.json")
        ckpt = Checkpoint(root)
        return cls(config, device or default_device(), ckpt.get, dtype=dtype, max_seq=max_seq)

    @classmethod
    def from_weights(cls, config: LlamaConfig, weights: dict[str, np.ndarray], device=None, *, dtype: str = "f16",
                     max_seq: int | None = None) -> Llama:
        """A model from in-memory arrays named as in a Hugging Face checkpoint (shapes checked)."""
        from wgraph.device import default_device

        def get(name, shape):
            if name not in weights:
                raise CheckpointError(f"tensor {name!r} is missing")
            a = np.asarray(weights[name])
            if a.shape != tuple(shape):
                raise CheckpointError(f"tensor {name!r} has shape {list(a.shape)}, the config needs {list(shape)}")
            return a

        return cls(config, device or default_device(), get, dtype=dtype, max_seq=max_seq)

    def _load(self, get_weight):
        """Read each HF tensor once (checked by name and shape), convert and write it into the program's state."""
        shapes = weight_shapes(self.config)
        for name, (shape, dtype, sources) in _program_weights(self.config, self.dtype).items():
            parts = []
            for src in sources:
                a = get_weight(src, shapes[src])
                parts.append(_convert(a, dtype, src))
            data = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
            self.device.write(self.program.state(name), data)
            self.weight_bytes += data.nbytes
            read_whole = name != "embed" or self.config.tie_word_embeddings  # a tied table is the lm_head too
            self.weight_bytes_per_token += data.nbytes if read_whole else data.nbytes // data.shape[0]
        cos, sin = self.rope_tables()
        self.device.write(self.program.state("rope_cos"), cos)
        self.device.write(self.program.state("rope_sin"), sin)

    def rope_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """cos and sin [max_seq, head_dim / 2] (f32) of the config's (possibly Llama 3 scaled) frequencies."""
        angles = np.arange(self.max_seq, dtype=np.float64)[:, None] * self.config.inv_freq()[None, :]
        return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)

    # ---- the forward pass, on graph values (decode) or Tensors (prefill) alike ----

    def _forward(self, x, glob: dict, layers: list, caches: list, pos, kv_len, rows: int, scope):
        """Hidden states x [rows, H] -> the last layer's residual stream [rows, H] (the final norm is fused into
        the lm_head's linear). Per layer: norm + [q; k; v] in one GEMV, RoPE and the KV append in one dispatch,
        attention, o_proj with the residual add, norm + [gate; up] + swiglu in one GEMV, down_proj with the
        residual add. Works on graph values (decode) and Tensors (prefill) alike."""
        c = self.config
        hq, d, eps = c.num_attention_heads, c.head_dim, c.rms_norm_eps
        cos, sin = glob["cos"], glob["sin"]
        for i, (w, cache) in enumerate(zip(layers, caches)):
            with scope(f"layer{i}"):
                qkv = ops.linear(x, w["w_qkv"], norm=w["attn_norm"], eps=eps)
                q = ops.rope_kv_append(qkv, cos, sin, cache, pos, q_heads=hq)
                o = ops.attention(q, cache[0], cache[1], causal=True, kv_len=kv_len)
                x = ops.linear(ops.reshape(o, rows, hq * d), w["wo"], residual=x)
                act = ops.linear(x, w["w_gate_up"], norm=w["mlp_norm"], eps=eps, activation="swiglu")
                x = ops.linear(act, w["w_down"], residual=x)
        return x

    def _logits(self, x, glob: dict):
        """The final RMSNorm and the lm_head, one fused GEMV."""
        return ops.linear(x, glob["lm_head"], norm=glob["norm"], eps=self.config.rms_norm_eps)

    def _weights(self, get) -> tuple[dict, list, list]:
        """(global weights, per-layer weight dicts, per-layer (k, v) caches) from `get(state name)`."""
        c = self.config
        glob = {"embed": get("embed"), "norm": get("norm"), "cos": get("rope_cos"), "sin": get("rope_sin")}
        glob["lm_head"] = get("embed") if c.tie_word_embeddings else get("lm_head")
        keys = ("attn_norm", "mlp_norm", "w_qkv", "wo", "w_gate_up", "w_down")
        layers = [{k: get(f"l{i}.{k}") for k in keys} for i in range(c.num_hidden_layers)]
        caches = [(get(f"l{i}.k_cache"), get(f"l{i}.v_cache")) for i in range(c.num_hidden_layers)]
        return glob, layers, caches

    def _build_decode(self, sampling: bool) -> tuple[Graph, str]:
        """The decode step's graph, and the name of its node that picks the next id."""
        c = self.config
        g = Graph("llama_decode_sample" if sampling else "llama_decode")
        for name, (shape, dtype, _src) in _program_weights(c, self.dtype).items():
            g.state(name, shape, dtype)  # zeros at compile; _load writes the checkpoint into it
        half = c.head_dim // 2
        g.state("rope_cos", (self.max_seq, half), "f32")
        g.state("rope_sin", (self.max_seq, half), "f32")
        for i in range(c.num_hidden_layers):
            for kv in ("k", "v"):  # f16 caches for an f16 model: half the bytes attention reads
                g.state(f"l{i}.{kv}_cache", (self.max_seq, c.num_key_value_heads, c.head_dim), self.dtype)
        token = g.state("token", (1,), "u32")
        history = g.state("history", (self.max_seq,), "u32")
        pos, kv_len = g.state("pos", (1,), "u32"), g.state("kv_len", (1,), "u32")
        glob, layers, caches = self._weights(lambda name: g.values[name])

        h = self._forward(self._embed(token, glob["embed"]), glob, layers, caches, pos, kv_len, 1, g.scope)
        logits = self._logits(h, glob)
        g.output("logits", logits)
        sample = SampleSettings(1.0, 0, 1.0, 0) if sampling else None  # the real values: Program.update
        nxt = self._choose(logits, pos, sample)
        ops.decode_advance(nxt, token=token, history=history, pos=pos, kv_len=kv_len)
        return g, g.producer[nxt.name]

    def _embed(self, ids, table):
        return ops.embedding(ids, table, dtype="f32")  # an f16 table's rows widened in the gather

    def _choose(self, logits, pos, sample: SampleSettings | None):
        """The next id [1] u32 from logits [1, V]: argmax, or a draw keyed by (seed, position)."""
        if sample is None:
            return ops.argmax(logits)
        return ops.sample(logits, temperature=sample.temperature, top_k=sample.top_k, top_p=sample.top_p,
                          seed=sample.seed, step=pos)

    def _set_sampling(self, sample: SampleSettings | None) -> None:
        """Make the decode program pick ids as `sample` says. Greedy and sampling are two programs (argmax or
        sample as their last op); switching compiles the other one and moves the weights into it on the GPU
        (`scale` by 1.0 with out=, exact; both are held for that moment). New sampling values only rewrite the
        sample node's uniforms."""
        if (sample is not None) != self.sampling:
            dev, old = self.device, self.program
            graph, node = self._build_decode(sampling=sample is not None)
            new = graph.compile(dev)
            keep = set(_program_weights(self.config, self.dtype)) | {"rope_cos", "rope_sin"}
            with dev.record():
                for n in sorted(keep):
                    ops.scale(old.state(n), 1.0, out=new.state(n))
            self.program, self._choose_node, self.sampling = new, node, sample is not None
        if sample is not None:
            node = self.program.graph.node(self._choose_node)
            self.program.update(self._choose_node, attrs.evolve(
                node.params, temperature=sample.temperature, top_k=sample.top_k, top_p=sample.top_p, seed=sample.seed))

    # ---- running ----

    def _check_ids(self, ids, what: str) -> np.ndarray:
        arr = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids)
        if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu":
            raise ShapeError(f"{what} must be a non-empty 1-D list of integer token ids, got {arr.dtype} {arr.shape}")
        bad = arr[(arr < 0) | (arr >= self.config.vocab_size)]
        if bad.size:
            raise LimitError(f"{what}: token id {int(bad[0])} is outside the vocabulary [0, {self.config.vocab_size})")
        return arr.astype(np.uint32)

    def prefill(self, prompt_ids, *, all_logits: bool = False, sample: SampleSettings | None = None):
        """Run the prompt through every layer in ONE recorded submit: fills the KV caches at positions
        0..S-1, picks the first new token on the GPU (argmax, or a draw with `sample`) and leaves the decode
        state ready for `step()`. Returns the logits of the last position [1, V], or of all [S, V] with all_logits."""
        ids = self._check_ids(prompt_ids, "prompt_ids")
        s = ids.size
        if s >= self.max_seq:
            raise LimitError(f"prefill: {s} prompt tokens leave no room in the KV cache of {self.max_seq} positions")
        prog, dev = self.program, self.device
        dev.write(prog.state("pos"), np.array([s - 1], np.uint32))  # decode_advance moves it to s
        ids_t = dev.tensor(ids, "u32", label="prompt_ids")
        last_t = dev.tensor(np.array([s - 1], np.uint32), "u32", label="last_row")
        glob, layers, caches = self._weights(prog.state)
        with dev.record():
            h = self._forward(self._embed(ids_t, glob["embed"]), glob, layers, caches, 0, s, s,
                              lambda _name: contextlib.nullcontext())
            logits = self._logits(ops.embedding(last_t, h), glob)  # the last row only: a one-id gather
            ops.decode_advance(self._choose(logits, prog.state("pos"), sample), token=prog.state("token"),
                               history=prog.state("history"), pos=prog.state("pos"), kv_len=prog.state("kv_len"))
            if all_logits:
                logits = self._logits(h, glob)
        return logits

    def step(self):
        """One decode step (one submit, no host input): returns the program's logits output [1, V] for the
        token it consumed (overwritten by the next step)."""
        return self.program.run()["logits"]

    def generate(self, prompt_ids, max_new_tokens: int, *, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 0, stop_ids: Iterable[int] = (), in_flight: int = 8,
                 read_every: int | None = None, progress: Callable[[int, float], None] | None = None) -> list[int]:
        """Up to `max_new_tokens` new ids after `prompt_ids`. One recorded submit for the prompt, then one
        submit per token with at most `in_flight` steps unfinished on the GPU; the ids are read back every
        `read_every` tokens (default: once, at the end). Generation stops at the first id in `stop_ids` found
        at a read; the stop id is returned, ids generated after it are dropped.
        temperature 0 is greedy (argmax; top_k, top_p and seed unused); otherwise each id is drawn on the GPU from
        softmax(logits / temperature) kept to top_k and top_p, keyed by (seed, position): the same seed and
        prompt give the same ids."""
        ids = self._check_ids(prompt_ids, "prompt_ids")
        sample = None if temperature == 0 else SampleSettings(float(temperature), int(top_k), float(top_p), int(seed))
        n = int(max_new_tokens)
        if n < 0:
            raise ShapeError(f"generate: max_new_tokens must be >= 0, got {max_new_tokens}")
        if ids.size + n > self.max_seq:
            raise LimitError(f"generate: {ids.size} prompt + {n} new tokens exceed the KV cache of {self.max_seq} "
                             f"positions (max_seq)")
        if int(in_flight) < 1:
            raise ShapeError(f"generate: in_flight must be >= 1, got {in_flight}")
        every = max(n, 1) if read_every is None else int(read_every)
        if every < 1:
            raise ShapeError(f"generate: read_every must be >= 1, got {read_every}")
        stops = {int(t) for t in stop_ids}
        if n == 0:
            return []
        self._set_sampling(sample)
        prog, s = self.program, ids.size
        t0 = time.perf_counter()
        before = self.device.stats.snapshot()
        self.prefill(ids, sample=sample)
        made, out = 1, []  # prefill chose the first new id
        while True:
            if made == n or made % every == 0:
                new = prog.state("history").numpy()[s + len(out):s + made].tolist()
                hit = next((j for j, t in enumerate(new) if t in stops), None)
                out += new if hit is None else new[:hit + 1]
                if progress is not None:
                    progress(len(out), time.perf_counter() - t0)
                if hit is not None or made == n:
                    d = self.device.stats.since(before)
                    self.last_stats = {"tokens": len(out), "seconds": time.perf_counter() - t0,
                                       "submits": d.submits, "readbacks": d.readbacks}
                    return out
            k = min(every - made % every, n - made)
            self.run_steps(k, in_flight=in_flight)
            made += k

    def run_steps(self, n: int, *, in_flight: int = 8) -> float:
        """Submit `n` decode steps back to back, waiting (without a readback) only when `in_flight` submitted
        steps are not yet finished on the GPU. Returns the host seconds spent encoding and submitting them."""
        dev, fences, host = self.device, collections.deque(), 0.0
        for _ in range(n):
            while len(fences) >= in_flight:
                dev.wait(fences.popleft())
            t = time.perf_counter()
            self.program.run()
            host += time.perf_counter() - t
            fences.append(dev.fence())
        return host


def _convert(a: np.ndarray, dtype: str, name: str) -> np.ndarray:
    """A checkpoint array as the program dtype; refuses values that f16 cannot hold (they would become inf)."""
    want = np.float16 if dtype == "f16" else np.float32
    if a.dtype == want:
        return np.ascontiguousarray(a)
    if a.dtype.kind != "f":
        raise CheckpointError(f"tensor {name!r} has dtype {a.dtype}; expected floating point")
    out = a.astype(want)
    if want == np.float16 and not np.isfinite(out).all() and np.isfinite(a).all():
        raise CheckpointError(f"tensor {name!r} has values beyond the f16 range (|x| > 65504); load with dtype='f32'")
    return out
