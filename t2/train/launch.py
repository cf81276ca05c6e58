"""How the processes of a job were started, read from the environment before any process
group exists: SLURM's `srun` (one task per GPU) and torchrun's elastic restarts.

`srun python train.py` starts one task per GPU with SLURM's variables only. They are
turned into the ones torch.distributed and Accelerate read (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT), as Lightning's SLURMEnvironment
and torchtitan's SLURM launcher do: the rendezvous host is the first of the step's nodes,
the port the step's reserved one (srun --resv-ports) or derived from the job and step
ids, unless MASTER_PORT is set. A heterogeneous job stops: its step's node list is
sorted, and its first host need not run task 0.

A process is one of several tasks when it runs in a step of more than one task: every
srun sets SLURM_STEP_NUM_TASKS, in `sbatch` and in `salloc` alike, whatever the job's
name. A batch script or an allocation's shell runs in no such step (SLURM_PROCID,
SLURM_NTASKS, and from Slurm 26.05 SLURM_STEP_ID=-5, describe the batch step there, not
an srun's), and the shell of `srun --pty bash` (SLURM_PTY_PORT) is one process whatever
the step's tasks: a `python` started there is one process. A process that torchrun or
`accelerate launch` started (WORLD_SIZE set) keeps their variables.

LOCAL_RANK is the GPU a process takes: Accelerate places the model and builds DDP on
`cuda:LOCAL_RANK`. A task of `srun --gpus-per-task=1` sees one GPU, device 0, whatever
its SLURM_LOCALID; tasks that share a node's GPUs (--gpus-per-node) take the one of their
local id; a task of several GPUs (--gpus-per-task=2) stops: t2 runs a process per GPU.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping

from t2.errors import ConfigError

PORT_BASE = 15000  # MASTER_PORT = PORT_BASE + the job id's last 4 digits (as Lightning)
STEP_STRIDE = 1000  # ... + 1000 x the step id (mod 10000): a job's steps 0-9 on 10 ports
HETEROGENEOUS = ("SLURM_HET_JOB_ID", "SLURM_HET_SIZE", "SLURM_PACK_JOB_ID", "SLURM_PACK_SIZE")


def step_tasks(env: Mapping[str, str]) -> int:
    """The processes of the srun step this process is one of (0: in no srun step, as a
    batch script or an allocation's shell; 1 in the shell of `srun --pty`)."""
    if "SLURM_PTY_PORT" in env:  # srun --pty bash: its shell, and what it starts, is one
        return 1
    return int(env.get("SLURM_STEP_NUM_TASKS") or 0)


def rendezvous_port(env: Mapping[str, str]) -> str:
    """MASTER_PORT if set, else the step's first reserved port (srun --resv-ports), else
    one derived from the job and step ids: the same in every task, two for two steps."""
    if env.get("MASTER_PORT"):
        return env["MASTER_PORT"]
    if reserved := re.match(r"\d+", env.get("SLURM_STEP_RESV_PORTS", "")):
        return reserved[0]
    job = int(env.get("SLURM_JOB_ID", "0")[-4:] or 0)
    step = int(env.get("SLURM_STEP_ID") or 0)
    return str(PORT_BASE + (job + STEP_STRIDE * step) % 10000)


def device_index(local: int, devices: int, per_task: str | None = None) -> int:
    """The GPU of the task with local id `local` that sees `devices` GPUs (none: its local
    id, which names no device then); `per_task`: SLURM_GPUS_PER_TASK, if set."""
    if devices > 1 and per_task is not None:  # --gpus-per-task=2: which one is not ours
        raise ConfigError(
            f"this SLURM task sees {devices} GPUs (SLURM_GPUS_PER_TASK={per_task}): t2 runs one "
            "process per GPU; start one task per GPU (srun --gpus-per-task=1, or "
            "--gpus-per-node=N with --ntasks-per-node=N)"
        )
    if devices == 1:  # srun --gpus-per-task=1: each task's own GPU is its device 0
        return 0
    if devices == 0 or local < devices:
        return local
    raise ConfigError(
        f"SLURM task {local} of its node sees {devices} GPUs: start one task per GPU "
        f"(srun --ntasks-per-node={devices}, or --gpus-per-task=1)"
    )


def slurm_world(env: Mapping[str, str], devices: int = 0) -> dict[str, str] | None:
    """torch.distributed's variables for a task that `srun` started as one of several, or
    None (not in a step of several tasks, or a launcher already set them). `devices`: the
    GPUs this task sees."""
    if "WORLD_SIZE" in env or "SLURM_PROCID" not in env:
        return None
    tasks = step_tasks(env)
    if tasks <= 1:
        return None
    if het := [name for name in HETEROGENEOUS if name in env]:
        raise ConfigError(
            f"a heterogeneous SLURM job ({het[0]}) is not supported by t2's srun launch: its "
            "first node need not run task 0; start one torchrun per node instead "
            "(examples/slurm/train.sbatch), or run a job of one component"
        )
    nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
    nodes = nodes or env.get("SLURM_NODELIST", "")
    node = int(env.get("SLURM_NODEID", "0"))
    per_node = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
    local = int(env.get("SLURM_LOCALID", "0"))
    return {
        "RANK": env["SLURM_PROCID"],
        "WORLD_SIZE": str(tasks),
        "LOCAL_RANK": str(device_index(local, devices, env.get("SLURM_GPUS_PER_TASK"))),
        "LOCAL_WORLD_SIZE": str(tasks_on_node(per_node, node) or tasks),
        "GROUP_RANK": str(node),
        "MASTER_ADDR": env.get("MASTER_ADDR") or first_host(nodes) or "127.0.0.1",
        "MASTER_PORT": rendezvous_port(env),
    }


def adopt_slurm(env: MutableMapping[str, str] = os.environ) -> str | None:
    """Set torch.distributed's variables from srun's (slurm_world); a line that says so on
    the first task, None elsewhere or when there is nothing to adopt."""
    import torch  # the GPUs this task sees (CUDA_VISIBLE_DEVICES), without starting CUDA

    world = slurm_world(env, torch.cuda.device_count())
    if world is None:
        return None
    env.update(world)
    if world["RANK"] != "0":
        return None
    return (
        f"SLURM: {world['WORLD_SIZE']} tasks of job {env.get('SLURM_JOB_ID', '?')} form one "
        f"job of {world['WORLD_SIZE']} processes, {world['LOCAL_WORLD_SIZE']} on this node; "
        f"rendezvous at {world['MASTER_ADDR']}:{world['MASTER_PORT']}"
    )


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list ("gpu[07-09,12],cpu1" -> "gpu07"), as
    `scontrol show hostnames` would list it first."""
    depth, end = 0, len(nodelist)
    for i, char in enumerate(nodelist):  # the first entry ends at a comma outside brackets
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            end = i
            break
    first = lambda m: re.split(r"[,-]", m.group(1))[0]  # noqa: E731
    return re.sub(r"\[([^\]]*)\]", first, nodelist[:end])


def tasks_on_node(spec: str, node: int) -> int | None:
    """The tasks of node `node` in SLURM's compressed count ("4(x2),2": 4, 4, 2)."""
    counts: list[int] = []
    for part in filter(None, spec.split(",")):
        found = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if found is None:
            return None
        counts += [int(found[1])] * int(found[2] or 1)
    return counts[node] if node < len(counts) else None


def elastic_restart(env: Mapping[str, str] = os.environ) -> int:
    """How many times torchrun has restarted this job's workers (0: the first start)."""
    return int(env.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)


def resume_after_restart(resume: bool | str | None, restarts: int) -> bool | str | None:
    """A restarted worker continues from the latest complete checkpoint, whatever the first
    start was asked: a named one was taken then, and its later ones are the job's own."""
    return "latest" if restarts > 0 else resume
