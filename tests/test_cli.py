"""The `t2` command: its verbs, one-line errors, the two root scripts as thin wrappers of the
same code, decoding options generated from the decode section, and `t2 average` end to end."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from toy_task import t2_here, tiny_config, write_run

from t2.cli import build_parser
from t2.commands import VERBS
from t2.config import DecodeConfig
from t2.rundir import RunDir, read_meta

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
SCRIPTS = {"train": "train.py", "evaluate": "evaluate_model.py"}
CARD_SCRIPTS = {  # the top-level folders of the design card's layout, each with a README
    "tokenizer/train_tokenizer.py": "tokenizer",
    "evaluation/evaluate_newstest.py": "evaluate",
    "evaluation/robustness.py": "robustness",
}


def t2(*args: str, script: str | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    head = [str(ROOT / script)] if script else ["-m", "t2"]
    return subprocess.run(
        [sys.executable, *head, *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=300,
    )


def test_help_lists_every_verb_and_each_verb_has_help(capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--help"])
    listing = capsys.readouterr().out
    assert done.value.code == 0 and all(f"    {verb}" in listing for verb in VERBS)
    for verb in VERBS:
        with pytest.raises(SystemExit) as done:
            build_parser().parse_args([verb, "--help"])
        assert done.value.code == 0 and "usage: t2 " + verb in capsys.readouterr().out


def test_an_unknown_verb_or_option_is_one_line_naming_the_choices():
    result = t2("frob")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "invalid choice: 'frob'" in result.stderr and all(v in result.stderr for v in VERBS)
    result = t2("evaluate", "--checkpoint", "x", "--beem", "4")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "unrecognized arguments: --beem 4; see t2 evaluate --help" in result.stderr


def test_the_scripts_run_the_same_code_as_the_verbs(tmp_path):
    """train.py under python (and so torchrun) and `t2 train` print the same; the scripts
    are wrappers with no sys.path edits, so they also run from another folder."""
    by_verb = t2("train", "--recipe", "quickstart", "--dry-run")
    by_script = t2("--recipe", "quickstart", "--dry-run", script="train.py", cwd=tmp_path)
    assert by_verb.returncode == by_script.returncode == 0, by_script.stderr
    assert by_verb.stdout == by_script.stdout and "parameters" in by_verb.stdout
    for verb, script in SCRIPTS.items():
        text = (ROOT / script).read_text()
        assert f'run_script("{verb}")' in text and "sys.path" not in text, script
        assert len(text.splitlines()) <= 10, script


@pytest.mark.parametrize("script", sorted(CARD_SCRIPTS))
def test_the_card_scripts_are_the_verbs(script, tmp_path):
    """tokenizer/ and evaluation/ hold wrappers of a verb: --help works from another folder
    and lists the verb's options, and the script runs the verb's own code."""
    verb = CARD_SCRIPTS[script]
    text = (ROOT / script).read_text()
    assert f'run_script("{verb}")' in text and "sys.path" not in text
    assert len(text.splitlines()) <= 10 and (ROOT / script).parent.joinpath("README.md").is_file()
    by_script = t2("--help", script=script, cwd=tmp_path)
    by_verb = t2(verb, "--help")
    assert by_script.returncode == by_verb.returncode == 0, by_script.stderr
    options = [set(re.findall(r"--[a-z][a-z-]+", r.stdout)) for r in (by_script, by_verb)]
    assert options[0] == options[1] and "--help" in options[0]


def test_evaluate_takes_several_testsets_in_one_call():
    args = build_parser().parse_args(
        ["evaluate", "--checkpoint", "x", "--testset", "wmt13", "wmt14", "--langpair", "de-en"]
    )
    assert args.testset == ["wmt13", "wmt14"]


def test_every_decode_key_is_a_flag_of_every_decoding_verb(capsys):
    """The decode section's fields are the flags: names, types, choices and help come from
    DecodeConfig, so a new decode key is a flag of evaluate and translate at once."""
    names = [f.name for f in dataclasses.fields(DecodeConfig)]
    for verb in ("evaluate", "translate"):
        args = vars(build_parser().parse_args([verb, "--checkpoint", "r"]))
        expected = [n for n in names if verb == "translate" or n != "nbest"]  # evaluate: 1-best
        assert all(n in args and args[n] is None for n in expected), verb
        with pytest.raises(SystemExit):
            build_parser().parse_args([verb, "--help"])
        listing = capsys.readouterr().out
        assert all(f"decode.{n}:" in listing for n in expected), verb
    args = build_parser().parse_args(
        [
            "translate",
            "--checkpoint",
            "r",
            "--search",
            "sample",
            "--top-p",
            "0.9",
            "--top-k",
            "5",
            "--seed",
            "3",
        ]
    )
    assert (args.search, args.top_p, args.top_k, args.seed) == ("sample", 0.9, 5, 3)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["translate", "--checkpoint", "r", "--search", "nucleus"])
    assert "invalid choice: 'nucleus'" in capsys.readouterr().err


def test_beam_is_an_alias_of_beam_size_the_decode_key():
    for verb in ("evaluate", "translate"):
        a = build_parser().parse_args([verb, "--checkpoint", "r", "--beam", "3"])
        b = build_parser().parse_args([verb, "--checkpoint", "r", "--beam-size", "3"])
        assert a.beam_size == b.beam_size == 3


def test_average_writes_a_checkpoint_that_evaluate_scores(toy, tmp_path):
    _, model, tokenizer = toy  # the verbs run in this process (toy_task.t2_here)
    cfg = tiny_config(len(tokenizer))
    run = write_run(tmp_path / "run", model, cfg, tokenizer, steps=(1, 2, 3))
    out = tmp_path / "avg"
    result = t2_here("average", str(run), "--last", "2", "--out", str(out))
    assert result.returncode == 0 and str(out) in result.stdout, result.stderr
    assert read_meta(out)["averaged"] == ["step-0000002", "step-0000003"]
    assert (out / "tokenizer" / "tokenizer.json").is_file()  # self-contained
    src, ref = tmp_path / "test.src", tmp_path / "test.ref"
    src.write_text("a b c\nd e f\n")
    ref.write_text("a b c\nd e f\n")
    result = t2_here(
        "evaluate",
        "--checkpoint",
        str(out),
        "--src",
        str(src),
        "--ref",
        str(ref),
        "--device",
        "cpu",
        "--show",
        "0",
    )
    assert result.returncode == 0 and "BLEU" in result.stdout, result.stderr
    elsewhere = tmp_path / "notes"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    result = t2_here("average", str(run), "--last", "2", "--out", str(elsewhere))
    assert result.returncode == 2 and "is not an averaged checkpoint" in result.stderr
    assert (elsewhere / "keep.txt").read_text() == "mine"  # nothing of the user's removed
    result = t2_here("average", str(run), "--last", "4")
    assert result.returncode == 2 and "needs 4 complete checkpoints" in result.stderr
    beside = RunDir(run).checkpoint_dir / "avg-last2-step-0000003"
    assert t2_here("average", str(run), "--last", "2").returncode == 0 and beside.is_dir()


_EXIT_PROGRAM = """
import atexit, sys, threading, time
from pathlib import Path
from t2.cli import run_main
from t2.errors import ConfigError

