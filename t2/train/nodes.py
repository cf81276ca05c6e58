"""Which processes write, when the nodes of a job may each have their own disk.

A folder (the run directory, the data cache) is written by one process of each group of
processes that see the same folder: the lowest-ranked of them. On a shared filesystem
that is the main process of the whole job, and the others read what it wrote; on
node-local disks (cloud instances, Kubernetes pods) it is each node's first process (the
lowest-ranked of its node: LOCAL_RANK names a GPU, 0 on every task of `srun
--gpus-per-task=1`, not the first process of a node), so that every node has its own
data cache and its own copy of the run, checkpoints included: a resuming process reads
them where it runs. A node is its host name and its node rank (GROUP_RANK, which
torchrun, `accelerate launch` and t2's reading of srun's SLURM_NODEID set): pods with
hostNetwork, or containers with the host's network, share a host name.

The tokenizer is made once for the job, whatever the disks: the main process trains or
loads it and sends the others its tokenizer.json over the process group.

`train.shared_filesystem: auto` finds out at start-up: every process leaves a marker
file with the job's token in the folder, and every process lists the markers it sees.
`true` and `false` say it instead (one writer for the job, or one per node).
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from t2.config import Config
from t2.data import stages
from t2.data.encode import encode_pairs
from t2.data.pipeline import cache_root, load_pairs
from t2.data.tokenizer import SAMPLE, prepare_tokenizer, save_tokenizer, tokenizer_from_json
from t2.errors import CheckpointError
from t2.rundir import RunDir
from t2.rundir.layout import step_of
from t2.section import AUTO
from t2.train.collective import Waits

MARKER = ".t2-sees-{token}-{rank}"


@dataclass(frozen=True)
class Sharing:
    """How one folder is seen: whether this process writes it, and whether one process of
    the whole job writes it for all (shared) or one per group of processes (not shared)."""

    writes: bool
    shared: bool


def detect(folder: Path, setting: bool | str, waits: Waits, rank: int) -> Sharing:
    """The writers of `folder` by train.shared_filesystem (`setting`): with auto, each
    group of processes that see the same folder (the markers they see) writes it once."""
    if waits.group is None:
        return Sharing(writes=True, shared=True)
    if setting is True:
        return Sharing(writes=rank == 0, shared=True)
    if setting is False:  # the lowest-ranked process of each node
        nodes = waits.gather((socket.gethostname(), os.environ.get("GROUP_RANK")))
        return Sharing(writes=nodes.index(nodes[rank]) == rank, shared=False)
    assert setting == AUTO, setting
    token = waits.from_main(secrets.token_hex(8) if rank == 0 else None)
    folder.mkdir(parents=True, exist_ok=True)
    mine = folder / MARKER.format(token=token, rank=rank)
    mine.write_text(f"{rank}\n", encoding="utf-8")
    waits.everyone()  # every marker written before any is looked for
    prefix = MARKER.format(token=token, rank="")
    seen = sorted(int(p.name[len(prefix) :]) for p in folder.glob(f"{prefix}*"))
    views = waits.gather(seen)
    mine.unlink(missing_ok=True)
    return Sharing(writes=rank == min(seen), shared=all(len(v) == len(views) for v in views))


@dataclass(frozen=True)
class Storage:
    """Who writes the run directory and who builds the data cache."""

    run: Sharing
    cache: Sharing

    @classmethod
    def single(cls) -> Storage:
        return cls(Sharing(True, True), Sharing(True, True))

    def lines(self, run: RunDir, cfg: Any) -> list[str]:
        """What the main process says of folders that are not shared by every process."""
        setting = f"train.shared_filesystem={cfg.train.shared_filesystem}".lower()
        folders = (("--out", run.path, self.run), ("data cache", cache_root(cfg.data), self.cache))
        return [
            f"storage: {what} {path} is not one folder for every process ({setting}): the "
            f"first process of each node writes its own"
            for what, path, sharing in folders
            if not sharing.shared
        ]


def detect_storage(cfg: Any, run: RunDir, waits: Waits, accelerator: Any) -> Storage:
    """Who writes `run` and the data cache of `cfg` (train.shared_filesystem)."""
    rank, setting = accelerator.process_index, cfg.train.shared_filesystem
    return Storage(
        detect(run.path, setting, waits, rank),
        detect(cache_root(cfg.data), setting, waits, rank),
    )


def common_checkpoint(
    run: RunDir, found: Path | str | None, waits: Waits, named: bool
) -> Path | None:
    """The checkpoint every process resumes from, agreed from what each one `found` in its
    own run directory (a checkpoint, None, or the one-line error its --resume met). On
    node-local disks a node killed mid-save may lack the latest: then `--resume` takes the
    latest complete one in every directory; a named one must be in all of them."""
    have = [step_of(c) for c in run.checkpoints()]
    mine = found if isinstance(found, str) or found is None else step_of(found)
    views = waits.gather((have, mine))
    errors = [m for _, m in views if isinstance(m, str)]
    if errors:
        raise CheckpointError(errors[0])
    chosen = {m for _, m in views}
    if len(chosen) == 1:  # every process found the same: always so on a shared filesystem
        step = chosen.pop()
        return None if step is None else run.checkpoint(step)
    common = set.intersection(*(set(h) for h, _ in views))
    if named or not common:
        shown = "; ".join(
            f"process {i}: {', '.join(map(str, h)) or 'none'}" for i, (h, _) in enumerate(views)
        )
        raise CheckpointError(
            f"the processes' run directories hold different checkpoints (steps {shown}); "
            f"copy a step-N folder to the others' {run.checkpoint_dir}, or start a new --out"
        )
    return run.checkpoint(max(common))


def shared_tokenizer(
    cfg: Config, run: RunDir, accelerator: Any, waits: Waits, storage: Storage, resume: bool
) -> Any:
    """The run's tokenizer, trained (or loaded) once by the main process of the whole job;
    the others get its tokenizer.json over the process group, and every node's writer of
    the run directory keeps a copy in it (t2.train.nodes)."""
    main = accelerator.is_main_process
    if main:  # a new run trains its own: one a failed run left may not fit
        tokenizer = prepare_tokenizer(cfg.data, run.tokenizer, cfg.train.seed, reuse=resume)
        sample = run.tokenizer / SAMPLE  # what it was learnt from, if the data cache's
        kept = sample.read_text(encoding="utf-8") if sample.is_file() else None
        sent = (tokenizer.backend_tokenizer.to_str(), kept, stages.record().get("tokenizer"))
    text, kept, noted = waits.from_main(sent if main else None)
    if not main:
        tokenizer = tokenizer_from_json(text)
        if storage.run.writes:  # this node's copy and record, as the main process's
            save_tokenizer(tokenizer, run.tokenizer, kept)
        if noted is not None:
            stages.note("tokenizer", noted)
    return tokenizer


def prepare_data(
    cfg: Config, run: RunDir, accelerator: Any, waits: Waits, storage: Storage, resume: bool
) -> tuple[Any, Any, Any, Any]:
    """The tokenizer, the encoded train and valid splits, and the valid pairs. The data
    cache's writers (the main process, or one per node on node-local disks) clean and
    encode each split; the others wait, then read what they wrote."""
    seed = cfg.train.seed
    with waits.first(storage.cache.writes):
        # every split is read (and cached) before any work: a bad test source fails now,
        # not after training, and before a tokenizer is written
        valid_pairs = load_pairs(cfg.data, "valid", seed)
        load_pairs(cfg.data, "test", seed)
        train_pairs = load_pairs(cfg.data, "train", seed)
    tokenizer = shared_tokenizer(cfg, run, accelerator, waits, storage, resume)
    with waits.first(storage.cache.writes):
        train_ds = encode_pairs(train_pairs, tokenizer, cfg.data, "train")
        valid_ds = encode_pairs(valid_pairs, tokenizer, cfg.data, "valid")
    return tokenizer, train_ds, valid_ds, valid_pairs
