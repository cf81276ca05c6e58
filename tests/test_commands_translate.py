"""`t2 translate`: stdin or a file in, one line out per line in, n-best format, sampling."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from toy_task import toy_pairs

from t2.config import DecodeConfig
from t2.serve.engine import translate

COMMAND = [sys.executable, "-m", "t2", "translate"]

pytestmark = pytest.mark.usefixtures("single_thread")


def run_script(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [*COMMAND, "--device", "cpu", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env)


def test_stdin_lines_in_translations_out(toy, tmp_path):
    run, model, tokenizer = toy
    lines = [s for s, _ in toy_pairs(7, seed=11)]
    lines.insert(3, "")
    result = run_script(
        "--checkpoint", str(run), "--beam", "2", "--batch-size", "3", stdin="\n".join(lines) + "\n"
    )
    assert result.returncode == 0, result.stderr
    expected = translate(model, tokenizer, lines, DecodeConfig(beam_size=2))
    assert result.stdout.split("\n")[:-1] == expected
    (tmp_path / "in.txt").write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    files = ["--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out")]
    nbest = run_script("--checkpoint", str(run), "--beam", "3", "--nbest", "2", *files)
    assert nbest.returncode == 0, nbest.stderr
    rows = [r.split(" ||| ") for r in (tmp_path / "out").read_text().splitlines()]
    assert [int(r[0]) for r in rows] == [0, 0, 1, 1, 2, 2, 3]  # the blank line: one row
    best = translate(model, tokenizer, lines[:1], DecodeConfig(beam_size=3))[0]
    assert rows[0][1] == best and float(rows[0][2]) >= float(rows[1][2])


def test_missing_input_and_bad_nbest_fail_in_one_line(toy, tmp_path):
    run, _, _ = toy
    result = run_script("--checkpoint", str(run), "--input", str(tmp_path / "missing.txt"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "missing.txt not found" in result.stderr
    result = run_script("--checkpoint", str(run), "--beam", "2", "--nbest", "3")
    message = "decode.nbest=3 is more than decode.beam_size=2"  # checked by DecodeConfig
    assert result.returncode == 2 and message in result.stderr


def test_input_that_is_not_utf8_and_a_missing_output_folder_fail_in_one_line(toy, tmp_path):
    run, _, _ = toy
    latin = tmp_path / "latin.txt"
    latin.write_bytes("Grüße\n".encode("latin-1"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [*COMMAND, "--device", "cpu", "--checkpoint", str(run)]
    for args, stdin in (([], latin.read_bytes()), (["--input", str(latin)], b"")):
        result = subprocess.run([*cmd, *args], input=stdin, capture_output=True, env=env)
        stderr = result.stderr.decode()
        assert result.returncode == 2 and stderr.count("\n") == 1, stderr
        assert "byte 0xfc in line 1 or later is not UTF-8" in stderr
    missing = str(tmp_path / "no" / "out.txt")
    result = run_script("--checkpoint", str(run), "--output", missing, stdin="a\n")
    assert result.returncode == 2 and "output folder of" in result.stderr, result.stderr


def test_bfloat16_decoding_casts_the_model_and_translates_as_float32(toy, tmp_path):
    """--precision bfloat16 decodes with every weight in bfloat16; on the confident toy model
    the translations are float32's, and an unknown precision fails listing the valid ones."""
    import torch

    from t2.errors import ConfigError
    from t2.opener import open_model

    run, model, tokenizer = toy
    lines = [s for s, _ in toy_pairs(20, seed=12)]
    engine = open_model(run, precision="bfloat16").engine
    assert {p.dtype for p in engine.model.parameters()} == {torch.bfloat16}
    decode = DecodeConfig(beam_size=2)
    assert engine.translate(lines, decode) == translate(model, tokenizer, lines, decode)
    assert next(model.parameters()).dtype == torch.float32  # the shared toy model untouched
    result = run_script(
        "--checkpoint",
        str(run),
        "--precision",
        "bfloat16",
        "--beam",
        "2",
        stdin="\n".join(lines[:3]) + "\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == translate(model, tokenizer, lines[:3], decode)
    with pytest.raises(ConfigError, match="valid choices: float32, bfloat16, float16"):
        open_model(run, precision="int4")


def test_output_appears_under_its_name_only_when_complete(toy, tmp_path):
    """A translate that fails on bad input, or is interrupted (SIGINT, as Ctrl-C) while
    writing, leaves no file under --output's name and no temporary file beside it; a
    previous complete output stays as it was."""
    import signal
    import time

    run, _, _ = toy
    latin = tmp_path / "latin.txt"
    latin.write_bytes("Grüße\n".encode("latin-1"))
    out = tmp_path / "out.txt"
    failed = run_script("--checkpoint", str(run), "--input", str(latin), "--output", str(out))
    assert failed.returncode == 2 and not out.exists() and list(tmp_path.iterdir()) == [latin]
    many = tmp_path / "many.txt"
    many.write_text("".join(f"{s}\n" for s, _ in toy_pairs(50, seed=13)) * 400)
    out.write_text("the previous output\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # Ctrl-C as a shell delivers it: to a process whose SIGINT is not ignored. A test
    # process may have inherited or been left with SIGINT ignored (a pytest-xdist worker
    # after some libraries ran), and a child started from it would ignore Ctrl-C too.
    ctrl_c_reaches = (
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('t2', run_name='__main__', alter_sys=True)"
    )
    cmd = [
        sys.executable,
        "-c",
        ctrl_c_reaches,
        "translate",
        "--device",
        "cpu",
        "--checkpoint",
        str(run),
        "--batch-size",
        "8",
        "--input",
        str(many),
        "--output",
        str(out),
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not any(p.name.endswith(".part") for p in tmp_path.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    time.sleep(0.5)  # some batches written to the temporary file
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and b"interrupted" in stderr, stderr
    assert out.read_text() == "the previous output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latin.txt", "many.txt", "out.txt"]


def test_sampling_a_stream_is_reproducible_and_draws_anew_for_every_chunk(toy):
    """`t2 translate --search sample` reads in chunks: each chunk has its own seed (derived
    from --seed and its place), so a repeated line is sampled afresh, and a rerun with
    the same seed writes the same output."""
    from t2.opener import open_model

    run, _, _ = toy
    engine = open_model(run).engine
    line = toy_pairs(1, seed=5)[0][0]
    decode = DecodeConfig(search="sample", batch_size=1, temperature=3.0, seed=7)

    def sampled() -> list[str]:
        return [hyps[0][0] for chunk in engine.stream([line] * 8, decode) for hyps in chunk]

    first = sampled()
    assert sampled() == first and len(set(first)) > 1
