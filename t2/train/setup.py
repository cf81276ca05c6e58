"""Everything a training run needs, built once: accelerator, tokenizer, data, model, optimiser."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs, set_seed
from torch.nn.parallel import DistributedDataParallel

from t2.atomic import atomic_text
from t2.config import Config
from t2.data import stages
from t2.data.batching import BatchSampler
from t2.data.config import RESUMABLE_DATA
from t2.data.loader import make_loader
from t2.data.pipeline import column
from t2.data.references import pairs_named
from t2.errors import ConfigError
from t2.machine import describe
from t2.model.summary import estimate_memory
from t2.model.transformer import Transformer
from t2.plugins import loaded
from t2.rundir import RunDir, keep_plugins, load_kept, new_meta, read_meta, write_json
from t2.rundir.layout import scored_references
from t2.train.collective import Waits, rendezvous
from t2.train.compile_cache import CompileCache
from t2.train.compiling import TrainingForward, wanted
from t2.train.launch import adopt_slurm
from t2.train.nodes import Storage, detect_storage, prepare_data
from t2.train.optim import build_optimizer, build_scheduler
from t2.train.plan import keep_saved, local_device, mixed, mixed_precision, planned
from t2.train.precision import ComputeWeights
from t2.train.precision import wanted as cast_wanted


@dataclass
class Training:
    cfg: Config
    accelerator: Accelerator
    tokenizer: Any
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    sampler: BatchSampler
    loader: Any
    valid_loader: Any
    valid_pairs: Any
    run_dir: RunDir
    forward: TrainingForward  # the training pass, compiled or eager (t2.train.compiling)
    target_lengths: Any  # each training pair's target length (ids with BOS and EOS)
    lock: Any = None  # RUN/.lock, held open by the run's writer (RunDir.lock)
    planned_bytes: int | None = None  # a micro-batch's memory by the batch plan
    waits: Any = None  # barriers for the main process's solo work (t2.train.collective)
    storage: Storage = Storage.single()  # which processes write the run and the data cache


# keys that a resumed run may change: how long it runs, how often it reports, and how a
# step's batches are spread (processes x accumulate; the data position is global)
# (and whether and how the training pass compiles: the same step, another speed)
RESUMABLE = (
    *("max_steps", "log_every", "eval_every", "save_every", "keep_last"),
    *("valid_bleu_sentences", "loader_workers", "accumulate", "max_minutes"),
    *("max_train_tokens", "stop_exact_match", "wandb_group", "wandb_job_type"),
    *("wandb_name", "global_batch", "compile", "compile_mode", "compile_backend"),
    *("cast_weights", "collective_timeout", "sweep_plan", "padded_attention"),
    *("compile_cache", "shared_filesystem"),
)


def _differences(old: Config, new: Config) -> list[str]:
    """section.key for every setting that differs, except those a resumed run may change."""
    a, b = old.to_dict(), new.to_dict()
    skip = {f"train.{k}" for k in RESUMABLE} | {"model.vocab_size"}  # set from the tokenizer
    skip |= {f"data.{k}" for k in RESUMABLE_DATA}
    keys = [f"{sec}.{k}" for sec in a for k in a[sec] if a[sec][k] != b[sec].get(k)]
    return [k for k in keys if k not in skip]


def check_run_dir(run: RunDir, cfg: Config, resume: bool) -> None:
    """Refuse to overwrite a run, and to resume one with another configuration."""
    if not resume and run.has_checkpoints():
        raise ConfigError(
            f"{run.path} already holds a run; pass --resume to continue it or another --out"
        )
    old = saved_config(run) if resume else None
    if old is not None:
        changed = _differences(old, cfg)
        if changed:
            shown = ", ".join(f"{k}={_get(old, k)!r} (now {_get(cfg, k)!r})" for k in changed)
            raise ConfigError(
                f"{run.path} was trained with another config: {shown}; resume with the same "
                f"recipe and --set options (train.max_steps may change), or a new --out"
            )


def _get(cfg: Config, key: str) -> object:
    section, name = key.split(".")
    return cfg.to_dict()[section][name]


def lengths(ds: Any, side: str) -> Any:
    """Each pair's `side` ("src" or "tgt") length in ids, a NumPy array from Arrow."""
    return column(ds, f"{side}_len")


