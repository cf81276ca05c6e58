"""The one tokenizer command: trains from a recipe, reuses its folder, fails in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from transformers import PreTrainedTokenizerFast

SCRIPT = ["-m", "t2", "tokenizer"]


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        *SCRIPT,
        "--recipe",
        "quickstart",
        "--set",
        f"data.cache_dir={tmp_path / 'cache'}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def test_command_trains_then_reuses_and_reports_errors_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "tok"
    first = run(tmp_path, "--set", "data.task_train_size=500", "--out", str(out))
    assert first.returncode == 0, first.stderr
    assert "from 500 pairs" in first.stdout and "data.tokenizer=" in first.stdout
    tok = PreTrainedTokenizerFast.from_pretrained(out)
    assert tok.pad_token_id == 0 and len(tok) <= 128  # the quickstart's vocab_size
    again = run(tmp_path, "--out", str(out))
    assert again.returncode == 0 and "reusing it" in again.stdout
    bad = run(tmp_path, "--set", "data.train=files:missing/train", "--out", str(tmp_path / "x"))
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "error: missing/train.src: file not found; check the files:PREFIX source"
    )
    (tmp_path / "a_file").write_text("")
    blocked = run(tmp_path, "--out", str(tmp_path / "a_file" / "tok"))
    assert blocked.returncode == 2 and "Traceback" not in blocked.stderr
    assert "a_file is a file, not a folder" in blocked.stderr
