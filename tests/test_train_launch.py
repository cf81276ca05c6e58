"""How a job's processes were started: srun's tasks read as torch.distributed's variables,
and torchrun's restarts turned into a resume."""

from __future__ import annotations

import pytest

from t2.train.launch import (
    adopt_slurm,
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


@pytest.mark.parametrize(
    "change",
    [
        {"WORLD_SIZE": "8"},  # torchrun (one per node, under srun) set its own
        {"SLURM_NTASKS": "1", "SLURM_STEP_NUM_TASKS": "1"},  # a single task
        {"SLURM_JOB_NAME": "bash"},  # a shell in an allocation: one python, one process
    ],
    ids=["launcher", "one-task", "interactive"],
)
def test_a_process_not_started_as_one_of_several_srun_tasks_is_left_alone(change):
    assert slurm_world({**SRUN, **change}) is None
    assert slurm_world({k: v for k, v in SRUN.items() if k != "SLURM_PROCID"}) is None


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


def test_the_sbatch_script_runs_one_torchrun_per_node_with_a_rendezvous_at_the_first(tmp_path):
    """examples/slurm/train.sbatch under bash, with stand-ins for srun (which records what
    it is given) and scontrol: the torchrun it starts parses with torch's own parser."""
    import subprocess
    from pathlib import Path

    from torch.distributed.run import get_args_parser

    script = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "train.sbatch"
    header = [line for line in script.read_text().splitlines() if line.startswith("#SBATCH")]
    assert {"#SBATCH --signal=USR1@120", "#SBATCH --requeue"} <= set(header)
    fake = tmp_path / "bin"
    fake.mkdir()
    hostnames = 'if [ "$1 $2" = "show hostnames" ]; then printf "gpu07\\ngpu08\\n"; fi'
    (fake / "scontrol").write_text(f"#!/bin/sh\n{hostnames}\n")
    (fake / "srun").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path / "srun"}\n')
    for tool in fake.iterdir():
        tool.chmod(0o755)
    env = {
        "PATH": f"{fake}:/usr/bin:/bin",
        **{k: SRUN[k] for k in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST")},
        **{"SLURM_JOB_NUM_NODES": "2", "SLURM_GPUS_ON_NODE": "8"},
    }
    extra = ["big", "runs/big", "--set", "train.max_steps=10"]
    subprocess.run(["bash", str(script), *extra], env=env, check=True, timeout=60)
    given = (tmp_path / "srun").read_text().splitlines()
    assert given[:2] == ["--kill-on-bad-exit=1", "torchrun"]
    args = get_args_parser().parse_args(given[2:])
    assert (args.nnodes, args.nproc_per_node, args.rdzv_endpoint) == ("2", "8", "gpu07:18456")
    assert (args.rdzv_id, args.max_restarts, args.training_script) == ("123456", 3, "train.py")
    assert "SIGUSR1" in args.signals_to_handle.split(",") and args.shutdown_timeout < 120
    wanted = ["--recipe", "big", "--out", "runs/big", "--wandb", "offline", "--resume"]
    assert args.training_script_args == [*wanted, "--set", "train.max_steps=10"]
