"""Jobs beyond one launcher, on CPU processes with gloo: which processes write a folder
(shared or each node's own disk), srun's tasks recognised as one job, two nodes each with
its own disk (killed, then resumed on both), torchrun's elastic restart resuming by itself
(each ending with the loss log of the uninterrupted two-process run on one folder), and
the data prepared once a folder, giving each process the batches of one process."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys

import pytest
from test_train_lost_process import _command, _free_port, _launch
from test_train_runs import ENV, ROOT, assert_same_log, losses

from t2.config import Config, TrainConfig
from t2.data import stages
from t2.errors import CheckpointError, ConfigError
from t2.rundir import RunDir
from t2.train.nodes import Sharing, Storage, common_checkpoint, detect, shared_tokenizer

AS_SCRIPT = """
import runpy, sys
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
KILLED_AT_STEP = """
import os, runpy, signal, sys
import t2.train.loop as loop
step_fn, calls = loop.train_step, [0]
def killed(*args, **kwargs):  # process T2_KILL_RANK dies as step 5 begins, on a first start
    calls[0] += 1
    first = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
    if first and os.environ["RANK"] == os.environ["T2_KILL_RANK"] and calls[0] == 5:
        os.kill(os.getpid(), signal.SIGKILL)
    step_fn(*args, **kwargs)
loop.train_step = killed
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


class _TwoProcesses:
    """Waits of process 0 of two, whose partner found `other` (Waits.gather)."""

    group = "gloo"

    def __init__(self, other: object = None) -> None:
        self.other = other

    def gather(self, value: object) -> list[object]:
        return [value, self.other]


def _with_checkpoints(run: RunDir, *steps: int) -> RunDir:
    for step in steps:
        ckpt = run.checkpoint(step)
        ckpt.mkdir(parents=True)
        (ckpt / "COMPLETE").touch()
        (ckpt / "model.safetensors").touch()
    return run


def test_processes_agree_on_the_checkpoint_to_resume_from(tmp_path):
    """On node-local disks a node killed mid-save may lack the latest checkpoint: --resume
    takes the latest that every process has; a named one must be everywhere."""
    run = _with_checkpoints(RunDir(tmp_path / "run"), 3, 6)
    both = _TwoProcesses(([3, 6], 6))
    assert common_checkpoint(run, run.checkpoint(6), both, named=False) == run.checkpoint(6)
    behind = _TwoProcesses(([3], 3))
    assert common_checkpoint(run, run.checkpoint(6), behind, named=False) == run.checkpoint(3)
    with pytest.raises(CheckpointError, match=r"process 0: 3, 6; process 1: 3\)"):
        common_checkpoint(run, run.checkpoint(6), _TwoProcesses(([3], 3)), named=True)
    with pytest.raises(CheckpointError, match="copy a step-N folder to the others'"):
        common_checkpoint(run, run.checkpoint(6), _TwoProcesses(([], None)), named=False)
    with pytest.raises(CheckpointError, match="^--resume 9: no such"):
        common_checkpoint(run, run.checkpoint(6), _TwoProcesses(([], "--resume 9: no such")), True)
    fresh = RunDir(tmp_path / "new")
    assert common_checkpoint(fresh, None, _TwoProcesses(([], None)), named=False) is None


class _Gathered:
    """Waits whose gather gives what each process sent: `sent`, by rank (Waits.gather)."""

    group = "gloo"

    def __init__(self, sent: list[object]) -> None:
        self.sent = sent

    def gather(self, value: object) -> list[object]:
        return self.sent


def writers_of(nodes: list[tuple[str, str | None]], monkeypatch) -> list[bool]:  # noqa: ANN001
    """Whether each process writes with train.shared_filesystem=false, the processes in rank
    order running on `nodes` (host name, GROUP_RANK or None): what each sends is found by
    running it on its node, then each decides with what all of them sent."""

    def on_node(rank: int, waits: object) -> Sharing:
        host, group = nodes[rank]
        monkeypatch.setattr(socket, "gethostname", lambda: host)
        if group is None:
            monkeypatch.delenv("GROUP_RANK", raising=False)
        else:
            monkeypatch.setenv("GROUP_RANK", group)
        return detect(ROOT, False, waits, rank=rank)

    class Recording(_Gathered):
        def gather(self, value: object) -> list[object]:
            self.sent.append(value)
            return [value] * len(nodes)

    sent: list[object] = []
    for rank in range(len(nodes)):
        on_node(rank, Recording(sent))
    decided = [on_node(rank, _Gathered(sent)) for rank in range(len(nodes))]
    assert all(not d.shared for d in decided)
    return [d.writes for d in decided]


def test_the_writers_of_a_folder_when_the_setting_says_it(monkeypatch):
    assert detect(ROOT, True, _TwoProcesses(), rank=1) == Sharing(writes=False, shared=True)
    # false: the first process of each node, also where every task's LOCAL_RANK is 0 (srun
    # --gpus-per-task=1: each task's one GPU is its device 0), and without GROUP_RANK
    nodes = [("gpu07", "0"), ("gpu07", "0"), ("gpu08", "1"), ("gpu08", "1")]
    assert writers_of(nodes, monkeypatch) == [True, False, True, False]
    bare = [("gpu07", None), ("gpu07", None), ("gpu08", None), ("gpu08", None)]
    assert writers_of(bare, monkeypatch) == [True, False, True, False]


def test_two_nodes_of_one_host_name_each_write_their_own(monkeypatch):
    """Pods with hostNetwork, `docker --network host`, the suite's two nodes on one host:
    one host name, two nodes (GROUP_RANK 0 and 1). Gathering host names elected node 0's
    first process alone, and node 1 wrote no --out."""
    nodes = [("pod", "0"), ("pod", "0"), ("pod", "1"), ("pod", "1")]
    assert writers_of(nodes, monkeypatch) == [True, False, True, False]


def test_the_setting_is_true_false_or_auto():
    with pytest.raises(ConfigError, match="train.shared_filesystem must be true, false or auto"):
        TrainConfig(shared_filesystem="nfs")


class _OtherNode:
    """The first process of another node: not the main one; the main process's
    tokenizer.json, its sample.json and its record reach it over the process group
    (Waits.from_main)."""

    is_main_process = False

    def __init__(self, text: str, sample: str, noted: dict) -> None:
        self.sent = (text, sample, noted)

    def from_main(self, value: object) -> tuple:
        return self.sent


def test_another_node_gets_the_main_tokenizer_over_the_group_and_keeps_a_copy(tmp_path):
    from t2.data.tokenizer import load_tokenizer, train_tokenizer

    texts = ["ein kleiner Test", "a small test", "noch ein Satz", "one more line"] * 10
    main = train_tokenizer(texts, 60, 1, False, tmp_path / "main")
    facts = {"sample_pairs": 20, "pairs": 20, "sample_seed": 2016}
    node = _OtherNode(main.backend_tokenizer.to_str(), json.dumps(facts), facts)
    run = RunDir(tmp_path / "node1")
    storage = Storage(Sharing(writes=True, shared=False), Sharing(writes=True, shared=False))
    stages.begin()
    got = shared_tokenizer(Config(), run, node, node, storage, resume=False)
    assert json.loads((run.tokenizer / "sample.json").read_text()) == facts
    assert stages.record()["tokenizer"] == facts  # into this node's meta.json
    for tok in (got, load_tokenizer(run.tokenizer)):  # node 1's own copy in its run
        assert len(tok) == len(main) and tok.pad_token_id == main.pad_token_id == 0
        assert tok("ein kleiner Satz").input_ids == main("ein kleiner Satz").input_ids
        assert tok.decode(main("one more test").input_ids) == "one more test"


def srun_env(rank: int, port: int) -> dict[str, str]:
    """What `srun --ntasks 2 python train.py` gives task `rank` on one node: SLURM's
    variables only (the port is free for this test; SLURM's own derives from the job)."""
    return {
        "SLURM_JOB_ID": "4242",
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(rank),
        "SLURM_NTASKS": "2",
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_NODEID": "0",
        "SLURM_JOB_NODELIST": "localhost",
        "SLURM_TASKS_PER_NODE": "2",
        "MASTER_PORT": str(port),
    }


def srun_job(run) -> tuple:
    """Two srun tasks training `run` on one folder, uninterrupted: (run, the exit status,
    stdout and stderr of each); conftest's two_process_run."""
    procs = _launch(run, program=AS_SCRIPT, env={}, ranked=srun_env)
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        outputs.append((proc.returncode, out, err))
    return run, outputs


@pytest.mark.slow
def test_srun_tasks_are_one_job_with_the_data_lines_once_and_no_deprecation_warning(
    two_process_run,
):
    run, outputs = two_process_run
    for code, _, err in outputs:
        assert code == 0, err[-3000:]
        assert "broadcast_buffers" not in err  # Accelerate's DDP argument, deprecated in torch
    first = outputs[0][1]
    assert "SLURM: 2 tasks of job 4242 form one job of 2 processes, 2 on this node" in first
    assert "batch plan: 2 processes x 1 micro-batch" in first
    assert "storage:" not in first  # one folder: nothing to say
    assert "data train: 400 pairs read" in first  # the data lines: one copy, the main's
    other = (outputs[1][1] + outputs[1][2]).splitlines()
    assert not [line for line in other if line.startswith(("data ", "tokenizer"))], other
    assert [s for s, _ in losses(run)] == list(range(1, 7))
    assert (run / "results.json").is_file()


def _torchrun(*args: str) -> list[str]:
    return [*TORCHRUN, *args]


@pytest.mark.slow
def test_two_nodes_with_their_own_disks_resume_on_both_to_the_shared_run(tmp_path, two_process_run):
    """Two torchrun launchers as two nodes of one host, each with its own --out and data
    cache standing for its local disk: the tokenizer is trained once and sent to node 1,
    each node caches its data and keeps every checkpoint; node 1's process is killed at
    step 5, and --resume on both ends with the shared-storage run's loss log."""
    script = tmp_path / "killed.py"
    script.write_text(KILLED_AT_STEP)

    def launch(node: int, port: int, *extra: str, hook: bool) -> subprocess.Popen:
        nodes = ("--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "1")
        where = ("--master-addr", "127.0.0.1", "--master-port", str(port))
        launcher = _torchrun(*nodes, *where, *([str(script)] if hook else []))
        cache = ("--set", f"data.cache_dir={tmp_path / f'cache{node}'}")
        cmd = _command(tmp_path / f"node{node}", *cache, *extra, python=launcher)
        env = {**ENV, "T2_KILL_RANK": "1"}
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        return subprocess.Popen(cmd, env=env, cwd=ROOT, text=True, **pipes)

    port = _free_port()
    killed = [launch(node, port, hook=True) for node in (0, 1)]
    for proc in killed:
        proc.communicate(timeout=600)
        assert proc.returncode != 0
    for node in (0, 1):
        assert RunDir(tmp_path / f"node{node}").latest().name == "step-0000003"
    port = _free_port()
    resumed = [launch(node, port, "--resume", hook=False) for node in (0, 1)]
    outputs = [proc.communicate(timeout=600) for proc in resumed]
    for proc, (_, err) in zip(resumed, outputs, strict=True):
        assert proc.returncode == 0, err[-3000:]
    assert "storage: --out" in outputs[0][0] and "not one folder for every process" in outputs[0][0]
    reference = losses(two_process_run[0])
    for node in (0, 1):
        run = tmp_path / f"node{node}"
        assert_same_log(losses(run), reference)  # node 1's log: a copy of node 0's
        assert [c.name for c in RunDir(run).checkpoints()] == ["step-0000003", "step-0000006"]
        assert any((tmp_path / f"cache{node}" / "pairs").iterdir())
    tokenizers = [(tmp_path / f"node{n}" / "tokenizer" / "tokenizer.json") for n in (0, 1)]
    assert tokenizers[0].read_text() == tokenizers[1].read_text()
    samples = [t.with_name("sample.json").read_text() for t in tokenizers]  # what it learnt from
    metas = [json.loads((tmp_path / f"node{n}" / "meta.json").read_text()) for n in (0, 1)]
    assert samples[0] == samples[1] and json.loads(samples[0])["pairs"] > 0
    assert metas[0]["data"]["tokenizer"] == metas[1]["data"]["tokenizer"] == json.loads(samples[0])
    assert (tmp_path / "node0" / "results.json").is_file()


@pytest.mark.slow
def test_an_elastic_restart_resumes_by_itself_to_the_uninterrupted_log(tmp_path, two_process_run):
    """torchrun --max-restarts 1 restarts both workers after process 1 is killed at step 5:
    without --resume they continue from the checkpoint of step 3, saying so in one line."""
    script = tmp_path / "killed.py"
    script.write_text(KILLED_AT_STEP)
    launcher = _torchrun("--standalone", "--nproc-per-node", "2", "--max-restarts", "1")
    run = tmp_path / "run"
    result = subprocess.run(
        _command(run, python=[*launcher, str(script)]),
        env={**ENV, "T2_KILL_RANK": "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = f"restart 1 of the workers by torchrun: from {RunDir(run).checkpoint(3)}; continuing"
    assert result.stdout.count(line) == 1, result.stdout[-3000:]
    assert_same_log(losses(run), losses(two_process_run[0]))


PREPARE = """
import itertools, json, os, sys
import t2.data.encode as encode, t2.data.pipeline as pipeline, t2.data.tokenizer as tokenizer
counts = {"clean": 0, "encode": 0, "tokenizer": 0}
def counted(module, name, key):
    function = getattr(module, name)
    def counting(*args, **kwargs):
        counts[key] += 1
        return function(*args, **kwargs)
    setattr(module, name, counting)
counted(pipeline, "_clean_into", "clean")
counted(encode, "_encoded", "encode")
counted(tokenizer, "learn_bpe", "tokenizer")
from t2.recipes import load_config
from t2.rundir import RunDir
from t2.train.collective import Waits
from t2.train.nodes import detect_storage, prepare_data
from t2.train.setup import make_accelerator, split_loader
out, phases, sets = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
rank, accelerator, waits, report = int(os.environ["RANK"]), None, None, {}
for phase, folder in phases.items():  # the data cache and the run in folder/
    where = folder.format(rank=rank)
    cfg = load_config("quickstart", [*sets, f"data.cache_dir={where}/cache"])
    accelerator = accelerator or make_accelerator(cfg, "disabled")
    waits = waits or Waits(accelerator)
    run = RunDir(f"{where}/run")
    storage = detect_storage(cfg, run, waits, accelerator)
    before = dict(counts)
    tok, train, _, _ = prepare_data(cfg, run, accelerator, waits, storage, resume=False)
    sampler, _ = split_loader(train, cfg, tok.pad_token_id, True, rank, 2)
    batches = [[train[int(i)]["src_ids"] for i in b] for b in itertools.islice(sampler, 3)]
    report[phase] = {
        "counts": {k: counts[k] - before[k] for k in counts},
        "writes": [storage.run.writes, storage.cache.writes],
        "shared": [storage.run.shared, storage.cache.shared],
        "tokenizer": (run.tokenizer / "tokenizer.json").is_file(),
        "batches": batches,
    }
with open(f"{out}/report{rank}.json", "w") as f:
    json.dump(report, f)
"""
# each process in a mount namespace of its own, where one path is a disk of its own
ON_OWN_DISK = ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
MOUNT_THEN = 'mount --bind "$0" "$1" && shift && exec "$@"'


def two_nodes_env(rank: int, port: int) -> dict[str, str]:
    """Process `rank` of two, each the only one on its node (as torchrun --nnodes 2)."""
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(rank),
    }


def _own_mounts(tmp) -> str | None:  # noqa: ANN001
    """Why a process cannot have a mount namespace of its own here, or None."""
    if shutil.which("unshare") is None:
        return "no unshare command"
    (tmp / "probe").mkdir()
    tried = subprocess.run(
        [*ON_OWN_DISK, MOUNT_THEN, str(tmp / "probe"), str(tmp / "probe"), "true"],
        capture_output=True,
        text=True,
    )
    if tried.returncode != 0:
        return f"a private bind mount needs root: {tried.stderr.strip()[:200]}"
    return None


def _batches_of_one_process(tmp, sets: list[str]) -> list[list]:  # noqa: ANN001
    """Each rank's first batches, as one process computes them from its own cache."""
    from itertools import islice

    from t2.data.encode import encode_pairs
    from t2.data.pipeline import load_pairs
    from t2.data.tokenizer import prepare_tokenizer
    from t2.recipes import load_config
    from t2.train.setup import split_loader

    cfg = load_config("quickstart", [*sets, f"data.cache_dir={tmp / 'alone'}"])
    tok = prepare_tokenizer(cfg.data, None, cfg.train.seed, reuse=False)
    train = encode_pairs(load_pairs(cfg.data, "train", cfg.train.seed), tok, cfg.data, "train")
    ranks = [split_loader(train, cfg, tok.pad_token_id, True, r, 2)[0] for r in (0, 1)]
    return [[[train[int(i)]["src_ids"] for i in b] for b in islice(s, 3)] for s in ranks]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Two processes as two nodes prepare the data (cleaning, the tokenizer, encoding) for
    a run: on one shared folder; on a folder each; and, where a process may have a mount
    namespace of its own, on one path that is another disk in each. Returns each process's
    report by phase, the batches one process computes for each rank, and why the phase of
    mounts did not run (None if it did)."""
    from test_train_runs import TINY

    tmp = tmp_path_factory.mktemp("prepared")
    no_mounts = _own_mounts(tmp)
    phases = {"shared": f"{tmp}/shared", "folders": f"{tmp}/node{{rank}}"}
    if no_mounts is None:
        phases["mounts"] = f"{tmp}/local"
    sets = [*TINY, "data.num_proc=1"]  # encoding in the process, where it is counted
    port, procs = _free_port(), []
    for rank in (0, 1):
        cmd = [sys.executable, "-c", PREPARE, str(tmp), json.dumps(phases), *sets]
        if no_mounts is None:  # tmp/local is tmp/disk0 for process 0, tmp/disk1 for 1
            (tmp / f"disk{rank}").mkdir()
            (tmp / "local").mkdir(exist_ok=True)
            cmd = [*ON_OWN_DISK, MOUNT_THEN, str(tmp / f"disk{rank}"), str(tmp / "local"), *cmd]
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        env = {**ENV, **two_nodes_env(rank, port)}
        procs.append(subprocess.Popen(cmd, env=env, cwd=ROOT, text=True, **pipes))
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    reports = [json.loads((tmp / f"report{r}.json").read_text()) for r in (0, 1)]
    return reports, _batches_of_one_process(tmp, sets), no_mounts


def _assert_each_node_prepares(reports: list[dict], batches: list) -> None:
    """Each process wrote its own folders: cleaned and encoded there; the tokenizer was
    trained once (process 1 got it over the group and keeps a copy in its run)."""
    assert [r["shared"] for r in reports] == [[False, False]] * 2
    assert [r["writes"] for r in reports] == [[True, True]] * 2
    assert [r["counts"]["tokenizer"] for r in reports] == [1, 0]
    assert all(r["counts"]["clean"] == 3 and r["counts"]["encode"] > 0 for r in reports)
    assert all(r["tokenizer"] for r in reports)
    assert [r["batches"] for r in reports] == batches


@pytest.mark.slow
def test_the_data_are_prepared_once_a_folder_and_give_the_batches_of_one_process(prepared):
    """Two processes as two nodes: on one shared cache folder one process cleans and
    encodes and the other reads; on a cache folder each, each node prepares its own. Each
    process draws the batches that one process computes for its rank."""
    reports, batches, _ = prepared
    together = [r["shared"] for r in reports]  # each process's report of that phase
    assert [r["shared"] for r in together] == [[True, True]] * 2
    assert [r["writes"] for r in together] == [[True, True], [False, False]]
    assert together[0]["counts"]["clean"] == 3 and together[0]["counts"]["encode"] > 0
    assert together[1]["counts"] == {"clean": 0, "encode": 0, "tokenizer": 0}
    assert [r["batches"] for r in together] == batches
    _assert_each_node_prepares([r["folders"] for r in reports], batches)


def test_one_path_on_a_disk_of_each_node_is_told_apart(prepared):
    """The same --out and cache path on both nodes, another disk behind it on each (a
    mount namespace each): the markers tell them apart as two folders would be."""
    reports, batches, no_mounts = prepared
    if no_mounts is not None:
        pytest.skip(f"a mount namespace of its own for each process: {no_mounts}")
    _assert_each_node_prepares([r["mounts"] for r in reports], batches)
