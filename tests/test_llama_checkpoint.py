"""Llama checkpoints: tensors checked with errors that name them; sharded and bf16 files read back exactly
(no GPU work). Config reading: tests/test_model_config.py."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from wgraph.dtypes import BF16_BITS, from_bf16
from wgraph.errors import CheckpointError
from wgraph.models import Checkpoint, LlamaConfig
from wgraph.models.llama import weight_shapes
from wgraph.models.random_checkpoint import random_weights, stored_values, tiny_config, write_checkpoint

from llama_reference import inv_freq


@pytest.mark.parametrize("storage,shards", [("f32", 1), ("f16", 2), ("bf16", 3)])
def test_storage_and_shards_read_back(tmp_path, storage, shards):
    cfg = tiny_config()
    w = random_weights(cfg, seed=3)
    ckpt = Checkpoint(write_checkpoint(tmp_path, cfg, w, storage=storage, shards=shards))
    assert set(ckpt.where) == set(w) and len(set(ckpt.where.values())) == shards
    for name, a in w.items():
        got = ckpt.get(name, a.shape)
        assert got.dtype == {"f32": np.float32, "f16": np.float16, "bf16": BF16_BITS}[storage]  # bf16 as its bits
        values = from_bf16(got) if storage == "bf16" else got.astype(np.float32)
        assert np.array_equal(values, stored_values(a, storage)), name


def test_model_safetensors_is_read_before_the_index_as_transformers_does(tmp_path):
    """A directory holding model.safetensors AND model.safetensors.index.json with its shards (a re-save beside old
    shards): transformers' from_pretrained tries SAFE_WEIGHTS_NAME before SAFE_WEIGHTS_INDEX_NAME and reads the
    single file alone; wgraph read the index's shards, other weights than transformers', silently."""
    from safetensors.numpy import load_file

    cfg = tiny_config()
    root = write_checkpoint(tmp_path / "both", cfg, random_weights(cfg, seed=1), shards=2)
    single = write_checkpoint(tmp_path / "single", cfg, random_weights(cfg, seed=2)) / "model.safetensors"
    single.rename(root / "model.safetensors")
    expected = load_file(root / "model.safetensors")   # the values of the file transformers would load
    ckpt = Checkpoint(root)
    assert set(ckpt.where.values()) == {root / "model.safetensors"}
    for name, a in expected.items():
        assert np.array_equal(ckpt.get(name, a.shape), a), name


def test_bf16_headers_are_parsed_once_a_file(tmp_path, monkeypatch):
    """BF16 tensors are read by hand through the header's data_offsets: each `get` parsed the whole JSON header
    again, so a file padding its header to safetensors' 100 MB limit cost 0.26 s a tensor (hours for a config of
    many layers). Now once a file, the same bytes read back."""
    import wgraph.models.checkpoint as checkpoint

    cfg = tiny_config()
    w = random_weights(cfg, seed=3)
    ckpt = Checkpoint(write_checkpoint(tmp_path, cfg, w, storage="bf16", shards=2))
    parsed = []
    loads = checkpoint.json.loads
    monkeypatch.setattr(checkpoint.json, "loads", lambda text, **kw: parsed.append(1) or loads(text, **kw))
    for name, a in w.items():
        assert np.array_equal(from_bf16(ckpt.get(name, a.shape)), stored_values(a, "bf16")), name
    assert len(parsed) == 2   # one header a shard


def test_bad_tensors_name_the_tensor(tmp_path):
    cfg = tiny_config()
    w = random_weights(cfg)
    name = "model.layers.1.self_attn.k_proj.weight"
    ckpt = Checkpoint(write_checkpoint(tmp_path / "a", cfg, {k: v for k, v in w.items() if k != name}))
    with pytest.raises(CheckpointError, match=name.replace(".", r"\.") + ".*missing"):
        ckpt.get(name, (32, 64))
    ckpt = Checkpoint(write_checkpoint(tmp_path / "b", cfg, w))
    with pytest.raises(CheckpointError, match=r"k_proj.*shape \[32, 64\].*\[64, 64\]"):
        ckpt.get(name, (64, 64))
    import safetensors.numpy
    safetensors.numpy.save_file({"model.norm.weight": np.zeros(64, np.int32)}, str(tmp_path / "c.safetensors"))
    (tmp_path / "c").mkdir()
    (tmp_path / "c.safetensors").rename(tmp_path / "c" / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"model\.norm\.weight.*dtype I32"):
        Checkpoint(tmp_path / "c").get("model.norm.weight", (64,))


def test_hostile_files_are_refused(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 8 + b"{}")  # header length far beyond the file
    with pytest.raises(CheckpointError, match="not a valid safetensors"):
        Checkpoint(tmp_path)
    d = tmp_path / "idx"
    d.mkdir()
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "../model.safetensors"}}))
    with pytest.raises(CheckpointError, match=r"'x' maps to '\.\./model\.safetensors'"):
        Checkpoint(d)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"no \*\.safetensors"):
        Checkpoint(tmp_path / "empty")


def test_a_shard_name_past_the_file_systems_limit_is_named(tmp_path):
    """An index naming a shard of 5,000 characters (a plain file name, so not refused as a path out of the
    directory) raised OSError [Errno 36] File name too long from Path.is_file: a CheckpointError naming the index."""
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"x": "x" * 5000 + ".safetensors"}}))
    with pytest.raises(CheckpointError, match=r"model.safetensors.index.json: shard \"xxxx.*\.\.\. cannot be looked "
                                              r"up: File name too long$"):
        Checkpoint(tmp_path)


class _BytesPath:
    def __fspath__(self):
        return b"/tmp"


def test_an_empty_or_bytes_path_is_refused_not_the_working_directory(tmp_path, monkeypatch):
    """"" is Path("."): Checkpoint("") and open_pretrained("") (python -m wgraph generate "") read the working
    directory's checkpoint; a PathLike of bytes raised pathlib's TypeError."""
    from wgraph.errors import ArgumentError
    from wgraph.models import open_pretrained

    write_checkpoint(tmp_path, tiny_config(), random_weights(tiny_config()))
    monkeypatch.chdir(tmp_path)
    for path in ("", _BytesPath()):
        with pytest.raises(ArgumentError, match=r"Checkpoint: root=.* must be a directory path \(a non-empty str"):
            Checkpoint(path)
        with pytest.raises(ArgumentError, match=r"open_pretrained: path=.* must be a directory or \.gguf file path "
                                                r"\(a non-empty str or os.PathLike of str\)"):
            open_pretrained(path)


def test_write_checkpoint_refuses_a_shard_count_it_cannot_write(tmp_path):
    """shards=0 wrote config.json and no .safetensors file, without an error."""
    from wgraph.errors import ArgumentError

    cfg = tiny_config()
    w = random_weights(cfg)
    for shards in (0, -1, len(w) + 1, 2.0, True):
        with pytest.raises(ArgumentError, match=rf"write_checkpoint: shards={shards} must be an integer in "
                                                rf"\[1, {len(w)}\]"):
            write_checkpoint(tmp_path / "x", cfg, w, shards=shards)
        assert not (tmp_path / "x").exists()


def test_write_checkpoint_refuses_a_storage_it_does_not_write(tmp_path):
    """storage="bfloat16" raised a bare ValueError, not a WgraphError; storage=None the same."""
    from wgraph.errors import ArgumentError

    cfg = tiny_config()
    for storage in ("bfloat16", "f64", None, np.float32):
        with pytest.raises(ArgumentError, match=r"write_checkpoint: storage=.* must be one of 'f32', 'f16', 'bf16'"):
            write_checkpoint(tmp_path / "x", cfg, {}, storage=storage)
        assert not (tmp_path / "x").exists()


def test_llama3_rope_scaling_matches_reference():
    scaling = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    cfg = tiny_config(head_dim=128, hidden_size=512, rope_theta=500000.0, rope_scaling=scaling)
    ours, ref = LlamaConfig.from_dict(cfg).inv_freq(), inv_freq(cfg)
    assert np.allclose(ours, ref, rtol=1e-12, atol=0)
    plain = inv_freq(tiny_config(head_dim=128, hidden_size=512, rope_theta=500000.0))
    assert (ours < plain).any() and (ours == plain).any()  # long wavelengths scaled, short ones kept


@pytest.mark.parametrize("case", ["llama", "llama_bias", "qwen2", "qwen3", "mistral", "gemma2"])
def test_tensor_names_and_shapes_are_transformers(case):
    """The tensors the decoder reads (and random_weights makes) for each architecture are exactly those
    transformers saved for it (tests/data/arch: biases, per-head norms, Gemma's four norms, tied heads)."""
    root = Path(__file__).parent / "data" / "arch" / case
    cfg = json.loads((root / "config.json").read_text())
    ckpt = Checkpoint(root)
    saved = {name: tuple(ckpt._files[path].get_slice(name).get_shape()) for name, path in ckpt.where.items()}
    assert weight_shapes(LlamaConfig.from_dict(cfg)) == saved
    assert {k: v.shape for k, v in random_weights(cfg).items()} == saved


def test_special_files_are_refused_before_they_are_read(tmp_path):
    """A FIFO or a device reports 0 bytes and reads forever (a hang, or memory exhausted): config.json, the
    safetensors index and templates must be regular files (after symlinks), and no read goes past the limit."""
    import os

    from wgraph.models.config import DecoderConfig

    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    with pytest.raises(CheckpointError, match=r"config.json is not a regular file \(a directory, a device or a "
                                              r"FIFO\): refused"):
        DecoderConfig.from_file(fifo)
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "model.safetensors.index.json").symlink_to("/dev/zero")
    with pytest.raises(CheckpointError, match="model.safetensors.index.json is not a regular file"):
        Checkpoint(d)


