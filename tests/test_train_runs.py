"""Training runs as a user starts them: train.py under python and as two processes,
resumed, bf16, W&B offline and the learning-rate finder. Tiny models, a few steps each."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from t2.data.tokenizer import load_tokenizer
from t2.rundir import RunDir
from t2.train.lr_find import smooth
from t2.train.tracking import read_metrics

ROOT = Path(__file__).resolve().parent.parent
TINY = [
    "model.d_model=32",
    "model.n_heads=2",
    "model.d_ff=64",
    "model.n_encoder_layers=1",
    "model.n_decoder_layers=1",
    "model.dropout=0.0",
    "data.vocab_size=64",
    "data.task_train_size=400",
    "data.task_eval_size=16",
    "data.max_tokens=400",
    "train.max_steps=6",
    "train.log_every=1",
    "train.eval_every=3",
    "train.save_every=3",
    "train.valid_bleu_sentences=4",
    "train.loader_workers=0",
    "train.warmup_steps=4",
    "decode.max_len_b=12",
]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def _train_args(out: Path, *extra: str) -> list[str]:
    sets = [arg for kv in TINY for arg in ("--set", kv)]
    return ["--recipe", "quickstart", "--out", str(out), "--wandb", "disabled", *sets, *extra]


def train(out: Path, *extra: str, launcher: list[str] | None = None, check: bool = True):
    cmd = [*(launcher or [sys.executable]), str(ROOT / "train.py"), *_train_args(out, *extra)]
    result = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=600)
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def train_here(out: Path, *extra: str, check: bool = True) -> subprocess.CompletedProcess:
    """train()'s run in this process (toy_task.t2_here), without a subprocess's ~4 s of
    imports: for a run that is not itself the subject (a reference, a set-up, a refusal's
    message); a test of a run's whole output starts a process."""
    from toy_task import t2_here

    result = t2_here("train", *_train_args(out, *extra))
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def load_config_of(run: Path):
    from t2.config import Config

    return Config.from_yaml((run / "config.yaml").read_text(), saved=True)


def final_weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(RunDir(run).latest() / "model.safetensors"))


def losses(run: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in read_metrics(run) if "loss" in r]


def assert_same_log(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    """The same steps, and losses equal within float tolerance (approx takes flat lists)."""
    assert got and [s for s, _ in got] == [s for s, _ in want]
    assert [v for _, v in got] == pytest.approx([v for _, v in want], abs=1e-6)


@pytest.mark.slow
def test_two_processes_equal_one_process_accumulating_two(tmp_path, two_process_run):
    ddp, outputs = two_process_run  # two processes that srun started (conftest)
    assert [code for code, _, _ in outputs] == [0, 0], outputs[0][2][-3000:]
    train_here(tmp_path / "acc", "--set", "train.accumulate=2")
    want, got = final_weights(ddp), final_weights(tmp_path / "acc")
    assert want.keys() == got.keys()
    for name in want:
        torch.testing.assert_close(want[name], got[name], rtol=1e-4, atol=1e-5, msg=name)
    assert [s for s, _ in losses(ddp)] == list(range(1, 7))


@pytest.mark.slow
@pytest.mark.parametrize("log_every", [1, 4])  # 4: the checkpoint at step 3 is mid-interval
def test_a_resumed_run_matches_an_uninterrupted_one(tmp_path, log_every):
    # background prefetch must not skip data; with dropout, the same masks must be drawn
    sets = (
        "--set",
        "train.loader_workers=1",
        "--set",
        f"train.log_every={log_every}",
        "--set",
        "model.dropout=0.1",
    )
    train_here(tmp_path / "full", *sets)
    train_here(tmp_path / "cut", *sets, "--set", "train.max_steps=3")
    train(tmp_path / "cut", *sets, "--resume")  # a new process: only the folder carries over
    full, cut = final_weights(tmp_path / "full"), final_weights(tmp_path / "cut")
    for name in full:
        torch.testing.assert_close(cut[name], full[name], rtol=0, atol=1e-6, msg=name)
    assert_same_log(losses(tmp_path / "cut"), losses(tmp_path / "full"))
    results = json.loads((tmp_path / "cut" / "results.json").read_text())
    assert {"bleu", "exact_match", "chrf", "test_loss"} <= results.keys()


@pytest.mark.slow
def test_resume_skips_a_checkpoint_cut_off_while_written(tmp_path):
    train_here(tmp_path / "run", "--set", "train.max_steps=3")
    ckpt = RunDir(tmp_path / "run").latest()
    broken = ckpt.with_name("step-0000004")
    broken.mkdir()  # looks like a later checkpoint, but its write never completed
    (broken / "model.safetensors").write_bytes(b"truncated")
    result = train_here(tmp_path / "run", "--resume", "--set", "train.max_steps=4")
    assert [s for s, _ in losses(tmp_path / "run")] == [1, 2, 3, 4], result.stderr[-2000:]


@pytest.mark.slow
def test_bf16_on_cpu_with_wandb_offline(tmp_path):
    out = tmp_path / "bf16"
    sets = ["--set", "train.mixed_precision=bf16", "--set", "train.max_steps=3"]
    result = train(out, *sets, "--wandb", "offline")
    logged = losses(out)
    assert [s for s, _ in logged] == [1, 2, 3], result.stderr[-2000:]  # an empty log fails
    assert all(math.isfinite(loss) for _, loss in logged)
    runs = list((out / "wandb").glob("offline-run-*"))
    assert runs and any(runs[0].glob("*.wandb")), list(out.rglob("*"))[:20]


@pytest.mark.slow
def test_lr_finder_writes_a_plot_and_a_finite_suggestion(tmp_path):
    out = tmp_path / "lr"
    result = train_here(out, "--lr-find", "--set", "train.lr_find_steps=30")
    line = next(x for x in result.stdout.splitlines() if x.startswith("suggested learning rate"))
    value = float(line.split(":")[1].split()[0])
    assert (out / "lr_find.png").stat().st_size > 1000
    record = json.loads((out / "lr_find.json").read_text())
    lrs, curve = record["lrs"], smooth(record["losses"])
    assert len(lrs) == 30 and value == pytest.approx(record["suggestion"], rel=1e-2)
    # on the measured curve: before the point where it diverges, and where it still falls
    best = min(v for v in curve if math.isfinite(v))
    diverged = next((i for i, v in enumerate(curve) if not v < 4 * best), len(curve))
    i = lrs.index(record["suggestion"])
    assert 0 < i < diverged and curve[i + 1] < curve[i - 1], (i, diverged, curve)


def test_an_existing_run_is_not_overwritten_and_resume_needs_the_same_config(tmp_path):
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    result = train_here(out, check=False)
    assert result.returncode == 2
    assert "already holds a run" in result.stderr and "Traceback" not in result.stderr
    (out / "config.yaml").write_text("model:\n  d_model: 64\n")
    result = train_here(out, "--resume", check=False)
    assert result.returncode == 2 and "another config" in result.stderr


@pytest.mark.slow
def test_a_new_run_retrains_the_tokenizer_a_failed_run_left(tmp_path):
    out = tmp_path / "run"
    result = train_here(out, "--set", "data.max_tokens_per_sentence=1", check=False)
    assert result.returncode == 2 and (out / "tokenizer").is_dir()  # failed after training it
    train_here(out, "--set", "data.vocab_size=90", "--set", "train.max_steps=1")
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["model"]["vocab_size"] == len(load_tokenizer(out / "tokenizer")) > 64


def test_an_out_path_through_a_file_fails_before_any_work(tmp_path):
    (tmp_path / "a_file").write_text("")
    result = train(tmp_path / "a_file", check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "a_file is a file, not a folder" in result.stderr


def test_a_bad_test_split_fails_before_training_not_after(tmp_path):
    out = tmp_path / "run"
    result = train_here(out, "--set", f"data.test=files:{tmp_path / 'missing'}", check=False)
    assert result.returncode == 2 and "missing.src: file not found" in result.stderr
    assert not (out / "tokenizer").exists() and not (out / "checkpoints").exists()


@pytest.mark.slow
def test_non_finite_steps_stop_the_run_even_when_logging_more_often(tmp_path):
    out = tmp_path / "run"  # log_every=1 < max_nonfinite=3: the count must outlive a log
    sets = [
        "train.max_lr=1.0e30",
        "train.warmup_steps=1",
        "train.max_nonfinite=3",
        "train.max_steps=30",
        "train.save_every=100",
        "train.eval_every=100",
    ]
    result = train_here(out, *[a for kv in sets for a in ("--set", kv)], check=False)
    assert result.returncode == 2 and "3 non-finite losses in a row" in result.stderr, (
        result.stderr[-2000:]
    )
    records = [r for r in read_metrics(out) if "loss" in r]
    assert records[-1]["bad_run"] == 3 and math.isnan(records[-1]["loss"])
    assert not (out / "results.json").exists()


@pytest.mark.slow
def test_a_compiled_run_traces_one_graph_for_all_bucket_shapes_and_trains_as_eager(tmp_path):
    """train.compile=true with 3 bucket shapes over ~2 epochs: one graph (symbolic batch and
    length), logged flat at every step, a line saying so, and the losses of the eager run."""
    sets = [
        "--set",
        "data.max_shapes=3",
        "--set",
        "train.max_steps=20",
        "--set",
        "train.eval_every=20",
        "--set",
        "train.save_every=20",
    ]
    train_here(tmp_path / "eager", *sets)
    done = train(  # a process of its own: the graphs dynamo compiled in it are counted
        tmp_path / "compiled",
        *sets,
        "--set",
        "train.compile=true",
        "--set",
        "train.compile_backend=aot_eager",
    )
    records = [r for r in read_metrics(tmp_path / "compiled") if "compiles" in r]
    assert [r["compiles"] for r in records] == [1] * 20
    assert "compile: 1 graph by step 1 (compiled); the first micro-batch took" in done.stdout
    assert "warning" not in done.stderr
    eager, compiled = losses(tmp_path / "eager"), losses(tmp_path / "compiled")
    assert [s for s, _ in compiled] == [s for s, _ in eager]
    assert [v for _, v in compiled] == pytest.approx([v for _, v in eager], rel=1e-4)


@pytest.mark.slow
def test_a_run_reusing_a_tokenizer_trains_and_keeps_its_own_copy(tmp_path, tiny_run):
    """data.tokenizer=OTHER_RUN/tokenizer: the new run directory is made, holds a copy of
    the tokenizer, and translates from another folder after the original is gone."""
    import shutil

    shutil.copytree(tiny_run / "tokenizer", tmp_path / "first" / "tokenizer")
    train_here(tmp_path / "second", "--set", f"data.tokenizer={tmp_path / 'first' / 'tokenizer'}")
    copied = tmp_path / "second" / "tokenizer" / "tokenizer.json"
    assert copied.read_bytes() == (tmp_path / "first" / "tokenizer" / "tokenizer.json").read_bytes()
    shutil.rmtree(tmp_path / "first")
    cmd = [sys.executable, "-m", "t2", "translate", "--checkpoint", str(tmp_path / "second")]
    done = subprocess.run(
        cmd,
        input="april 11 1981 wednesday\n",
        capture_output=True,
        text=True,
        env=ENV,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.count("\n") == 1, done.stderr[-2000:]


def test_a_finished_run_keeps_its_test_translations_and_names_its_references(tiny_run):
    """RUN/test.hyps.txt, a line per test sentence, and the SHA-256 of the test and
    validation references in meta.json (no copy of them): what a paired significance test
    compares (t2.experiments.statistics.significance), the references read from data.test."""
    from t2.data.references import lines_sha256
    from t2.experiments.sweeps.runs import read_run
    from t2.machine import cpu_name

    hyps, refs = read_run(tiny_run).test_outputs()
    named = json.loads((tiny_run / "meta.json").read_text())["references"]
    assert named["test"] == lines_sha256(refs)
    assert sorted(named) == ["test", "test_source", "valid", "valid_source"]
    assert all(len(digest) == 64 for digest in named.values())
    assert not (tiny_run / "test.refs.txt").exists()
    results = json.loads((tiny_run / "results.json").read_text())
    # the parameters are kept where the weights are not (t2 sweep --records), and meta.json
    # names the machine, so a report pooling runs from several can say which ran where
    assert results["parameters"] == read_run(tiny_run).parameters > 0
    machine = json.loads((tiny_run / "meta.json").read_text())["machine"]
    assert machine.startswith(cpu_name() + ", ") and machine.endswith(("thread", "threads"))
    assert len(hyps) == len(refs) == results["n_sentences"] > 0
    exact = sum(h.strip() == r.strip() for h, r in zip(hyps, refs, strict=True)) / len(refs)
    assert exact == pytest.approx(results["exact_match"])
    decode = load_config_of(tiny_run).decode  # every setting that shaped the translations
    assert results["decode"] == decode.recorded() and results["decode"]["search"] == decode.search


def test_a_run_records_its_data_stages_and_tokenizer_sample(tiny_run):
    """meta.json keeps each data stage's seconds (from raw files, or the cache's check when
    an earlier run left it) and what the tokenizer was learnt from."""
    data = json.loads((tiny_run / "meta.json").read_text())["data"]
    seconds = data["stages_s"]
    assert "data train: plan the batches" in seconds and min(seconds.values()) >= 0
    assert {"data train: encode", "data train: check the cache"} & set(seconds)
    assert data["tokenizer"] == {"sample_pairs": 400, "pairs": 400, "sample_seed": 2016}


@pytest.mark.slow
def test_a_nan_validation_is_never_the_best_and_the_stop_message_is_true(tmp_path):
    """train.max_lr=1e6: validations turn NaN; no checkpoint with a NaN validation is marked
    best, and the one-line stop names the best checkpoint only if there is one."""
    out = tmp_path / "run"
    sets = [
        "train.max_lr=1.0e6",
        "train.warmup_steps=1",
        "train.max_nonfinite=6",
        "train.max_steps=40",
        "train.save_every=2",
        "train.eval_every=2",
        "train.keep_last=40",
    ]
    result = train(out, *[a for kv in sets for a in ("--set", kv)], check=False)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr[-2000:]
    validations = {r["step"]: r["valid_loss"] for r in read_metrics(out) if "valid_loss" in r}
    assert any(math.isnan(v) for v in validations.values()), validations
    best = RunDir(out).best()
    if best is None:
        assert "no checkpoint with a finite validation score" in result.stderr
        assert not (out / "checkpoints" / "best").exists()
    else:
        assert math.isfinite(validations[int(best.name.split("-")[1])])
        assert f"its best checkpoint, {best}, is intact" in result.stderr


@pytest.mark.slow
def test_a_restart_keeps_the_hashes_of_the_sentences_its_translations_were_scored_on(
    tmp_path, tiny_run, monkeypatch
):
    """Issue 52 review: meta.json names the test sentences that test.hyps.txt was scored
    on. A restart cut off before it scores again keeps those names (a report then refuses
    a test set that changed, rather than reading new references against old translations);
    a scoring cut off before results.json leaves an unfinished run, never a finished one
    whose translations and hashes differ."""
    import shutil

    import t2.train.run as run_module
    from t2.experiments.sweeps.runs import read_run

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    meta = json.loads((run / "meta.json").read_text())
    scored = {**meta["references"], "test": "f" * 64}  # as if scored on other sentences
    (run / "meta.json").write_text(json.dumps({**meta, "references": scored}))

    def cut(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "score_test_split", cut)
    train_here(run, "--resume", "--set", "train.max_steps=7", check=False)
    assert json.loads((run / "meta.json").read_text())["references"]["test"] == "f" * 64
    stale = read_run(run)  # left out of comparisons, in words
    assert stale.test_outputs() is None
    assert "holds other references than the run was scored on" in stale.outputs_problem()
    monkeypatch.undo()
    monkeypatch.setattr(run_module, "write_results", cut)
    train_here(run, "--resume", "--set", "train.max_steps=8", check=False)
    assert not read_run(run).finished
    assert (
        json.loads((run / "meta.json").read_text())["references"]["test"]
        == meta["references"]["test"]
    )
