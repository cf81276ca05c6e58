"""How a job's processes were started: srun's tasks read as torch.distributed's variables,
and torchrun's restarts turned into a resume."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from t2.errors import ConfigError
from t2.train.launch import (
    adopt_slurm,
    device_index,
    elastic_restart,
    first_host,
    resume_after_restart,
    slurm_world,
    tasks_on_node,
)

# task 5 of 8 on two nodes of 4: what srun --nodes 2 --ntasks-per-node 4 python train.py sets
SRUN = {
    "SLURM_JOB_ID": "123456",
    "SLURM_JOB_NAME": "train.sbatch",
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_NTASKS": "8",
    "SLURM_STEP_ID": "0",
    "SLURM_STEP_NUM_TASKS": "8",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
    "SLURM_STEP_NODELIST": "gpu[07-08]",
    "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
}


def test_srun_tasks_become_torch_distributed_variables():
    assert slurm_world(SRUN) == {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "1",
        "MASTER_ADDR": "gpu07",  # the first node runs task 0
        "MASTER_PORT": "18456",  # 15000 + the job id's last four digits: the same on all
    }
    assert slurm_world({**SRUN, "MASTER_PORT": "29500"})["MASTER_PORT"] == "29500"


# what each way of starting python under SLURM leaves in its environment: (the variables
# beside the job's, whether the tasks form one job)
STEPS = {
    # srun -n 8 python train.py in a batch script
    "srun-in-sbatch": ({}, True),
    # srun -n 2 python train.py in salloc's shell: the job is named after the shell
    "srun-in-salloc": (
        {"SLURM_JOB_NAME": "interactive", "SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2"},
        True,
    ),
    "srun-in-salloc-bash": ({"SLURM_JOB_NAME": "bash"}, True),
    # python train.py in a batch script of --ntasks=8: the batch step is no srun step
    "python-in-sbatch": ({"SLURM_STEP_ID": None, "SLURM_STEP_NUM_TASKS": None}, False),
    # the same on Slurm 26.05: the batch step's id, SLURM_BATCH_SCRIPT (0xfffffffb), is -5
    "python-in-sbatch-26.05": (
        {"SLURM_STEP_ID": "-5", "SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": None},
        False,
    ),
    # python train.py in salloc's shell (SLURM_PROCID where the shell is a step of its own)
    "python-in-salloc": (
        {"SLURM_JOB_NAME": "interactive", "SLURM_STEP_ID": None, "SLURM_STEP_NUM_TASKS": None},
        False,
    ),
    # srun --pty bash, then python train.py: a step of one task
    "python-in-srun-pty": (
        {"SLURM_JOB_NAME": "bash", "SLURM_NTASKS": "1", "SLURM_STEP_NUM_TASKS": "1"},
        False,
    ),
    # srun --ntasks-per-node=8 --pty bash, then python train.py: the shell of task 0
    "python-in-srun-pty-of-several": ({"SLURM_PTY_PORT": "41523"}, False),
    # torchrun (one per node, under srun) set its own
    "torchrun-in-srun": ({"WORLD_SIZE": "8"}, False),
    "not-under-slurm": ({"SLURM_PROCID": None}, False),
}


@pytest.mark.parametrize("case", STEPS)
def test_the_tasks_of_an_srun_step_of_several_form_one_job_and_nothing_else(case):
    change, forms = STEPS[case]
    env = {k: v for k, v in {**SRUN, **change}.items() if v is not None}
    world = slurm_world(env)
    assert (world is not None) == forms
    if forms:
        assert world["WORLD_SIZE"] == env["SLURM_STEP_NUM_TASKS"]


@pytest.mark.parametrize(
    ("local", "devices", "device"),
    [
        (5, 1, 0),  # srun --gpus-per-task=1: the task's one GPU, whatever its local id
        (0, 1, 0),
        (5, 8, 5),  # the node's 8 GPUs, shared by its tasks: the local id's
        (1, 0, 1),  # no GPU (gloo on CPUs): the local id
    ],
)
def test_a_task_takes_the_gpu_it_sees(local, devices, device):
    assert device_index(local, devices) == device
    env = {**SRUN, "SLURM_LOCALID": str(local)}
    assert slurm_world(env, devices)["LOCAL_RANK"] == str(device)


def test_a_task_with_a_local_id_beyond_the_gpus_it_sees_is_one_line():
    with pytest.raises(ConfigError, match=r"^SLURM task 5 of its node sees 4 GPUs: start one"):
        device_index(5, 4)


@pytest.mark.parametrize("local", range(4))
def test_every_task_of_several_gpus_per_task_stops_in_the_same_line(local):
    """srun --ntasks-per-node=4 --gpus-per-task=2: each task sees its 2 GPUs. Tasks 0 and 1
    took one of them silently, 2 and 3 were told to run 2 tasks a node."""
    env = {**SRUN, "SLURM_LOCALID": str(local), "SLURM_GPUS_PER_TASK": "2"}
    wanted = (
        r"^this SLURM task sees 2 GPUs \(SLURM_GPUS_PER_TASK=2\): t2 runs one process per GPU; "
        r"start one task per GPU \(srun --gpus-per-task=1, or --gpus-per-node=N with "
        r"--ntasks-per-node=N\)$"
    )
    with pytest.raises(ConfigError, match=wanted):
        slurm_world(env, 2)
    assert slurm_world({**env, "SLURM_GPUS_PER_TASK": "1"}, 1)["LOCAL_RANK"] == "0"


def test_tasks_that_share_their_nodes_gpus_take_their_local_ids():
    """--gpus-per-node=4 --ntasks-per-node=4: every task sees the node's GPUs (NCCL's P2P
    and NVLink between them stay open) and takes the one of its local id."""
    env = {**SRUN, "SLURM_GPUS_PER_NODE": "4", "SLURM_GPUS_ON_NODE": "4"}
    assert [slurm_world({**env, "SLURM_LOCALID": str(i)}, 4)["LOCAL_RANK"] for i in range(4)] == [
        "0",
        "1",
        "2",
        "3",
    ]


def test_two_steps_of_one_job_rendezvous_at_two_ports():
    """Two srun steps running at once in one job (steps 0 and 1) took one port."""
    ports = {slurm_world({**SRUN, "SLURM_STEP_ID": step})["MASTER_PORT"] for step in "012"}
    assert len(ports) == 3 and slurm_world(SRUN)["MASTER_PORT"] == "18456"
    reserved = {**SRUN, "SLURM_STEP_RESV_PORTS": "12000-12003"}  # srun --resv-ports
    assert slurm_world(reserved)["MASTER_PORT"] == "12000"


@pytest.mark.parametrize(
    "het", ["SLURM_HET_JOB_ID", "SLURM_HET_SIZE", "SLURM_PACK_JOB_ID", "SLURM_PACK_SIZE"]
)
def test_a_heterogeneous_job_stops_in_one_line(het):
    """A het job's step node list is sorted: its first host need not run task 0."""
    wanted = r"^a heterogeneous SLURM job \(" + het + r"\) is not supported by t2's srun"
    with pytest.raises(ConfigError, match=wanted):
        slurm_world({**SRUN, het: "2"})
    assert slurm_world({**SRUN, het: "2", "SLURM_STEP_NUM_TASKS": "1"}) is None  # one process