def test_tensors_the_config_leaves_out_and_stop_ids_outside_the_vocabulary(tmp_path, dev):
    """A checkpoint with a layer past num_hidden_layers loaded as the smaller model (its tensors dropped
    silently); an eos_token_id outside the vocabulary was a stop id generation never meets. Both refused."""
    import shutil

    from wgraph.models import from_pretrained

    import tiny_files

    cfg = tiny_config(vocab_size=64, hidden_size=32, intermediate_size=64, head_dim=8, num_hidden_layers=3)
    write_checkpoint(tmp_path, cfg, random_weights(cfg))
    (tmp_path / "config.json").write_text(json.dumps(dict(cfg, num_hidden_layers=2)))
    with pytest.raises(CheckpointError, match=r"tensors \['model.layers.2.input_layernorm.weight', .*\(9 in all\) "
                                              r"are not used by the llama model config.json describes"):
        from_pretrained(tmp_path, dev, dtype="f32", max_seq=16)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    # another format's file beside the model's (Mistral's consolidated.safetensors) is not the model's
    from safetensors.numpy import save_file

    save_file({"layers.0.attention.wq.weight": np.zeros((4, 4), np.float32)}, tmp_path / "consolidated.safetensors")
    assert from_pretrained(tmp_path, dev, dtype="f32", max_seq=16).config.num_hidden_layers == 3
    (tmp_path / "consolidated.safetensors").unlink()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_files.TINY_TOKENIZER / name, tmp_path / name)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 10**30]}))
    with pytest.raises(CheckpointError, match=r"eos_token_id 1000000000000000000000000000000 is outside the "
                                              r"tokenizer's vocabulary"):
        from_pretrained(tmp_path, dev, dtype="f32", max_seq=16)


