"""`python -m wgraph generate` and the bench's model row, in-process on tiny models."""

import pytest

from wgraph.__main__ import main as cli_main
from wgraph.bench import main as bench_main
from wgraph.models.config import STEPS_PER_SUBMIT
from wgraph.models.random_checkpoint import random_weights, tiny_config, write_checkpoint

import llama_reference as ref


def test_generate_command(tmp_path, capsys):
    cfg = tiny_config()
    w = random_weights(cfg, seed=0)
    path = write_checkpoint(tmp_path, cfg, w, storage="f16")
    from wgraph.models.random_checkpoint import stored_values

    want, _ = ref.greedy(cfg, {k: stored_values(v, "f16") for k, v in w.items()}, [3, 4], 8)
    assert cli_main(["generate", str(path), "--prompt-ids", "3,4", "--max-new-tokens", "8", "--dtype", "f32",
                     "--read-every", "4"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == ",".join(map(str, want))
    assert "4/8 tokens" in err and "8/8 tokens" in err and "2 readbacks" in err  # reads at 4 and 8
    # stderr is not a terminal here: plain lines (a log gets no carriage returns), and what it was doing
    assert "\r" not in err and f"loading {path} on " in err and "loaded in " in err
    assert cli_main(["generate", str(tmp_path / "nope"), "--prompt-ids", "1"]) == 1
    assert "config.json" in capsys.readouterr().err


def test_bench_model_row(dev):
    row = bench_main(["--only", "model", "--quick", "--no-torch"])["model"]["rows"][0]
    assert row["status"] == "ok", row
    assert row["submits_per_token"] == pytest.approx(1 / STEPS_PER_SUBMIT)
    assert row["model"] == "tiny-llama" and row["dispatches_per_token"] > 0
    assert row["weight_bytes_per_token"] > 0 and row["ms_per_token"] > 0 and 0 < row["host_ms_per_token"]
