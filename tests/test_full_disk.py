"""A full disk at any write a run makes is one line, recognised by the error number or the
free space left (never by the error's words), and leaves nothing half-written under a
final name. The writes go to a real 8 MiB tmpfs (root only: skipped elsewhere); the
errors are the kernel's, PyTorch's and safetensors' own."""

from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from t2.atomic import is_full_disk, writing
from t2.config import Config, ModelConfig
from t2.data.config import DataConfig
from t2.data.pipeline import load_pairs
from t2.data.tokenizer import train_tokenizer
from t2.errors import DiskFullError
from t2.hub import save_pretrained
from t2.model.transformer import Transformer
from t2.rundir import RunDir, save_checkpoint, write_json
from t2.rundir.layout import write_lines
from t2.rundir.store import full_disk_resumes
from t2.train.tracking import MetricsLog

pytestmark = pytest.mark.usefixtures("single_thread")

TINY = ModelConfig(
    vocab_size=40, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1
)
STATE = {"step": 3, "optimizer": {}, "scheduler": {}, "rng": {}, "data": {}}
PAGE = 4096


@pytest.fixture
def disk(tmp_path):
    """An 8 MiB tmpfs, unmounted after the test."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path, leave: int = 0) -> None:
    """Fill the tmpfs but `leave` bytes (whole pages)."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with (disk / "filler").open("wb") as f:
        f.write(b"\0" * max(free - leave, 0))


def one_line(err: DiskFullError, *named: object) -> str:
    message = str(err)
    assert "\n" not in message and message.startswith("no space left on the device of ")
    assert " free); " in message
    for name in named:
        assert str(name) in message, (name, message)
    return message


def test_a_disk_filling_as_torch_save_writes_the_file_end_names_the_intact_checkpoint(
    disk, monkeypatch
):
    run = RunDir(disk / "run")
    first = save_checkpoint(run, 3, Transformer(TINY), Config(model=TINY), STATE, keep_last=3)
    state = {**STATE, "step": 6, "optimizer": {"m": torch.zeros(100_000)}}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    pages = -(-buffer.getbuffer().nbytes // PAGE)
    real_save = torch.save

    def save_on_a_filling_disk(obj, path):  # all but the last page of the file fits
        fill(disk, (pages - 1) * PAGE)
        real_save(obj, path)

    monkeypatch.setattr("t2.rundir.store.torch.save", save_on_a_filling_disk)
    with pytest.raises(DiskFullError) as caught:
        save_checkpoint(run, 6, Transformer(TINY), Config(model=TINY), state, keep_last=3)
    first_error = caught.value
    while first_error.__context__ is not None:
        first_error = first_error.__context__
    assert type(first_error) is RuntimeError  # PyTorch's, with no errno: "unexpected pos"
    message = one_line(caught.value, run.checkpoint(6), f"{first} is intact", "--resume")
    assert "(0.0 MiB free)" in message
    assert sorted(p.name for p in run.checkpoint_dir.iterdir()) == ["step-0000003"]


def _tokenizer(folder: Path):
    texts = ["ein kleiner Test", "a small test", "noch ein Satz", "one more sentence"] * 10
    return train_tokenizer(texts, 300, 1, False, folder)


def _export(out: Path, tmp: Path):
    tokenizer = _tokenizer(tmp / "tok")
    cfg = Config(model=dataclasses.replace(TINY, vocab_size=len(tokenizer)))
    return lambda: save_pretrained(Transformer(cfg.model), cfg, tokenizer, out / "model")


def _metrics(out: Path, tmp: Path):
    log = MetricsLog(out / "metrics.jsonl", 1)  # a resumed run's log, opened before
    return lambda: log.write({"step": 2, "note": "x" * 3 * PAGE})


WRITERS = {  # what a run writes -> (run folder, scratch folder) -> the write, made ready
    "metrics.jsonl": _metrics,
    "results.json": lambda out, tmp: lambda: write_json(out / "results.json", {"bleu": 1.0}),
    "translations": lambda out, tmp: lambda: write_lines(out / "test.hyps.txt", ["a"] * 100),
    "tokenizer": lambda out, tmp: lambda: _tokenizer(out / "tokenizer"),
    "export": _export,
    "data cache": lambda out, tmp: (
        lambda: load_pairs(
            DataConfig(task_train_size=200, cache_dir=str(out / "cache")), "train", 1
        )
    ),
}


@pytest.mark.parametrize("writer", WRITERS)
def test_every_write_on_a_full_disk_is_one_line_and_leaves_nothing_half_written(
    disk, tmp_path, writer
):
    out = disk / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"step": 1}\n')  # what a resumed log holds before
    write = WRITERS[writer](out, tmp_path)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    fill(disk)
    with pytest.raises(DiskFullError) as caught:
        write()
    one_line(caught.value, out, "(0.0 MiB free)")
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_full_disk_in_a_run_names_the_newest_checkpoint_or_none(tmp_path):
    run = RunDir(tmp_path / "run")
    err = DiskFullError(str(run.metrics), run.path, 0)
    with (
        pytest.raises(DiskFullError, match="no checkpoint was written yet"),
        full_disk_resumes(run),
    ):
        raise err
    ckpt = save_checkpoint(run, 3, Transformer(TINY), Config(model=TINY), STATE, keep_last=3)
    with pytest.raises(DiskFullError) as caught, full_disk_resumes(run):
        raise err
    one_line(caught.value, run.metrics, f"{ckpt} is intact", "--resume")