def split_loader(ds: Any, cfg: Config, pad_id: int, shuffle: bool, rank: int, world: int):
    """Training (shuffle) batches are cut to whole optimizer steps of world x accumulate."""
    step_batches = world * cfg.train.accumulate if shuffle else world
    d = cfg.data
    sampler = BatchSampler(
        lengths(ds, "src"),
        lengths(ds, "tgt"),
        d.max_tokens,
        d.batch_size,
        cfg.train.seed,
        shuffle,
        rank,
        world,
        step_batches,
        max_shapes=d.max_shapes,
        rows_multiple=d.pad_multiple,
        length_multiple=d.length_multiple,
        cost=batch_cost(cfg),
    )
    return sampler, make_loader(ds, sampler, pad_id, cfg.train.loader_workers if shuffle else 0)


def batch_cost(cfg: Config) -> Any:
    """A batch's activation memory by the memory model: the sampler runs the largest first."""
    device = local_device()
    sixteen = mixed(cfg, device)

    def cost(rows: int, src_len: int, tgt_len: int) -> float:
        longest = max(src_len, tgt_len)
        return estimate_memory(
            cfg.model, 0, rows * longest, longest, sixteen, device.kind
        ).activations

    return cost


def make_accelerator(cfg: Config, wandb: str) -> Accelerator:
    """Accelerate for CPU, one GPU or DDP (torchrun, accelerate launch, or srun's tasks:
    t2.train.launch)."""
    if slurm := adopt_slurm():  # srun's tasks as one job: said once, by the first task
        print(slurm, flush=True)
    # a step's collectives; rank 0's solo work waits on its own group (Waits)
    timeout = timedelta(seconds=cfg.train.collective_timeout)
    with rendezvous(timeout):  # a restart's own group; processes that never join: one line
        return Accelerator(
            cpu=not torch.cuda.is_available(),  # Accelerate sees torchrun on CPU only so (gloo)
            mixed_precision=mixed_precision(cfg.train.mixed_precision),
            log_with="wandb" if wandb != "disabled" else None,
            kwargs_handlers=[InitProcessGroupKwargs(timeout=timeout)],
        )


def prepare_model(
    accelerator: Accelerator, model: torch.nn.Module, optimizer: Any
) -> tuple[Any, Any]:
    """Accelerate's prepare (device, DDP), without its float32 outputs. Under mixed precision
    Accelerate wraps the model's forward in autocast and casts what it returns to float32: for
    t2 that is a float32 copy of the (tokens x vocabulary) logits, its largest tensor, and a
    cast back in the backward pass. t2 enters `accelerator.autocast()` itself where it runs
    the model's forward (train_step, the teacher-forced figures), and its losses upcast the
    bf16 logits a block at a time (t2.model.loss)."""
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.unwrap_model(model, keep_fp32_wrapper=False)  # in place: the plain forward
    if isinstance(model, DistributedDataParallel):
        # no rebroadcast of the buffers (positional tables, equal on every rank) at each
        # forward: a collective per micro-batch, failing once a rank grew its table; not
        # DDP's argument, deprecated since torch 2.13 (a FutureWarning in every process)
        model.broadcast_buffers = False
    return model, optimizer


def prepare_training(
    accelerator: Accelerator, model: torch.nn.Module, cfg: Config
) -> tuple[torch.nn.Module, TrainingForward, Any, Any]:
    """Everything training applies to a new model, in one place (train.py and the
    benchmarks both call it): bf16 compute weights of a float32 master (train.cast_weights,
    t2.train.precision), the optimizer and schedule over the master, Accelerate's device
    placement and DDP, and the compiled training pass (train.compile, its padded attention
    and its compile cache: train.padded_attention, train.compile_cache). Returns the model
    to save, validate and decode (the master, or the prepared model), the training pass,
    the optimizer and the scheduler. `auto` settings are resolved here for this device
    where the batch plan has not resolved them already."""
    t, device = cfg.train, accelerator.device
    compiled = wanted(t.compile, device.type)
    weights = None
    if cast_wanted(t.cast_weights, device.type, accelerator.mixed_precision, compiled):
        weights = ComputeWeights(model.to(device))
    optimizer = build_optimizer(model, t, cfg.model.d_model)
    scheduler = build_scheduler(optimizer, t, cfg.model.d_model)
    trained, optimizer = prepare_model(accelerator, weights.module if weights else model, optimizer)
    forward = TrainingForward(
        trained,
        compiled,
        t.compile_mode,
        t.compile_backend,
        cfg.data.max_shapes,
        weights,
        t.padded_attention,
        CompileCache.of(cfg, device.type) if compiled else None,
    )
    return (model if weights else trained), forward, optimizer, scheduler


