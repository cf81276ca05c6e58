"""The run directory's owner: atomic checkpoints, best/latest/last-N, format versions,
checksums that catch a changed file, and a checked-in run of format 1 that still loads."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from t2 import __version__
from t2.config import Config, ModelConfig
from t2.errors import CheckpointError, DiskFullError
from t2.formats.run import load_run
from t2.model.transformer import Transformer
from t2.rundir import (
    FORMAT,
    RunDir,
    load_training_state,
    read_meta,
    resolve,
    save_checkpoint,
)
from t2.rundir.layout import COMPLETE, META, STATE, WEIGHTS

pytestmark = pytest.mark.usefixtures("single_thread")

TINY = ModelConfig(
    vocab_size=40, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1
)
FIXTURE = Path(__file__).parent / "fixtures" / "run_format1"
PACKAGE = Path(__file__).resolve().parent.parent / "t2"
STATE_OK = {"step": 1, "optimizer": {}, "scheduler": {}, "rng": {}, "data": {}}


def _save(run: RunDir, step: int, **kw) -> Path:
    state = {**STATE_OK, "step": step}
    return save_checkpoint(run, step, Transformer(TINY), Config(model=TINY), state, **kw)


def test_a_checkpoint_records_versions_world_size_step_and_checksums(tmp_path):
    ckpt = _save(RunDir(tmp_path), 7, keep_last=3, world_size=4)
    meta = json.loads((ckpt / META).read_text())
    assert meta["format"] == FORMAT and meta["t2"] == __version__
    assert meta["torch"] == torch.__version__ and meta["world_size"] == 4 and meta["step"] == 7
    assert set(meta["sha256"]) == {WEIGHTS, STATE}
    assert load_training_state(ckpt)["step"] == 7


def test_a_checkpoint_cut_off_while_written_is_never_loaded(tmp_path):
    run = RunDir(tmp_path)
    first, second = _save(run, 1, keep_last=3), _save(run, 2, keep_last=3)
    assert run.latest() == second
    (second / "COMPLETE").unlink()  # as if killed before the marker was written
    (tmp_path / "checkpoints" / ".tmp-step-0000003").mkdir()  # killed before the rename
    assert run.latest() == first and resolve(tmp_path) == first
    assert load_training_state(first)["step"] == 1
    _save(run, 4, keep_last=3)  # the next save clears what the killed one left
    assert not (tmp_path / "checkpoints" / ".tmp-step-0000003").exists()


def test_keep_last_prunes_old_checkpoints(tmp_path):
    run = RunDir(tmp_path)
    for step in range(1, 5):
        _save(run, step, keep_last=2)
    assert [p.name for p in run.checkpoints()] == ["step-0000003", "step-0000004"]
    assert [p.name for p in run.last(2)] == ["step-0000003", "step-0000004"]
    with pytest.raises(CheckpointError, match="needs 3 complete checkpoints"):
        run.last(3)


def test_keep_last_keeps_the_best_and_drops_the_best_it_replaced(tmp_path):
    run = RunDir(tmp_path)
    for step, best in ((1, True), (2, False), (3, True), (4, False)):
        _save(run, step, keep_last=1, best=best)
        kept = sorted(p.name for p in run.checkpoints())
        assert kept == sorted({run.best().name, f"step-{step:07d}"}), (step, kept)
    assert resolve(tmp_path) == run.best() == run.checkpoint(3)  # the best, not the latest


def test_a_run_whose_best_checkpoint_is_gone_fails_instead_of_taking_another(tmp_path):
    """Scores of the latest checkpoint passed off as the best's would be wrong numbers."""
    run = RunDir(tmp_path)
    for step, best in ((1, False), (2, True), (3, False)):
        _save(run, step, keep_last=3, best=best)
    shutil.rmtree(run.checkpoint(2))
    with pytest.raises(CheckpointError) as err:
        resolve(tmp_path)
    assert str(err.value) == (
        f"{tmp_path} marks step-0000002 as its best checkpoint, but step-0000002 is missing "
        f"or incomplete; pass a checkpoint folder, e.g. {run.checkpoint(3)}"
    )
    assert resolve(run.checkpoint(3)) == run.checkpoint(3)  # the fix it names works
    from t2.rundir.average import last_checkpoints

    assert last_checkpoints(tmp_path, 2) == [run.checkpoint(1), run.checkpoint(3)]  # no best
    (run.checkpoint(3) / COMPLETE).unlink()
    shutil.rmtree(run.checkpoint(1))
    with pytest.raises(CheckpointError, match="is missing or incomplete; train it again"):
        resolve(tmp_path)


@pytest.mark.parametrize("name", [WEIGHTS, STATE])
def test_a_file_changed_after_it_was_written_is_refused(tmp_path, name):
    ckpt = _save(RunDir(tmp_path), 1, keep_last=1)
    data = bytearray((ckpt / name).read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, same size
    (ckpt / name).write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=f"{name} does not match the checksum"):
        load_run(ckpt) if name == WEIGHTS else load_training_state(ckpt)


