"""Everything a training run needs, built once: accelerator, tokenizer, data, model, optimiser."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs, set_seed

from t2.config import Config, TrainConfig
from t2.data import (
    BatchSampler,
    encode_pairs,
    load_pairs,
    make_loader,
    prepare_tokenizer,
)
from t2.errors import ConfigError
from t2.model.transformer import Transformer
from t2.train.optim import build_optimizer, build_scheduler


def mixed_precision(choice: str) -> str:
    """`auto` is bf16 on a GPU that supports it and fp32 on the CPU, where bf16 autocast
    measured ~1.5x slower per training step on a 2-core AVX512-bf16 EPYC (README)."""
    if choice != "auto":
        return choice
    return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "no"


@dataclass
class Run:
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
    run_dir: Path


# keys that a resumed run may change: how long it runs and how often it reports
RESUMABLE = ("max_steps", "log_every", "eval_every", "save_every", "keep_last",
             "valid_bleu_sentences", "loader_workers")  # fmt: skip


def _comparable(cfg: Config) -> Config:
    train = dataclasses.replace(cfg.train, **{k: getattr(TrainConfig(), k) for k in RESUMABLE})
    model = dataclasses.replace(cfg.model, vocab_size=1)  # set from the tokenizer
    return dataclasses.replace(cfg, train=train, model=model)


def check_run_dir(run_dir: Path, cfg: Config, resume: bool) -> None:
    """Refuse to overwrite a run, and to resume one with another configuration."""
    saved = run_dir / "config.yaml"
    if not resume and (run_dir / "checkpoints").is_dir():
        raise ConfigError(
            f"{run_dir} already holds a run; pass --resume to continue it or another --out"
        )
    if resume and saved.is_file():
        old = Config.from_yaml(saved.read_text(encoding="utf-8"), str(saved))
        if _comparable(old) != _comparable(cfg):
            raise ConfigError(
                f"{run_dir} was trained with another config ({saved}); resume with the "
                "same recipe and --set options (train.max_steps may change), or a new --out"
            )


def _loader(ds: Any, cfg: Config, pad_id: int, shuffle: bool, rank: int, world: int):
    sampler = BatchSampler(
        ds["src_len"] if "src_len" in ds.column_names else [len(x) for x in ds["src_ids"]],
        ds["tgt_len"] if "tgt_len" in ds.column_names else [len(x) for x in ds["tgt_ids"]],
        cfg.data.max_tokens, cfg.data.batch_size, cfg.train.seed, shuffle, rank, world,
    )  # fmt: skip
    return sampler, make_loader(ds, sampler, pad_id, cfg.train.loader_workers if shuffle else 0)


def make_accelerator(cfg: Config, wandb: str) -> Accelerator:
    """Accelerate for CPU, one GPU or DDP. DDP does not broadcast buffers: t2's only buffers
    are positional tables, equal on every rank, and rebroadcasting them at each forward pass
    costs a collective per micro-batch and fails if one rank has grown its table."""
    return Accelerator(
        cpu=not torch.cuda.is_available(),  # Accelerate detects torchrun on CPU only so (gloo)
        mixed_precision=mixed_precision(cfg.train.mixed_precision),
        log_with="wandb" if wandb != "disabled" else None,
        kwargs_handlers=[
            DistributedDataParallelKwargs(broadcast_buffers=False),
            # rank 0 alone validates and scores the test split while the others wait
            InitProcessGroupKwargs(timeout=timedelta(hours=2)),
        ],
    )


def build_run(cfg: Config, recipe: str, run_dir: Path, resume: bool, wandb: str) -> Run:
    accelerator = make_accelerator(cfg, wandb)
    run_dir = Path(run_dir)
    check_run_dir(run_dir, cfg, resume)
    set_seed(cfg.train.seed)
    with accelerator.main_process_first():  # the main process trains/caches, others reuse
        # every split is read (and cached) before any work: a bad test source fails now,
        # not after training, and before a tokenizer is written
        valid_pairs = load_pairs(cfg.data, "valid", cfg.train.seed)
        load_pairs(cfg.data, "test", cfg.train.seed)
        # a new run trains its own; other processes load the one the main process saved
        reuse = resume or not accelerator.is_main_process
        tokenizer = prepare_tokenizer(cfg.data, run_dir, cfg.train.seed, reuse)
        train_ds = encode_pairs(
            load_pairs(cfg.data, "train", cfg.train.seed), tokenizer, cfg.data, "train"
        )
        valid_ds = encode_pairs(valid_pairs, tokenizer, cfg.data, "valid")
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, vocab_size=len(tokenizer)))
    if accelerator.is_main_process:
        (run_dir / "config.yaml").write_text(cfg.to_yaml(), encoding="utf-8")
    set_seed(cfg.train.seed)  # the same initial weights whatever the data work consumed
    model = Transformer(cfg.model, pad_id=tokenizer.pad_token_id)
    optimizer = build_optimizer(model, cfg.train, cfg.model.d_model)
    scheduler = build_scheduler(optimizer, cfg.train, cfg.model.d_model)
    model, optimizer = accelerator.prepare(model, optimizer)
    rank, world = accelerator.process_index, accelerator.num_processes
    sampler, loader = _loader(train_ds, cfg, tokenizer.pad_token_id, True, rank, world)
    _, valid_loader = _loader(valid_ds, cfg, tokenizer.pad_token_id, False, 0, 1)
    return Run(cfg, accelerator, tokenizer, model, optimizer, scheduler, sampler, loader,
               valid_loader, valid_pairs, run_dir)  # fmt: skip