def test_adopting_srun_counts_the_gpus_the_task_sees(monkeypatch):
    """What Accelerate reads: with one visible GPU, LOCAL_RANK 0 puts DDP on cuda:0, not on
    cuda:SLURM_LOCALID (which this task cannot see: "invalid device ordinal")."""
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    env = dict(SRUN)  # SLURM_LOCALID 1
    adopt_slurm(env)
    assert env["LOCAL_RANK"] == "0" and env["LOCAL_WORLD_SIZE"] == "4"


def test_adopting_srun_sets_the_environment_and_the_first_task_says_so():
    env = dict(SRUN)
    assert adopt_slurm(env) is None and env["RANK"] == "5"  # task 5 says nothing
    first = {**SRUN, "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0"}
    line = adopt_slurm(first)
    assert line == (
        "SLURM: 8 tasks of job 123456 form one job of 8 processes, 4 on this node; "
        "rendezvous at gpu07:18456"
    )
    assert first["WORLD_SIZE"] == "8" and first["LOCAL_RANK"] == "0"


@pytest.mark.parametrize(
    ("nodes", "first"),
    [
        ("node1", "node1"),
        ("gpu[07-09,12],cpu1", "gpu07"),
        ("a,b[1-2]", "a"),
        ("rack[2-3]-n[003,001]", "rack2-n003"),
    ],
)
def test_the_first_host_of_a_slurm_node_list(nodes, first):
    assert first_host(nodes) == first


