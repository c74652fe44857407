"""The command line as a newcomer meets it: every option's help says its default, soak says how long it takes,
maintainer options stay hidden, --version prints pyproject's version, and the `wgraph` console script resolves to
the same entry point as `python -m wgraph`."""

import argparse
import importlib
import re
import tomllib
from pathlib import Path

import pytest

from wgraph.__main__ import main as cli_main

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _help(capsys, command: str) -> str:
    with pytest.raises(SystemExit) as info:
        cli_main([command, "--help"])
    assert info.value.code == 0
    return " ".join(capsys.readouterr().out.split())   # argparse wraps lines: compare words


def test_soak_help_says_defaults_time_and_what_warmup_counts(capsys):
    text = _help(capsys, "soak")
    assert "replays of the compiled decode step (default: 10000)" in text
    assert "immediate attention calls (default: 10000)" in text
    assert "about 2 minutes on lavapipe" in text and "progress on stderr" in text
    assert re.search(r"--warmup WARMUP steps \(and calls\) before this count are warm-up.*\(default: 1000\)", text)
    assert "--write-doc" not in text and "write-doc" not in text   # a maintainer's option


@pytest.mark.parametrize("command", ["bench", "soak", "generate"])
def test_every_option_has_help_and_says_its_default(command):
    module = importlib.import_module({"bench": "wgraph.bench", "soak": "wgraph.soak",
                                      "generate": "wgraph.models.cli"}[command])
    parser = module.parser()
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        assert action.help, (command, action.dest)
        said = " ".join(action.help.split())
        if action.default not in (None, False) and action.dest != "help":
            assert "default" in said or f"(default: {action.default})" in text, (command, action.dest)


def test_version_is_pyprojects(capsys):
    import wgraph

    assert cli_main(["--version"]) == 0
    assert capsys.readouterr().out == f"wgraph {PYPROJECT['project']['version']}\n"
    assert wgraph.__version__ == PYPROJECT["project"]["version"]


def test_console_script_resolves_to_the_cli(capsys):
    target = PYPROJECT["project"]["scripts"]["wgraph"]
    module, attr = target.split(":")
    entry = getattr(importlib.import_module(module), attr)
    assert entry is cli_main
    assert entry(["--version"]) == 0 and capsys.readouterr().out.startswith("wgraph ")


def test_no_command_is_a_usage_error_on_stderr(capsys):
    """No command printed the usage on stdout with exit code 2: a usage error goes to stderr (as an unknown
    command's and argparse's do), and asked for with --help it goes to stdout with 0."""
    assert cli_main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("no command given\n\nusage: python -m wgraph <command>")
    assert cli_main(["nonsense"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("unknown command 'nonsense'\n\nusage: ")
    assert cli_main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: python -m wgraph <command>") and err == ""


@pytest.mark.parametrize("argv", [["soak", "--steps", "2", "--calls", "2", "--warmup", "0"],
                                  ["generate", "model.gguf", "--prompt-ids", "1"],
                                  ["bench", "--only", "host", "--no-torch"]])
def test_a_wgraph_error_is_a_message_and_exit_code_1(capsys, monkeypatch, tmp_path, argv):
    """WGRAPH_ADAPTER naming no adapter raised DeviceError from default_device as a traceback in every command
    (generate caught wgraph's errors only after it had opened the device); now one line on stderr, exit code 1."""
    import wgraph
    from wgraph.errors import DeviceError

    if argv[0] == "generate":   # a path that exists: generate refuses a missing one before it opens the device
        monkeypatch.chdir(tmp_path)
        (tmp_path / "model.gguf").touch()

    def no_device(*a, **k):
        raise DeviceError("WGRAPH_ADAPTER='nosuchgpu' matches none of: ['llvmpipe']")

    monkeypatch.setattr(wgraph, "default_device", no_device)
    assert cli_main(argv) == 1
    out, err = capsys.readouterr()
    assert f"python -m wgraph {argv[0]}: error: WGRAPH_ADAPTER='nosuchgpu' matches none of" in err
    assert "Traceback" not in err
