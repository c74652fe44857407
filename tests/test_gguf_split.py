"""Split GGUF models (llama.cpp's gguf-split: `<name>-00001-of-00003.gguf`, ...): from any shard, the model loads
with the tensors of every shard and runs to the same logits as the same model written as one file; a missing shard,
a shard of another split, a shard numbered wrong, a tensor in two shards or a tensor count that does not add up is
refused naming the file and the field."""

from pathlib import Path

import gguf
import numpy as np
import pytest

import tiny_files
from wgraph.errors import CheckpointError
from wgraph.models import Tokenizer, from_pretrained
from wgraph.models.gguf import GGUFFile, open_split

CFG = tiny_files.tiny_model_config("llama", vocab_size=300)


def _model(tmp_path: Path, split_max_tensors: int = 0) -> Path:
    weights = tiny_files.arch_weights("llama", CFG, seed=5)
    tmp_path.mkdir(exist_ok=True)
    return tiny_files.write_model(tmp_path / "m.gguf", "llama", CFG, weights, split_max_tensors=split_max_tensors,
                                  tokenizer=tiny_files.byte_level_tokenizer())


def _rewrite(path: Path, split: dict, tensors: dict) -> None:
    """Shard `path` written again with `split` metadata {key: value} and F32 `tensors` {name: array}."""
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value in split.items():
        w.add_uint16(key, value) if key != "split.tensors.count" else w.add_int32(key, value)
    for name, a in tensors.items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _tensors(path: Path) -> dict:
    # copies: the shard is written again over the map these views read
    return {n: np.frombuffer(t.raw, np.float32).reshape(t.shape).copy() for n, t in GGUFFile(path).tensors.items()}


def test_a_split_model_runs_like_the_single_file(tmp_path, dev):
    one = _model(tmp_path / "one")
    first = _model(tmp_path / "split", split_max_tensors=8)
    shards = sorted(first.parent.glob("m-*.gguf"))
    assert [p.name for p in shards] == [f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    whole, merged = GGUFFile(one), open_split(shards[1])   # any shard names the model
    assert merged.path == first and list(merged.tensors) == list(whole.tensors)
    assert all(bytes(merged.tensors[n].raw) == bytes(t.raw) for n, t in whole.tensors.items())
    a, b = from_pretrained(one, dev, dtype="f32", max_seq=16), from_pretrained(first, dev, dtype="f32", max_seq=16)
    ids = [5, 17, 200, 2]
    assert np.array_equal(a.prefill(ids, all_logits=True).numpy(), b.prefill(ids, all_logits=True).numpy())
    assert b.generate(ids, 5) == a.generate(ids, 5)
    assert b.tokenizer.encode("Hello") == a.tokenizer.encode("Hello")


def _hostile(tmp_path, case) -> Path:
    first = _model(tmp_path, split_max_tensors=8)
    second, third = (first.with_name(f"m-0000{i}-of-00003.gguf") for i in (2, 3))
    t2, t3 = _tensors(second), _tensors(third)
    split = {"split.no": 2, "split.count": 3, "split.tensors.count": 21}
    if case == "missing":
        third.unlink()
    elif case == "other split":
        _rewrite(third, dict(split, **{"split.count": 4}), t3)
    elif case == "numbered wrong":
        _rewrite(third, dict(split, **{"split.no": 1}), t3)
    elif case == "duplicate":
        _rewrite(third, split, dict(t3, **{next(iter(t2)): next(iter(t2.values()))}))
    elif case == "count":
        _rewrite(third, split, dict(list(t3.items())[1:]))
    elif case == "no split keys":
        _rewrite(third, {}, t3)
    elif case == "renamed":
        first = first.rename(first.with_name("m.gguf"))
    return first


@pytest.mark.parametrize("case, match", [
    ("missing", r"m-00003-of-00003.gguf: shard 3 of the 3 of split model m-00001-of-00003.gguf is missing"),
    ("other split", r"m-00003-of-00003.gguf: metadata split.count=4, but .* it must be 3"),
    ("numbered wrong", r"m-00003-of-00003.gguf: metadata split.no=1, but as shard 3 .* it must be 2"),
    ("duplicate", r"m-00003-of-00003.gguf: tensor 'blk.0.ffn_gate.weight' is also in m-00002-of-00003.gguf"),
    ("count", r"m-00001-of-00003.gguf: its 3 shards hold 20 tensors, split.tensors.count=21"),
    ("no split keys", r"m-00003-of-00003.gguf: metadata 'split.no' is missing"),
    ("renamed", r"m.gguf: split.count=3 but its name is not '<model>-%05d-of-00003.gguf'"),
])
def test_a_broken_split_is_refused_naming_the_file_and_field(tmp_path, dev, case, match):
    first = _hostile(tmp_path, case)
    with pytest.raises(CheckpointError, match=match):
        from_pretrained(first, dev, dtype="f32", max_seq=16)


def test_the_tokenizer_of_any_shard_is_the_models(tmp_path):
    """Tokenizer.from_gguf of a later shard read that shard alone, which holds no tokenizer metadata."""
    one = _model(tmp_path / "one")
    first = _model(tmp_path / "split", split_max_tensors=8)
    whole = Tokenizer.from_gguf(one)
    for shard in sorted(first.parent.glob("m-*.gguf")):
        assert Tokenizer.from_gguf(shard).encode("Hello, shards") == whole.encode("Hello, shards"), shard.name
