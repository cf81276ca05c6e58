"""Shared fixtures: tiny configurations so that every model test runs in milliseconds."""

from __future__ import annotations

import pytest
import torch

from t2.config import ModelConfig

# d_model 16, 2 heads of 8, one layer per stack, vocabulary 50: small enough to sweep.
TINY_MODEL = dict(
    vocab_size=50, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1
)


@pytest.fixture
def tiny_model_config():
    """A factory of tiny ModelConfigs: tiny_model_config(positional="rope", ...)."""

    def make(**overrides) -> ModelConfig:
        return ModelConfig(**{**TINY_MODEL, **overrides})

    return make


@pytest.fixture
def single_thread():
    """One intra-op thread: on tiny tensors, threads on a busy 2-core machine spin and make
    each op ~100x slower. Use with `pytestmark = pytest.mark.usefixtures("single_thread")`."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def toy(tmp_path_factory):
    """A run directory with a toy model trained for seconds on a copy-like task, shared by
    the decoding and evaluation tests: (run_dir, model, tokenizer)."""
    from toy_task import one_thread, toy_run

    with one_thread():
        return toy_run(tmp_path_factory.mktemp("toy"))


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """One uninterrupted quickstart run of test_train_runs.TINY (6 steps, checkpoints at 3
    and 6), trained once for the tests that compare a resumed or changed run against it."""
    from test_train_runs import train_here

    run = tmp_path_factory.mktemp("tiny") / "run"
    train_here(run)
    return run


@pytest.fixture(scope="session")
def two_process_run(tmp_path_factory):
    """The quickstart run of test_train_runs.TINY by two processes (CPU, gloo) that srun
    started, with SLURM's variables only, on one folder: trained once for the tests that
    compare a multi-process run, or one stopped and resumed, against it. (run, [(exit
    status, stdout, stderr)] of each process)."""
    from test_train_nodes import srun_job

    return srun_job(tmp_path_factory.mktemp("srun") / "run")


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    """An empty Hugging Face Hub cache that may not download (tests/hub_cache.py fills it)."""
    from huggingface_hub import constants

    cache = tmp_path / "hub-cache"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache
