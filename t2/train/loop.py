"""The training loop. Side work lives in helpers: step.py, validate.py, checkpointing.py."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from t2.config import Config
from t2.data.loader import Batches
from t2.errors import CheckpointError, T2Error
from t2.rundir import RunDir, write_json
from t2.rundir.resume import resume_point, set_aside_after
from t2.train.budget import Budget, budget_for
from t2.train.checkpointing import restore, save, set_rng_state
from t2.train.collective import LostProcess
from t2.train.compiling import compiled_graphs
from t2.train.launch import elastic_restart, resume_after_restart
from t2.train.memory import out_of_memory
from t2.train.nodes import common_checkpoint
from t2.train.preempt import BeforeTraining, Preemption
from t2.train.setup import Training, build_run, split_loader
from t2.train.step import StepStats, train_step
from t2.train.tracking import MetricsLog, init_wandb
from t2.train.validate import forced_summary, greedy_scores


def validate(run: Training, step: int) -> dict[str, Any]:
    model = run.accelerator.unwrap_model(run.model)
    device, cfg = run.accelerator.device, run.cfg
    with run.accelerator.autocast():  # the training's precision, as train_step runs it
        figures = forced_summary(model, run.valid_loader, run.tokenizer.pad_token_id, device)
    record = {"step": step, **{f"valid_{k}": v for k, v in figures.items()}}
    n = cfg.train.valid_bleu_sentences
    if n > 0:
        pairs = run.valid_pairs.select(range(min(n, len(run.valid_pairs))))
        scores = greedy_scores(
            model, run.tokenizer, pairs["src"], pairs["tgt"], cfg.decode, device, cfg.data.src_bos
        )
        record.update({f"valid_{k}": scores[k] for k in ("bleu", "chrf", "exact_match")})
    model.train()
    return record


def is_better(record: dict[str, Any], best: list | None, metric: str) -> tuple[bool, list]:
    """Higher is better: (BLEU, -loss), the loss breaking ties; or -loss alone. A
    non-finite figure is never better (Lightning's ModelCheckpoint scores NaN the worst)."""
    value = [-record["valid_loss"]]
    if metric == "bleu" and "valid_bleu" in record:
        value = [record["valid_bleu"], *value]
    if not all(math.isfinite(v) for v in value):
        return False, value
    return best is None or value > best, value


def train(
    cfg: Config, recipe: str, run_dir: Path, resume: bool | str | None, wandb: str
) -> tuple[Training, dict[str, Any]]:
    """Train until the first stop rule holds (t2.train.budget): the run, and how it ended.
    `resume`: True or "latest", a step or a checkpoint path (t2.rundir.resume)."""
    restarts = elastic_restart()  # torchrun restarted the workers: they go on by themselves
    resume = resume_after_restart(resume, restarts)
    # a signal before the first step: one line; a process lost meanwhile: one line
    with BeforeTraining():
        run = build_run(cfg, recipe, Path(run_dir), bool(resume), wandb)
        acc, cfg, model = run.accelerator, run.cfg, run.model
        ckpt = start_from(run, resume, restarts)
        state = restore(run, ckpt) if ckpt else {}
        step, best = state.get("step", 0), state.get("best")
        batches = Batches(run.loader)  # its loader has an RNG of its own (make_loader)
        if state:
            set_rng_state(state["rng"])
        writes = run.storage.run.writes  # the main process, or one a node (t2.train.nodes)
        log = MetricsLog(run.run_dir.metrics, step if ckpt else None) if writes else None
        if acc.is_main_process:
            init_wandb(acc, cfg, recipe, run.run_dir.path, wandb)
        bad_run = torch.tensor(float(state.get("bad_run", 0)), device=acc.device)
        stats = StepStats.restored(state.get("stats"), acc.device, bad_run)
        pad = run.tokenizer.pad_token_id
        smoothing, clip = cfg.train.label_smoothing, cfg.train.clip_norm
        budget, t0 = budget_for(run, state, step), time.perf_counter()  # counters go on from state
        bar = progress_bar(cfg.train.max_steps, step, acc.is_main_process)
        model.train()
        stopped_by = budget.stop_reason(step)  # a resumed run may have spent its budget already
    timeout, latest = cfg.train.collective_timeout, run.run_dir.latest
    lost, preempt = LostProcess(acc, timeout, latest), Preemption(acc, timeout, latest)
    with batches, preempt, lost:  # SIGTERM, SIGUSR1: a checkpoint, then stop
        while stopped_by is None:
            lost.mark(step)
            micro = [next(batches) for _ in range(cfg.train.accumulate)]
            with out_of_memory(cfg, step, run.planned_bytes, run.run_dir):
                train_step(acc, run.forward, run.optimizer, micro, pad, smoothing, clip, stats)
            run.scheduler.step()
            step += 1
            bar.update(1)
            budget.count_step()  # on the host, from the sampler's batches: no sync
            stopped_by = budget.stop_reason(step)
            may_save = step % cfg.train.eval_every == 0 or step % cfg.train.save_every == 0
            may_save = may_save or stopped_by is not None
            # sums are flushed at every step that may checkpoint, so a resumed run logs the
            # same records as an uninterrupted one; this is the loop's only host sync
            if step % cfg.train.log_every == 0 or may_save:
                record = flush(run, step, stats, time.perf_counter() - t0, bar, budget, log)
                report_compilation(run, record, step)
                stats, t0 = StepStats.zeros(acc.device, stats.bad_run), time.perf_counter()
            if may_save:
                best, stopped_by = evaluate_and_save(
                    run, step, best, log, stopped_by, record["bad_run"], budget
                )
            # the last step too: a signal there ends the run before the test split's decoding
            if preempt.requested(step, final=stopped_by is not None):
                ckpt = save_now(run, step, best, stats, budget)
                preempt.finish(step, ckpt, stopped_by, run.run_dir.path, acc.is_main_process)
    bar.close()
    return run, budget.outcome(stopped_by, step)


def progress_bar(total: int, step: int, main: bool) -> tqdm:
    """A bar of steps on a terminal; in a log file (not a TTY) one line per logged step
    instead (flush)."""
    return tqdm(total=total, initial=step, disable=not (main and sys.stderr.isatty()))


def report_compilation(run: Training, record: dict[str, Any], step: int) -> None:
    """On the main process, one line when the compiled pass's graph count first shows and
    whenever it grows: the first micro-batch (compilation) against the speed since the
    last logged step."""
    forward = run.forward
    if not run.accelerator.is_main_process or "compiles" not in record:
        return
    graphs, seen = record["compiles"], forward.graphs_reported
    if seen is not None and graphs <= seen:
        return
    first = (
        f"the first micro-batch took {forward.first_s:.1f} s ({forward.compile_note}), "
        if seen is None and (forward.first_s is not None)
        else ""
    )
    how = "eager fallback: " + forward.fallback if forward.fallback else "compiled"
    speed = f"{record['tokens_per_s']:,.0f} target tokens/s since the last logged step"
    line = f"compile: {graphs} graph{'s' * (graphs != 1)} by step {step} ({how}); {first}{speed}"
    print(line, flush=True)
    forward.graphs_reported = graphs


def start_from(run: Training, resume: bool | str | None, restarts: int) -> Path | None:
    """The checkpoint to resume from, the same for every process (t2.train.nodes); a named
    earlier one sets the later ones aside."""
    if not resume:
        return None
    try:
        found: Path | str | None = resume_point(run.run_dir, resume)
    except CheckpointError as err:  # said by every process, not by this one alone
        found = str(err)
    named = resume not in (True, "latest")
    ckpt = common_checkpoint(run.run_dir, found, run.waits, named)
    main = run.accelerator.is_main_process
    if ckpt is not None and named:
        run.waits.everyone()  # every process has chosen before any renames
        later = set_aside_after(run.run_dir, ckpt) if run.storage.run.writes else []
        if later and main:
            names = ", ".join(c.name for c in later)
            line = f"resume: from {ckpt.name}; set aside the later {names} as .abandoned-*"
            print(line, flush=True)
        run.waits.everyone()
    if main and (restarts or ckpt is None):
        what = f"restart {restarts} of the workers by torchrun: " if restarts else "resume: "
        where = f"from {ckpt}" if ckpt else f"no complete checkpoint in {run.run_dir.path}"
        print(f"{what}{where}; {'continuing' if ckpt else 'starting a new run'}", flush=True)
    return ckpt


def flush(
    run: Training,
    step: int,
    stats: StepStats,
    seconds: float,
    bar: Any,
    budget: Budget,
    log: MetricsLog | None,
) -> dict[str, Any]:
    """Log the sums since the last logged step; stop a run of too many non-finite losses."""
    record = log_step(run, step, stats, seconds, bar, budget)
    if not run.storage.run.shared:  # each node's copy of the log: the main process's records
        record = run.waits.from_main(record)
    run.accelerator.log(record, step=step)
    if log:
        log.write(record)
    if record["bad_run"] >= run.cfg.train.max_nonfinite:
        raise T2Error(
            f"{record['bad_run']} non-finite losses in a row at step {step}; "
            f"{_good_checkpoint(run.run_dir)}: lower train.max_lr or set "
            f"train.clip_norm"
        )
    return record


def save_now(run: Training, step: int, best: list | None, stats: StepStats, budget: Budget) -> Path:
    """A checkpoint of `step` unless it has one, with the running sums not yet logged (so a
    resumed run logs what an uninterrupted one would): the preempted run's last act."""
    ckpt = run.run_dir.checkpoint(step)
    if ckpt not in run.run_dir.checkpoints():
        sums = stats.state()
        save(run, step, best, int(stats.bad_run.item()), budget.state(), stats=sums)
        run.waits.everyone()
    return ckpt


def _good_checkpoint(run_dir: RunDir) -> str:
    """What a diverged run leaves to go back to: its best checkpoint (never one with a
    non-finite validation), or that there is none."""
    best = run_dir.best()
    if best is None:
        return "no checkpoint with a finite validation score was saved (start a new run)"
    return f"its best checkpoint, {best}, is intact"


def log_step(
    run: Training, step: int, stats: StepStats, seconds: float, bar: Any, budget: Budget
) -> dict[str, Any]:
    acc = run.accelerator
    loss, tokens = acc.reduce(stats.loss, "sum").item(), acc.reduce(stats.tokens, "sum").item()
    record = {
        "step": step,
        "loss": loss / tokens if tokens else math.nan,  # NaN: every step was skipped
        "lr": run.scheduler.get_last_lr()[0],
        "tokens_per_s": tokens / max(seconds, 1e-9),
        "skipped_steps": int(stats.skipped.item()),
        "bad_run": int(stats.bad_run.item()),
        **budget.counters(),
    }
    if run.forward.compiled is not None:  # graphs so far: flat once every shape was seen
        record["compiles"] = compiled_graphs()
    left = budget.seconds_left(step) / 60  # the nearest limit: steps, minutes or tokens
    shown = {
        "loss": f"{record['loss']:.3f}",
        "lr": f"{record['lr']:.2e}",
        "tok_s": f"{record['tokens_per_s']:.0f}",
    }
    if not bar.disable:
        bar.set_postfix(**shown, left=f"{left:.1f}m")
    elif acc.is_main_process:
        print(
            f"step {step}/{run.cfg.train.max_steps} "
            + " ".join(f"{k}={v}" for k, v in shown.items())
            + f" left={left:.1f}m",
            flush=True,
        )
    return record


def evaluate_and_save(
    run: Training,
    step: int,
    best: list | None,
    log: MetricsLog | None,
    stopped_by: str | None,
    bad_run: int,
    budget: Budget,
) -> tuple[list | None, str | None]:
    """Validate and checkpoint as the intervals (or the run's end) ask; a validation that
    meets train.stop_exact_match ends the run here."""
    acc, cfg = run.accelerator, run.cfg
    record, better = None, False
    if step % cfg.train.eval_every == 0 or stopped_by:
        if acc.is_main_process:
            record = {**validate(run, step), **budget.counters()}
            better, value = is_better(record, best, cfg.train.best_metric)
            best = value if better else best
            acc.log(record, step=step)
        # a long validation is solo work (the step's timeout is not its); every process
        # learns its figures, for its log (a node's own) and its checkpoint's best
        record, better, best = run.waits.from_main((record, better, best))
        if log:
            log.write(record)
        if budget.exact_match_reached(record) and not stopped_by:  # every process asks
            stopped_by = "stop_exact_match"
    if step % cfg.train.save_every == 0 or stopped_by or better:
        save(run, step, best, bad_run, budget.state(), better)
    run.waits.everyone()
    return best, stopped_by


def eval_loader(ds: Any, run: Training) -> Any:
    """An evaluation loader over an encoded split: fixed order, this process only."""
    return split_loader(ds, run.cfg, run.tokenizer.pad_token_id, False, 0, 1)[1]


def write_results(run: RunDir, results: dict[str, Any]) -> None:
    write_json(run.results, results)