def test_tasks_on_a_node_from_slurms_compressed_counts():
    assert [tasks_on_node("4(x2),2", n) for n in range(4)] == [4, 4, 2, None]
    assert tasks_on_node("2", 0) == 2 and tasks_on_node("two", 0) is None


def test_a_restarted_worker_resumes_from_the_latest_checkpoint():
    assert elastic_restart({}) == 0 and elastic_restart({"TORCHELASTIC_RESTART_COUNT": "2"}) == 2
    assert resume_after_restart(None, 0) is None and resume_after_restart("3", 0) == "3"
    assert resume_after_restart(None, 1) == "latest"
    assert resume_after_restart("3", 2) == "latest"  # step 3 was taken by the first start


SBATCH = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "train.sbatch"
# stand-ins: srun records each call (SRUN_CPUS_PER_TASK, then its arguments) and runs the
# command it is given, t2's torchrun aside; scontrol lists the job's nodes
SRUN_STUB = r"""#!/bin/sh
{ printf 'SRUN_CPUS_PER_TASK=%s\n' "${SRUN_CPUS_PER_TASK-}"; printf '%s\n' "$@" --; } >> LOG
case " $* " in *" -m t2.torchrun "*) exit 0 ;; esac
while [ "${1#-}" != "$1" ]; do shift; done
exec "$@"
"""
SCONTROL_STUB = """#!/bin/sh
[ "$1 $2" = "show hostnames" ] || exit 1
printf 'gpu07\\ngpu08\\n'
[ MORE -gt 0 ] || exit 0
sleep 0.5  # head -n 1 has read the first line and gone
seq -f 'gpu%05g' 1 MORE  # the rest of a long list: a pipe's buffer (64 KiB) full
"""


def run_sbatch(
    tmp_path: Path, *args: str, more: int = 0, printed: str = "", fails: bool = False, **env: str
) -> list[list[str]]:
    """examples/slurm/train.sbatch under bash with the stand-ins on PATH: srun's calls, each
    as [SRUN_CPUS_PER_TASK=..., its arguments...]. `printed`: lines python3 prints before
    what it is asked (a site's profile, say); `fails`: the script must stop in one line."""
    fake = tmp_path / "bin"
    fake.mkdir(parents=True)
    log = tmp_path / "srun.log"
    (fake / "srun").write_text(SRUN_STUB.replace("LOG", str(log)))
    (fake / "scontrol").write_text(SCONTROL_STUB.replace("MORE", str(more)))
    for tool in fake.iterdir():
        tool.chmod(0o755)
    (fake / "python3").write_text(f"#!/bin/sh\nprintf '{printed}'\nexec {sys.executable} \"$@\"\n")
    (fake / "python3").chmod(0o755)
    job = {
        "PATH": f"{fake}:/usr/bin:/bin",
        "SLURM_JOB_ID": "123456",
        "SLURM_JOB_NODELIST": "gpu[07-08]",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_GPUS_ON_NODE": "8",
        "SLURM_CPUS_PER_TASK": "32",
    }
    done = subprocess.run(
        ["bash", str(SBATCH), *args], env={**job, **env}, capture_output=True, text=True
    )
    if fails:
        assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
        return [[done.stderr]]
    assert done.returncode == 0, done.stderr
    return [call.strip("\n").split("\n") for call in log.read_text().split("\n--\n")[:-1]]