def saved_config(run: RunDir) -> Config | None:
    """The config a run directory was trained with, if it holds one."""
    if not run.config.is_file():
        return None
    read_meta(run.path)  # a run of a format this t2 cannot read fails here, in one line
    load_kept(run.path, own=True)  # its plugins (t2.commands.train loaded trusted ones)
    return Config.from_yaml(run.config.read_text(encoding="utf-8"), str(run.config), saved=True)


def plan_run(cfg: Config, run: RunDir, resume: bool, processes: int) -> tuple[Config, Any]:
    """`cfg` with its batches planned (t2.train.plan); a resumed run keeps its micro-batch."""
    saved = saved_config(run) if resume else None
    return planned(keep_saved(cfg, saved) if saved else cfg, processes)


@contextlib.contextmanager
def main_speaks(accelerator: Accelerator) -> Iterator[None]:
    """The data's lines (each split's counts, the tokenizer, a long stage's progress) once,
    from the main process: the others prepare in silence (an error still ends each in its
    line, after the block)."""
    if accelerator.is_main_process:
        yield
        return
    with open(os.devnull, "w") as sink, redirect_stdout(sink), redirect_stderr(sink):
        yield


def build_run(cfg: Config, recipe: str, run_dir: Path, resume: bool, wandb: str) -> Training:
    stages.begin()
    accelerator = make_accelerator(cfg, wandb)
    waits = Waits(accelerator)
    run = RunDir(run_dir)
    storage = detect_storage(cfg, run, waits, accelerator)
    cfg, plan = plan_run(cfg, run, resume, accelerator.num_processes)
    # the run's writer holds the folder while it trains; a second run there is refused
    held = run.lock() if storage.run.writes else None
    check_run_dir(run, cfg, resume)
    if accelerator.is_main_process:
        for line in (plan.line(), cfg.data.test_warning(), *storage.lines(run, cfg)):
            if line:
                print(line, flush=True)
    set_seed(cfg.train.seed)
    with main_speaks(accelerator):
        tokenizer, train_ds, valid_ds, valid_pairs = prepare_data(
            cfg, run, accelerator, waits, storage, resume
        )
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, vocab_size=len(tokenizer)))
    set_seed(cfg.train.seed)  # the same initial weights whatever the data work consumed
    model = Transformer(cfg.model, pad_id=tokenizer.pad_token_id)
    model, forward, optimizer, scheduler = prepare_training(accelerator, model, cfg)
    rank, world = accelerator.process_index, accelerator.num_processes
    with main_speaks(accelerator), stages.Heartbeat("data train: plan the batches"):
        sampler, loader = split_loader(train_ds, cfg, tokenizer.pad_token_id, True, rank, world)
    _, valid_loader = split_loader(valid_ds, cfg, tokenizer.pad_token_id, False, 0, 1)
    if storage.run.writes:  # with each data stage's seconds (t2.data.stages)
        with atomic_text(run.config) as f:
            f.write(cfg.to_yaml())
        keep_plugins(run.path, loaded())  # copies of the plugins it was given (t2.plugins)
        machine = describe(accelerator.device.type == "cuda")
        sweep = {"sweep_plan": cfg.train.sweep_plan} if cfg.train.sweep_plan else {}
        named = {**scored_references(run.path), **pairs_named(valid_pairs, "valid")}
        meta = new_meta(world, recipe=recipe, machine=machine, data=stages.record(), **sweep)
        write_json(run.meta, {**meta, "references": named})
    return Training(
        cfg,
        accelerator,
        tokenizer,
        model,
        optimizer,
        scheduler,
        sampler,
        loader,
        valid_loader,
        valid_pairs,
        run,
        forward,
        sampler.tgt,  # each pair's target length, the sampler's own array
        held,
        plan.estimate.total,
        waits,
        storage,
    )
