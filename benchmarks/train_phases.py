"""Where a training step's time goes, for bench_train.py: --profile (torch.profiler's
operators by self time, t2 and the peer) and --breakdown (report 001's phases of t2's
step: forward with the loss, backward, optimizer)."""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch

from benchmarks.train_loops import PAD, MarianEngine, T2Engine, run_round, sync
from t2.config import Config
from t2.recipes import load_config


def _configs(args: argparse.Namespace, vocab: int, recipes: list[str]):
    """(recipe, its config at the tokenizer's vocabulary) for each of `recipes`."""
    for recipe in recipes:
        cfg = load_config(recipe, args.set)
        yield recipe, replace(cfg, model=replace(cfg.model, vocab_size=vocab))


def profile(cfg: Config, ds, args: argparse.Namespace, precision: str) -> None:
    """Where the time goes: torch.profiler's operators by self time, per engine."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    activities = [ProfilerActivity.CPU] + (
        [ProfilerActivity.CUDA] if torch.cuda.is_available() else []
    )
    for engine in (T2Engine(cfg, ds, args, precision), MarianEngine(cfg, ds, args, precision)):
        run_round(engine, 1, cfg, None, False)  # warm-up
        with profiler(activities=activities) as prof:
            run_round(engine, args.profile, cfg, None, False)
        sort = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
        print(f"\n{engine.name}, {precision}, {args.profile} steps:")
        print(prof.key_averages().table(sort_by=sort, row_limit=15, max_name_column_width=40))


def profile_all(args: argparse.Namespace, ds, vocab: int) -> None:  # noqa: ANN001
    """--profile: the first recipe, each precision."""
    for _, cfg in _configs(args, vocab, args.recipes.split(",")[:1]):
        for precision in args.precisions.split(","):
            profile(cfg, ds, args, precision)


def breakdown(cfg: Config, ds, args: argparse.Namespace, precision: str) -> dict[str, float]:
    """Report 001's phases of a t2 step: forward (with the loss), backward, optimizer step;
    the median over --rounds x --steps-per-round steps, synchronising between phases."""
    engine = T2Engine(cfg, ds, args, precision)
    model, opt, acc = engine.model, engine.optimizer, engine.acc
    phases: dict[str, list[float]] = {"forward": [], "backward": [], "optimizer": [], "step": []}
    for i in range(args.warmup_rounds + args.rounds * args.steps_per_round):
        batch = {k: v.to(acc.device) for k, v in next(engine.batches).items()}
        sync()
        t0 = time.perf_counter()
        scale = 1.0 / batch["tgt_out"].ne(PAD).sum().clamp(min=1)  # as train_step scales
        with acc.autocast():  # as train_step: the model's projection and loss together
            smoothing = cfg.train.label_smoothing
            loss, _ = model(batch["src"], batch["tgt_in"], batch["tgt_out"], smoothing, scale)
        sync()
        t1 = time.perf_counter()
        acc.backward(loss * scale)
        sync()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        t3 = time.perf_counter()
        if i >= args.warmup_rounds:
            for key, value in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t3 - t0), strict=True):
                phases[key].append(value)
    return {k: statistics.median(v) for k, v in phases.items()}


def breakdown_all(args: argparse.Namespace, ds, vocab: int) -> list[dict]:  # noqa: ANN001
    """--breakdown: report 001's table, printed, and a record per recipe and precision."""
    print("\nreport 001's table (t2, median seconds per step):")
    print(
        f"{'recipe':16} {'prec':5} {'forward':>8} {'backward':>9} {'optimizer':>10} "
        f"{'step':>7}   GPU"
    )
    records = []
    for recipe, cfg in _configs(args, vocab, args.recipes.split(",")):
        for precision in args.precisions.split(","):
            b = breakdown(cfg, ds, args, precision)
            gpu = "" if torch.cuda.is_available() else "not measured (no GPU in this run)"
            print(
                f"{recipe:16} {precision:5} {b['forward']:8.3f} {b['backward']:9.3f} "
                f"{b['optimizer']:10.3f} {b['step']:7.3f}   {gpu}"
            )
            records.append({"recipe": recipe, "precision": precision, "breakdown": b})
    return records
