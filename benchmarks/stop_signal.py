"""How soon a stop signal becomes a checkpoint in a job of several processes.

python -m benchmarks.stop_signal [--rounds 5] [--at-step 5] [--set KEY=VALUE ...] [--json FILE]
Each round trains the quickstart recipe at a tiny size (2 CPU processes with gloo, as srun
starts them, each with a loader worker, all four in one process group: "every process of
an srun step"); as process 0 ends step `--at-step`, a `kill` of its own sends SIGTERM to
the whole group. It prints, per round, the step the signal was sent after, the step saved,
the steps between them and the seconds from the signal to the checkpoint's COMPLETE file,
then the median and the largest; --set changes the run (a larger model: slower steps). The
processes agree every few steps (t2.train.preempt: CHECK_S, MOST_STEPS), so the steps stay
under MOST_STEPS + 1 and the seconds near CHECK_S plus the save; the figure to hold against
a scheduler's grace period (torchrun's --shutdown-timeout, 30 s by default) is the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# run by the processes in place of train.py: as process T2_SENDER (0) ends step
# T2_SIGNAL_STEP, a `kill` of its own (outside the job) sends T2_SIGNAL to T2_TARGET: the
# trainer ("pid"), its process group ("group") or its launcher's ("launcher"), which holds
# it pending in each target by the time the step goes on; the step and the moment go to
# T2_SENT
SENDER = """
import os, runpy, subprocess, sys, time
import t2.train.loop as loop
step_fn, calls = loop.train_step, [0]
def signalled(*args, **kwargs):
    step_fn(*args, **kwargs)
    calls[0] += 1
    sender = os.environ.get("RANK", "0") == os.environ.get("T2_SENDER", "0")
    if calls[0] == int(os.environ["T2_SIGNAL_STEP"]) and sender:
        with open(os.environ["T2_SENT"], "w") as f:
            f.write(f"{calls[0]} {time.time()}")
        target = {
            "pid": os.getpid(),
            "group": -os.getpgrp(),
            "launcher": -os.getpgid(os.getppid()),
        }[os.environ["T2_TARGET"]]
        kill = ["kill", "-s", os.environ.get("T2_SIGNAL", "TERM"), "--", str(target)]
        subprocess.run(kill, start_new_session=True)  # delivered when it returns
loop.train_step = signalled
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
# a tiny quickstart: steps of tens of milliseconds on a CPU, no checkpoint or validation
# before the last step (40): the only one saved earlier is the signal's
TINY = [
    *("model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.dropout=0.0"),
    *("model.n_encoder_layers=1", "model.n_decoder_layers=1", "data.vocab_size=64"),
    *("data.task_train_size=400", "data.task_eval_size=16", "data.max_tokens=400"),
    *("train.max_steps=40", "train.log_every=100", "train.eval_every=100"),
    *("train.save_every=100", "train.valid_bleu_sentences=0", "train.loader_workers=1"),
    *("train.warmup_steps=4", "decode.max_len_b=12"),
]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def train_command(run: Path, settings: list[str], python: list[str]) -> list[str]:
    """train.py of the quickstart recipe under `python` (the SENDER program, or a launcher
    running it), with `settings` as --set options."""
    sets = [arg for kv in settings for arg in ("--set", kv)]
    out = ["--recipe", "quickstart", "--out", str(run), "--wandb", "disabled", *sets]
    return [*python, str(ROOT / "train.py"), *out]


def signal_env(run: Path, step: int, target: str) -> dict[str, str]:
    """What SENDER reads: send SIGTERM to `target` after `step`, noting it beside `run`."""
    sent = run.with_name(run.name + ".sent")
    return {**ENV, "T2_SIGNAL_STEP": str(step), "T2_TARGET": target, "T2_SENT": str(sent)}


def srun_task(rank: int, port: int) -> dict[str, str]:
    """SLURM's variables for task `rank` of `srun --ntasks 2` on one node."""
    return {
        **{"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "2", "SLURM_NODEID": "0"},
        # an srun step's own variables: t2 forms a job from SLURM_STEP_NUM_TASKS (launch.py)
        **{"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "2"},
        **{"SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)},
        **{"SLURM_JOB_NODELIST": "localhost", "SLURM_TASKS_PER_NODE": "2"},
        "MASTER_PORT": str(port),
    }


def every_process(run: Path, step: int, settings: list[str] = TINY) -> dict:
    """Two srun tasks in one process group, signalled (all four processes: the trainers
    and their loader workers) after `step`: each one's exit status and stderr, and the
    signal's step, the saved step and the seconds between the signal and the checkpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = train_command(run, settings, [sys.executable, "-c", SENDER])
    env = signal_env(run, step, "group")
    procs: list[subprocess.Popen] = []
    for rank in (0, 1):  # task 0 leads a new group; task 1 joins it
        procs.append(
            subprocess.Popen(
                command,
                env={**env, **srun_task(rank, port)},
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                process_group=procs[0].pid if procs else 0,
            )
        )
    ended = [proc.communicate(timeout=600) for proc in procs]
    return {
        "exit": [proc.returncode for proc in procs],
        "stderr": [err for _, err in ended],
        **timed(run, Path(env["T2_SENT"])),
    }


def timed(run: Path, sent: Path) -> dict:
    """The step a signal was sent after and when (SENDER's note), the latest checkpoint,
    and the steps and seconds from the one to the other (its COMPLETE file's time)."""
    at_step, at = sent.read_text().split() if sent.is_file() else (0, 0)
    saved = sorted((run / "checkpoints").glob("step-*/COMPLETE"))
    step = int(saved[-1].parent.name.split("-")[1]) if saved else None
    seconds = saved[-1].stat().st_mtime - float(at) if saved and at else None
    return {
        "sent_after": int(at_step),
        "saved": step,
        "steps": None if step is None else step - int(at_step),
        "seconds": seconds,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--at-step", type=int, default=5)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for k in range(args.rounds):
            row = every_process(Path(folder) / f"run{k}", args.at_step, [*TINY, *args.set])
            stopped = 128 + signal.SIGTERM
            if row["exit"] != [stopped, stopped]:  # not a two-process job that stopped: no figure
                first = next((e for e in row["stderr"] if e.strip()), "").strip().splitlines()
                raise SystemExit(
                    f"round {k}: exits {row['exit']}, not [{stopped}, {stopped}] "
                    f"({first[-1] if first else 'no output'}); no figure taken"
                )
            del row["stderr"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    steps = [r["steps"] for r in rows if r["steps"] is not None]
    seconds = [r["seconds"] for r in rows if r["seconds"] is not None]
    if steps:
        print(f"steps: median {statistics.median(steps)}, most {max(steps)}")
        print(f"seconds: median {statistics.median(seconds):.2f}, most {max(seconds):.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