def test_a_full_disk_is_known_by_its_errno_or_free_space_never_by_words(tmp_path, monkeypatch):
    worded = RuntimeError("PytorchStreamWriter failed writing file: No space left on device")
    assert not is_full_disk(worded, tmp_path)  # words alone, with space free
    assert is_full_disk(OSError(28, "x"), tmp_path) and is_full_disk(OSError(122, "x"), tmp_path)
    chained = RuntimeError("wrapped")
    chained.__cause__ = OSError(28, "x")
    assert is_full_disk(chained, tmp_path)
    with pytest.raises(KeyError), writing("x", tmp_path):  # space free: as it was raised
        raise KeyError("x")
    monkeypatch.setattr("t2.atomic.free_bytes", lambda folder: 4096)
    assert is_full_disk(RuntimeError("unexpected pos 54400 vs 54288"), tmp_path)


FILL_AT_STEP = """
import os, runpy, sys
import t2.train.loop as loop
step_fn, calls = loop.train_step, [0]
def filling(*args, **kwargs):  # the disk of --out fills as step 5 begins
    calls[0] += 1
    if calls[0] == 5:
        disk = os.environ["T2_DISK"]
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        with open(os.path.join(disk, "filler"), "wb") as f:
            f.write(bytes(free))
    step_fn(*args, **kwargs)
loop.train_step = filling
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow
def test_a_training_run_on_a_disk_that_fills_ends_in_one_line_and_resumes(disk, tmp_path):
    from test_train_runs import ENV, ROOT, TINY

    run = disk / "run"
    sets = [arg for kv in (*TINY, f"data.cache_dir={tmp_path / 'cache'}") for arg in ("--set", kv)]
    args = [
        str(ROOT / "train.py"),
        "--recipe",
        "quickstart",
        "--out",
        str(run),
        "--wandb",
        "disabled",
        *sets,
    ]
    env = {**ENV, "T2_DISK": str(disk)}
    cut = subprocess.run(
        [sys.executable, "-c", FILL_AT_STEP, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert cut.returncode == 2, cut.stderr[-3000:]
    lines = [line for line in cut.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in cut.stderr, cut.stderr[-3000:]
    intact = RunDir(run).checkpoint(3)
    assert lines[0].startswith(f"error: no space left on the device of {run}")
    assert f"{intact} is intact: free space (or lower train.keep_last) and --resume" in lines[0]
    assert RunDir(run).latest() == intact
    assert not list(RunDir(run).checkpoint_dir.glob(".tmp-*"))
    (disk / "filler").unlink()
    again = subprocess.run(
        [sys.executable, *args, "--resume"],
        env=ENV,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert RunDir(run).latest().name == "step-0000006" and (run / "results.json").is_file()
