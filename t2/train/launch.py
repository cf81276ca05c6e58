"""How the processes of a job were started, read from the environment before any process
group exists: SLURM's `srun` (one task per GPU) and torchrun's elastic restarts.

`srun python train.py` starts one task per GPU with SLURM's variables only. They are
turned into the ones torch.distributed and Accelerate read (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT), as Lightning's SLURMEnvironment
and torchtitan's SLURM launcher do: the rendezvous host is the first of the step's nodes,
the port derived from the job id unless MASTER_PORT is set.

A process is one of several tasks when it runs in a step of more than one task: srun
sets SLURM_STEP_NUM_TASKS (SLURM_STEP_ID and SLURM_NTASKS before it), in `sbatch` and in
`salloc` alike, whatever the job's name. A batch script or an allocation's shell runs in
no such step (SLURM_PROCID and SLURM_NTASKS describe the job there, not a step), and
`srun --pty bash` is a step of one task: a `python` started there is one process. A
process that torchrun or `accelerate launch` started (WORLD_SIZE set) keeps their
variables.

LOCAL_RANK is the GPU a process takes: Accelerate places the model and builds DDP on
`cuda:LOCAL_RANK`. A task of `srun --gpus-per-task=1` sees one GPU, device 0, whatever
its SLURM_LOCALID; tasks that share a node's GPUs take the one of their local id.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping

from t2.errors import ConfigError

PORT_BASE = 15000  # MASTER_PORT = PORT_BASE + the job id's last 4 digits (as Lightning)


def step_tasks(env: Mapping[str, str]) -> int:
    """The tasks of the srun step this process runs in (0: in no step, as a batch script
    or an allocation's shell)."""
    if "SLURM_STEP_NUM_TASKS" in env:
        return int(env["SLURM_STEP_NUM_TASKS"] or 1)
    if "SLURM_STEP_ID" in env:  # a step whose srun predates SLURM_STEP_NUM_TASKS
        return int(env.get("SLURM_NTASKS") or 1)
    return 0


def device_index(local: int, devices: int) -> int:
    """The GPU of the task with local id `local` that sees `devices` GPUs (none: its local
    id, which names no device then)."""
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
    nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
    nodes = nodes or env.get("SLURM_NODELIST", "")
    node = int(env.get("SLURM_NODEID", "0"))
    per_node = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
    job = env.get("SLURM_JOB_ID", "0")
    local = int(env.get("SLURM_LOCALID", "0"))
    return {
        "RANK": env["SLURM_PROCID"],
        "WORLD_SIZE": str(tasks),
        "LOCAL_RANK": str(device_index(local, devices)),
        "LOCAL_WORLD_SIZE": str(tasks_on_node(per_node, node) or tasks),
        "GROUP_RANK": str(node),
        "MASTER_ADDR": env.get("MASTER_ADDR") or first_host(nodes) or "127.0.0.1",
        "MASTER_PORT": env.get("MASTER_PORT") or str(PORT_BASE + int(job[-4:] or 0)),
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