def test_a_damaged_or_incomplete_training_state_is_one_clear_error(tmp_path):
    ckpt = _save(RunDir(tmp_path), 1, keep_last=1)
    meta = json.loads((ckpt / META).read_text())
    del meta["sha256"]  # so that the reader, not the checksum, meets the damage
    (ckpt / META).write_text(json.dumps(meta))
    (ckpt / STATE).write_bytes(b"\x80\x04garbage")
    with pytest.raises(CheckpointError, match=r"cannot read .*resume from another checkpoint"):
        load_training_state(ckpt)
    torch.save({"step": 1}, ckpt / STATE)
    with pytest.raises(CheckpointError, match="lacks optimizer, scheduler, rng, data"):
        load_training_state(ckpt)
    (ckpt / STATE).unlink()
    with pytest.raises(CheckpointError, match=f"{STATE} is missing"):
        load_training_state(ckpt)
    (ckpt / META).write_text("{not json")
    with pytest.raises(CheckpointError, match="is not valid JSON"):
        read_meta(ckpt)


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        (
            FORMAT + 1,
            rf"format {FORMAT + 1} \(t2 9\.9\); this t2 {__version__} reads formats 1 to "
            rf"{FORMAT}: upgrade t2",
        ),
        (
            0,
            rf"format 0; this t2 {__version__} reads formats 1 to {FORMAT}: "
            r"load it with the t2 9\.9",
        ),
    ],
)
def test_a_format_this_t2_cannot_read_names_both_versions(tmp_path, fmt, message):
    ckpt = _save(RunDir(tmp_path), 1, keep_last=1)
    meta = json.loads((ckpt / META).read_text())
    (ckpt / META).write_text(json.dumps({**meta, "format": fmt, "t2": "9.9"}))
    with pytest.raises(CheckpointError, match=message):
        load_run(ckpt)


def test_the_checked_in_format_1_run_still_loads_and_translates(tmp_path):
    """A run written by t2 0.1 (no meta.json): its weights evaluate, its training state
    (a per-process data position) is refused with both formats named."""
    run = shutil.copytree(FIXTURE, tmp_path / "run")
    bundle = load_run(run)
    model, cfg, tokenizer, ckpt = bundle.model, bundle.config, bundle.tokenizer, bundle.path
    assert ckpt.name == "step-0000002" and read_meta(ckpt)["format"] == 1
    assert len(tokenizer) == cfg.model.vocab_size == model.cfg.vocab_size
    from t2.serve.engine import translate

    out = translate(model, tokenizer, ["march 3 1999 monday"], cfg.decode)
    assert len(out) == 1 and isinstance(out[0], str)
    with pytest.raises(CheckpointError, match=r"format 1 \(t2 0\.1\).*resumes format 2"):
        load_training_state(ckpt)


def test_no_module_outside_the_owner_builds_a_path_inside_a_run_directory():
    """Layout names (checkpoints/, step-N, COMPLETE, best, the tokenizer beside them) are
    spelled in t2/rundir only."""
    names = "checkpoints|COMPLETE|best|config.yaml|meta.json|metrics.jsonl|results.json|tokenizer"
    names += "|model.safetensors|training_state.pt"
    pattern = re.compile(rf"""/ *["']({names.replace(".", "[.]")})["']|["']step-|ckpt\.parent""")
    offenders = [
        f"{path.relative_to(PACKAGE.parent)}:{i}"
        for path in PACKAGE.rglob("*.py")
        if "rundir" not in path.parts
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


@pytest.mark.parametrize(
    ("fault", "free"),
    [
        # torch.save's own words when the disk fills as it writes the file's end: no errno,
        # recognised by the free space left (1 KiB)
        (
            RuntimeError(
                "[enforce fail at inline_container.cc:672] . unexpected pos 54400 vs 54288"
            ),
            1024,
        ),
        (OSError(28, "No space left on device"), 10 << 30),  # the errno, whatever is free
        (OSError(122, "Disk quota exceeded"), 10 << 30),
    ],
)
def test_a_full_disk_while_saving_is_one_line_naming_the_intact_checkpoint(
    tmp_path, monkeypatch, fault, free
):
    run = RunDir(tmp_path)
    first = _save(run, 3, keep_last=3)

    def full(*args, **kwargs):
        raise fault

    monkeypatch.setattr("t2.rundir.store.torch.save", full)
    monkeypatch.setattr("t2.atomic.free_bytes", lambda folder: free)
    with pytest.raises(DiskFullError) as caught:
        _save(run, 6, keep_last=3)
    message = str(caught.value)
    assert "no space left on the device" in message and "step-0000006" in message
    assert f"{first} is intact" in message and "\n" not in message
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-0000003"]
    assert run.latest() == first and load_training_state(first)["step"] == 3


def test_another_fault_while_saving_is_not_called_a_full_disk(tmp_path, monkeypatch):
    def broken(*args, **kwargs):  # words of a full disk, with space free: not one
        raise RuntimeError("file write failed: No space left on device")

    monkeypatch.setattr("t2.rundir.store.torch.save", broken)
    with pytest.raises(RuntimeError, match="file write failed"):
        _save(RunDir(tmp_path), 1, keep_last=3)
    assert list((tmp_path / "checkpoints").iterdir()) == []


def test_the_fault_probe_names_tests_that_exist():
    """tests/fault_probe.py runs tests by name: each must be there (a rename would make the
    probe report a fault as not run)."""
    import importlib.util

    path = Path(__file__).parent / "fault_probe.py"
    spec = importlib.util.spec_from_file_location("fault_probe", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    for test in probe.FAULTS.values():
        file, name = test.split("::")
        assert f"def {name}(" in (Path(__file__).parent / file).read_text(), test