out = Path(sys.argv[1])

class Finalized:
    def __del__(self):  # runs only when the interpreter finalizes
        (out / "finalized").write_text("yes")

keep = Finalized()
atexit.register(lambda: (out / "atexit").write_text("yes"))
worker = threading.Thread(target=lambda: (time.sleep(0.2), (out / "thread").write_text("yes")))
worker.start()
print("no newline", end="")
print("to stderr", end="", file=sys.stderr)

def fail():
    raise ConfigError("bad value")

run_main((lambda: 3) if sys.argv[2] == "code" else fail)
"""


@pytest.mark.parametrize("world_size", ["1", "2"])
@pytest.mark.parametrize(("outcome", "status"), [("code", 3), ("error", 2)])
def test_a_process_of_a_multi_process_job_exits_without_finalizing(
    tmp_path, world_size, outcome, status
):
    """Under torchrun (WORLD_SIZE > 1) the exit skips CPython's finalization, where gloo's
    lingering threads abort the process; it still joins threads, runs atexit handlers and
    flushes, and keeps the status. A single process exits as Python does."""
    result = subprocess.run(
        [sys.executable, "-c", _EXIT_PROGRAM, str(tmp_path), outcome],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**ENV, "WORLD_SIZE": world_size},
    )
    assert result.returncode == status, result.stderr
    assert result.stdout == "no newline" and result.stderr.startswith("to stderr")
    assert (tmp_path / "atexit").exists() and (tmp_path / "thread").exists()
    assert (tmp_path / "finalized").exists() == (world_size == "1")
    if outcome == "error":
        assert result.stderr == "to stderrerror: bad value\n"
