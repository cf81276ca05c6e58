"""How the processes of a job were started, read from the environment before any process
group exists: SLURM's `srun` (one task per GPU) and torchrun's elastic restarts.

`srun python train.py` starts one task per GPU with SLURM's variables only. They are
turned into the ones torch.distributed and Accelerate read (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT), as Lightning's SLURMEnvironment
and torchtitan's SLURM launcher do: the rendezvous host is the first of the step's nodes,
the port derived from the job id unless MASTER_PORT is set. A process that torchrun or
`accelerate launch` started (WORLD_SIZE set) keeps their variables; so does an interactive
shell in an allocation (`salloc`, `srun --pty bash`), where one python is one process.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping

INTERACTIVE = ("bash", "interactive")  # SLURM_JOB_NAME of a shell in an allocation
PORT_BASE = 15000  # MASTER_PORT = PORT_BASE + the job id's last 4 digits (as Lightning)


def slurm_world(env: Mapping[str, str]) -> dict[str, str] | None:
    """torch.distributed's variables for a task that `srun` started as one of several, or
    None (not under srun, a single task, or a launcher already set them)."""
    if "WORLD_SIZE" in env or "SLURM_PROCID" not in env:
        return None
    if env.get("SLURM_JOB_NAME") in INTERACTIVE:
        return None
    tasks = int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or 1)
    if tasks <= 1:
        return None
    nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
    nodes = nodes or env.get("SLURM_NODELIST", "")
    node = int(env.get("SLURM_NODEID", "0"))
    per_node = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
    job = env.get("SLURM_JOB_ID", "0")
    return {
        "RANK": env["SLURM_PROCID"],
        "WORLD_SIZE": str(tasks),
        "LOCAL_RANK": env.get("SLURM_LOCALID", "0"),
        "LOCAL_WORLD_SIZE": str(tasks_on_node(per_node, node) or tasks),
        "GROUP_RANK": str(node),
        "MASTER_ADDR": env.get("MASTER_ADDR") or first_host(nodes) or "127.0.0.1",
        "MASTER_PORT": env.get("MASTER_PORT") or str(PORT_BASE + int(job[-4:] or 0)),
    }


def adopt_slurm(env: MutableMapping[str, str] = os.environ) -> str | None:
    """Set torch.distributed's variables from srun's (slurm_world); a line that says so on
    the first task, None elsewhere or when there is nothing to adopt."""
    world = slurm_world(env)
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