def torchrun_args(calls: list[list[str]]) -> Any:
    """The torchrun that the last srun call starts, parsed by torch's own parser: t2's
    (`python3 -m t2.torchrun`), which ends quietly where the workers saved and said why."""
    from torch.distributed.run import get_args_parser

    assert calls[-1][1:5] == ["--kill-on-bad-exit=1", "python3", "-m", "t2.torchrun"]
    return get_args_parser().parse_args(calls[-1][5:])


def test_the_sbatch_script_runs_one_torchrun_per_node_with_a_rendezvous_at_the_first(tmp_path):
    header = [line for line in SBATCH.read_text().splitlines() if line.startswith("#SBATCH")]
    assert {"#SBATCH --signal=USR1@120", "#SBATCH --requeue"} <= set(header)
    subprocess.run(["bash", "-n", str(SBATCH)], check=True)  # its syntax
    calls = run_sbatch(tmp_path, "big", "runs/big", "--set", "train.max_steps=10")
    args = torchrun_args(calls)
    assert (args.nnodes, args.nproc_per_node) == ("2", "8")
    assert args.rdzv_endpoint.startswith("gpu07:")
    assert (args.rdzv_id, args.max_restarts, args.training_script) == ("123456", 3, "train.py")
    assert "SIGUSR1" in args.signals_to_handle.split(",") and args.shutdown_timeout < 120
    wanted = ["--recipe", "big", "--out", "runs/big", "--wandb", "offline", "--resume"]
    assert args.training_script_args == [*wanted, "--set", "train.max_steps=10"]


def test_the_sbatch_script_gives_sruns_tasks_the_jobs_cpus(tmp_path):
    """Slurm >= 22.05: srun reads --cpus-per-task from SRUN_CPUS_PER_TASK, not the job's."""
    calls = run_sbatch(tmp_path)
    assert calls[-1][0] == "SRUN_CPUS_PER_TASK=32"


def test_the_sbatch_script_finds_the_first_node_of_a_long_list(tmp_path):
    """20,002 nodes: `scontrol show hostnames | head -n 1` under pipefail ended the script
    (scontrol killed by SIGPIPE once head had its line)."""
    calls = run_sbatch(tmp_path, more=20000)
    assert torchrun_args(calls).rdzv_endpoint.startswith("gpu07:")


def test_the_sbatch_script_takes_a_port_that_another_job_on_its_first_node_does_not_hold(
    tmp_path,
):
    """Job 123456 while job 113456, 10000 ids before it, holds 15000 + id % 10000 on the
    same first node: the port is one the first node's kernel gives (a bind to port 0, run
    there by srun), not the one derived from the job id."""
    derived = 15000 + 123456 % 10000
    with socket.socket() as other:
        with contextlib.suppress(OSError):  # held already: by another program, as well
            other.bind(("", derived))
            other.listen()
        calls = run_sbatch(tmp_path)
    port = int(torchrun_args(calls).rdzv_endpoint.removeprefix("gpu07:"))
    assert port != derived and 1024 <= port < 65536
    pick = calls[0][1:]
    assert pick[:4] == ["--nodes=1", "--ntasks=1", "--cpus-per-task=1", "--nodelist=gpu07"]
    given = run_sbatch(tmp_path / "set", MASTER_PORT="29500")  # the user's own: no srun
    assert len(given) == 1 and torchrun_args(given).rdzv_endpoint == "gpu07:29500"


def test_the_sbatch_script_takes_the_last_line_of_the_port_step_and_checks_it(tmp_path):
    """What the port's step prints beside the port (a profile's line) went into the
    rendezvous endpoint; a step that prints no port started torchrun with none."""
    calls = run_sbatch(tmp_path / "noisy", printed="module: gcc loaded\\n")
    assert int(torchrun_args(calls).rdzv_endpoint.removeprefix("gpu07:")) >= 1024
    (line,) = run_sbatch(tmp_path / "none", printed="no port here", fails=True)[0]
    assert line.startswith("train.sbatch: the port step on gpu07 printed no port")