def test_tensor_shapes_are_checked_before_the_model_allocates(tmp_path, dev):
    """A config.json claiming a far larger model than its tensors allocated every buffer of the program before the
    first tensor's shape was read (a 64-layer 2048-wide config beside a tiny checkpoint exhausted the device):
    the headers are checked first, and the error names the tensor."""
    from wgraph.models import from_pretrained

    cfg = tiny_config(vocab_size=64, hidden_size=32, intermediate_size=64, head_dim=8)
    write_checkpoint(tmp_path, cfg, random_weights(cfg))
    (tmp_path / "config.json").write_text(json.dumps(dict(cfg, hidden_size=2048, num_hidden_layers=64)))
    before = dev.stats.snapshot()
    with pytest.raises(CheckpointError, match=r"'model.embed_tokens.weight' in model.safetensors has shape "
                                              r"\[64, 32\], the config needs \[64, 2048\]"):
        from_pretrained(tmp_path, dev, dtype="f32", max_seq=16)
    assert dev.stats.since(before).buffers_created == 0


def test_f16_overflow_is_refused_beside_an_inf_in_the_same_tensor(dev):
    """A weight beyond f16's range is refused when the model is f16 (docs/models.md), but the test was on the whole
    tensor (something became inf and nothing was inf before): a tensor holding an inf anywhere let its 1e5 become
    inf silently. Checked value by value now, the error naming the tensor and the value."""
    from kernel_support import skip_unless_f16

    from wgraph.models import Llama

    skip_unless_f16(dev)
    cfg = tiny_config(num_hidden_layers=1, vocab_size=16, hidden_size=32, intermediate_size=32, head_dim=8)
    w = random_weights(cfg)
    w["model.layers.0.mlp.down_proj.weight"][0, :2] = [np.inf, 1e5]
    with pytest.raises(CheckpointError, match=r"'model.layers.0.mlp.down_proj.weight' has values beyond the f16 "
                                              r"range \(\|x\| > 65504\), as 100000.0; load with dtype='f32'"):
        Llama.from_weights(LlamaConfig.from_dict(cfg), w, dev, dtype="f16", max_seq=16)


