"""Make tests/data/gguf_goldens.npz with Hugging Face transformers' own GGUF loader (run once; the tests read the
file and never import transformers or torch):

    PYTHONPATH=. python tests/data/make_gguf_goldens.py   # needs torch, transformers (5.25 made the file), gguf

For each case of tests/tiny_files.py's gguf_golden_cases() a tiny random GGUF file is written by write_model (as
llama.cpp's converter writes one: Q/K rows of `llama` permuted, Gemma 2's norms plus one, block formats by gguf /
wgraph's quantizers), loaded by `AutoModelForCausalLM.from_pretrained(dir, gguf_file=name)` (dequantized to
float32, eager attention), and run on PROMPT: `{case}_logits` (the last prompt position's logits),
`{case}_greedy` (8 greedy ids after it) and `{case}_sha256` (of the file: the test writes it again and checks
that it is the same file).

The script also checks the two facts about transformers that wgraph's GGUF reading follows or refuses:
`llama.attention.sliding_window` is not read (a llama file with it runs bit for bit as the file without it, as
llama.cpp's llama architecture runs it: full attention), and a `gemma2` file's `output.weight` is not loaded
(the gguf package's gemma2 has no output tensor, llama.cpp ties it to token_embd: transformers' lm_head stays at
its random initialization).
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tiny_files  # noqa: E402

OUT = Path(__file__).resolve().parent / "gguf_goldens.npz"
PROMPT = tiny_files.GGUF_GOLDEN_PROMPT
NEW_TOKENS = 8


def write(path: Path, arch: str, cfg: dict, weights: dict, kwargs: dict) -> Path:
    return tiny_files.write_model(path, arch, cfg, dict(weights), **kwargs)


def run(path: Path, **config) -> tuple[np.ndarray, list[int], torch.nn.Module]:
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                              dtype=torch.float32, attn_implementation="eager",
                                                              **config)
    ids, first = list(PROMPT), None
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            logits = model(torch.tensor([ids])).logits[0, -1]
            first = logits.numpy().copy() if first is None else first
            ids.append(int(logits.argmax()))
    return first, ids[len(PROMPT):], model


def main() -> None:
    goldens = {"prompt": np.array(PROMPT)}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, (arch, cfg, weights, kwargs) in tiny_files.gguf_golden_cases().items():
            path = write(tmp / f"{name}.gguf", arch, cfg, weights, kwargs)
            logits, greedy, _ = run(path)
            goldens[f"{name}_logits"] = logits.astype(np.float32)
            goldens[f"{name}_greedy"] = np.array(greedy)
            goldens[f"{name}_sha256"] = np.array(hashlib.sha256(path.read_bytes()).hexdigest())
            print(name, greedy)
        # the window key is not read: the file without it, bit for bit
        arch, cfg, weights, kwargs = tiny_files.gguf_golden_cases()["llama_window"]
        (tmp / "plain").mkdir()
        logits, greedy, _ = run(write(tmp / "plain" / "llama.gguf", arch, cfg, weights, {}))
        assert np.array_equal(logits, goldens["llama_window_logits"]) and greedy == list(goldens["llama_window_greedy"])
        # a gemma2 output.weight is not loaded: lm_head is neither it nor the embedding
        arch, cfg, weights, kwargs = tiny_files.gguf_golden_cases()["gemma2_window_q8_0"]
        head = np.random.default_rng(9).standard_normal((cfg["vocab_size"], cfg["hidden_size"])).astype(np.float32)
        path = write(tmp / "gemma2_untied.gguf", arch, dict(cfg, tie_word_embeddings=False), weights,
                     dict(extra_tensors={"output.weight": head}))
        _, _, model = run(path)
        lm_head = model.lm_head.weight.detach().numpy()
        assert not np.allclose(lm_head, head) and not np.allclose(lm_head, model.model.embed_tokens.weight.detach())
    np.savez_compressed(OUT, **goldens)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes) with transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