@pytest.mark.parametrize("dtype, name, value", [
    ("f32", "model.layers.0.mlp.down_proj.weight", 1e39), ("f32", "model.norm.weight", 1e300),
    ("f16", "model.layers.0.mlp.down_proj.weight", 1e300), ("f16", "model.layers.0.input_layernorm.weight", -1e39)])
def test_float64_weights_beyond_the_stored_range_are_refused(dev, dtype, name, value):
    """from_weights with float64 arrays (numpy's default) rounded them to f32 before the range check: a 1e39 or a
    1e300 became inf in an f32 model (and in an f16 one) with only numpy's 'overflow encountered in cast' warning,
    and the logits turned NaN. Refused by name now, as a 1e5 in an f16 model is; an inf given stays inf."""
    import warnings

    from kernel_support import skip_unless_f16

    from wgraph.models import Llama

    if dtype == "f16":
        skip_unless_f16(dev)
    cfg = tiny_config(num_hidden_layers=1, vocab_size=16, hidden_size=32, intermediate_size=32, head_dim=8)
    w = {k: v.astype(np.float64) for k, v in random_weights(cfg).items()}
    w[name][(0,) * w[name].ndim] = value
    w[name][(1,) * w[name].ndim] = np.inf                      # loaded as it is (docs/models.md)
    stored = "f32" if name.endswith("norm.weight") else dtype   # norms stay f32 in every dtype
    limit = {"f32": r"3\.4028235e\+38", "f16": "65504"}[stored]
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # numpy's overflow warning was all a caller saw
        with pytest.raises(CheckpointError, match=rf"tensor '{name}' has values beyond the {stored} range "
                                                  rf"\(\|x\| > {limit}\), as {re.escape(repr(value))}"):
            Llama.from_weights(LlamaConfig.from_dict(cfg), w, dev, dtype=dtype, max_seq=16)


def test_from_weights_refuses_tensors_its_config_leaves_out(dev):
    """from_pretrained refuses a checkpoint's model tensors the config does not use (Checkpoint.check_all_read);
    from_weights read what it needed and dropped the rest: weights of 3 layers under a 2-layer config made a 2-layer
    model, a q_proj bias under attention_bias=false was never added, and a tied config's own lm_head.weight, where
    transformers computes the logits from it, was passed over for the embedding (a QuantizedLlama's alike). Each is
    now a CheckpointError naming the tensors, before the model allocates; a tied lm_head equal to the embedding and
    rotary inv_freq buffers pass, as from_pretrained lets them."""
    from wgraph.models import Llama
    from wgraph.models.quantized import QuantizedLlama, quantize_checkpoint

    cfg = tiny_config(num_hidden_layers=3, vocab_size=16, hidden_size=32, intermediate_size=32, head_dim=8)
    w = random_weights(cfg)
    two = LlamaConfig.from_dict(dict(cfg, num_hidden_layers=2))
    tied = LlamaConfig.from_dict(dict(cfg, tie_word_embeddings=True))
    bias = dict(w, **{"model.layers.0.self_attn.q_proj.bias": np.ones(32, np.float32)})
    before = dev.stats.snapshot()
    cases = [(lambda: Llama.from_weights(two, w, dev, dtype="f32", max_seq=8),
              r"Llama.from_weights: tensors \['model.layers.2.input_layernorm.weight', .*\] \(9 in all\) are not "
              r"used by the llama model the config describes"),
             (lambda: QuantizedLlama.from_weights(two, quantize_checkpoint(w, "Q8_0"), dev, max_seq=8),
              r"QuantizedLlama: tensors \['model.layers.2.input_layernorm.weight', .*\] \(9 in all\)"),
             (lambda: QuantizedLlama(two, dev, w, max_seq=8), r"QuantizedLlama: tensors \['model.layers.2.input_"),
             (lambda: Llama.from_weights(LlamaConfig.from_dict(cfg), bias, dev, dtype="f32", max_seq=8),
              r"tensors \['model.layers.0.self_attn.q_proj.bias'\] \(1 in all\) are not used"),
             (lambda: Llama.from_weights(tied, w, dev, dtype="f32", max_seq=8),
              r"tensors \['lm_head.weight'\] \(1 in all\) are not used by the llama model the config describes \(a "
              r"tied model's lm_head.weight is taken only where it equals model.embed_tokens.weight\)")]
    for make, match in cases:
        with pytest.raises(CheckpointError, match=match):
            make()
    assert dev.stats.since(before).buffers_created == 0
    same = dict(w, **{"lm_head.weight": w["model.embed_tokens.weight"].copy(),
                      "model.layers.0.self_attn.rotary_emb.inv_freq": np.ones(4, np.float32)})
    assert Llama.from_weights(tied, same, dev, dtype="f32", max_seq=8).config.tie_word_embeddings


@pytest.mark.parametrize("storage", ["f32", "bf16"])
def test_a_bf16_checkpoints_tensors_are_written_by_value(tmp_path, storage):
    """Checkpoint.get's bf16 tensors (BF16_BITS bit patterns) written again: np.asarray(bits, np.float32) took
    the bits as numbers (1.0, 0x3F80, written as 16256.0)."""
    cfg = tiny_config()
    w = random_weights(cfg, seed=5)
    bf16 = Checkpoint(write_checkpoint(tmp_path / "bf16", cfg, w, storage="bf16"))
    bits = {name: bf16.get(name, a.shape) for name, a in w.items()}
    again = Checkpoint(write_checkpoint(tmp_path / storage, cfg, bits, storage=storage))
    for name, b in bits.items():
        # the bf16 value, by hand: its 16 bits are the high half of the float32's
        want = (b.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        got = again.get(name, b.shape)
        got = from_bf16(got) if storage == "bf16" else got
        assert np.array_equal(got, want), name
