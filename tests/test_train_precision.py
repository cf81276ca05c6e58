"""train.cast_weights (t2.train.precision): bf16 linear weights cast from a float32 master
once per step give autocast's loss and gradients, cast no weight in a micro-batch, save
float32 weights and resume exactly."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from accelerate import Accelerator
from safetensors.torch import load_file
from torch import nn

from t2.config import Config, ModelConfig, TrainConfig
from t2.model.transformer import Transformer
from t2.train.precision import ComputeWeights, wanted
from t2.train.setup import prepare_training
from t2.train.step import StepStats, train_step

SMALL = ModelConfig(
    vocab_size=40,
    d_model=16,
    n_heads=2,
    d_ff=32,
    n_encoder_layers=2,
    n_decoder_layers=2,
    dropout=0.0,
)


@pytest.fixture(autouse=True)
def fresh_accelerator_state():
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def _batches(n: int = 2) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    shapes = {"src": (3, 5), "tgt_in": (3, 4), "tgt_out": (3, 4)}
    return [
        {key: torch.randint(4, 40, shape, generator=g) for key, shape in shapes.items()}
        for _ in range(n)
    ]


def _training(cast: bool, model_cfg: ModelConfig = SMALL):
    acc = Accelerator(cpu=True, mixed_precision="bf16")
    cfg = Config(model=model_cfg, train=TrainConfig(cast_weights=cast, compile=False))
    torch.manual_seed(0)
    model, forward, opt, _ = prepare_training(acc, Transformer(model_cfg), cfg)
    return acc, model, forward, opt


def _grads_of_one_step(cast: bool, batches: list) -> tuple[torch.Tensor, dict]:
    acc, model, forward, opt = _training(cast)
    opt.step = lambda: None  # keep the gradients to compare them
    opt.zero_grad = lambda set_to_none=True: None
    stats = StepStats.zeros(acc.device)
    train_step(acc, forward, opt, batches, 0, 0.1, 0.0, stats)
    return stats.loss, {n: p.grad.clone() for n, p in model.named_parameters()}


def test_auto_means_an_eager_step_on_cuda_under_bf16():
    """Compiled, the casts are fused into the graph's kernels: auto casts only eagerly."""
    assert wanted("auto", "cuda", "bf16", False) and not wanted("auto", "cpu", "bf16", False)
    assert not wanted("auto", "cuda", "bf16", True)
    assert not wanted("auto", "cuda", "fp16", False) and not wanted(True, "cuda", "no", False)
    assert wanted(True, "cpu", "bf16", True) and not wanted(False, "cuda", "bf16", False)


def test_the_plan_resolves_auto_by_whether_the_step_compiles():
    from t2.recipes import load_config
    from t2.train.plan import Device, planned, resolved

    compiled, plan = planned(load_config("base"), 1, Device("cuda", 80 * 2**30, "a GPU"))
    assert compiled.train.compile is True and compiled.train.cast_weights is False
    eager = resolved(load_config("base", ["train.compile=false"]), plan)
    assert eager.train.compile is False and eager.train.cast_weights is True
    forced = resolved(load_config("base", ["train.cast_weights=true"]), plan)
    assert forced.train.compile is True and forced.train.cast_weights is True


def test_compute_weights_are_the_linear_layers_in_bf16_the_rest_shared():
    master = Transformer(SMALL)
    weights = ComputeWeights(master)
    linears = [n + "." for n, m in master.named_modules() if isinstance(m, nn.Linear)]
    pairs = zip(master.named_parameters(), weights.module.parameters(), strict=True)
    for (name, ours), theirs in pairs:
        linear = name.startswith(tuple(linears))
        assert (theirs.dtype == torch.bfloat16) == linear, name
        assert (theirs is ours) == (not linear), name
        if linear:
            torch.testing.assert_close(theirs, ours.to(torch.bfloat16), rtol=0, atol=0)


@pytest.mark.parametrize("accumulate", [1, 2])
def test_casting_once_gives_the_autocast_loss_and_gradients(accumulate):
    """One micro-batch: autocast's numbers exactly (the same rounding of the same
    weights). Two: the linear gradients are summed in bf16, within its precision."""
    batches = _batches(accumulate)
    want_loss, want = _grads_of_one_step(False, batches)
    got_loss, got = _grads_of_one_step(True, batches)
    torch.testing.assert_close(got_loss, want_loss, rtol=1e-6, atol=0)
    exact = accumulate == 1
    for name, grad in want.items():
        assert got[name].dtype == torch.float32, name
        tol = dict(rtol=0, atol=0) if exact else dict(rtol=2e-2, atol=1e-2 * grad.abs().max())
        torch.testing.assert_close(got[name], grad, **tol, msg=name)


def test_casting_once_casts_no_weight_in_a_micro_batch():
    """Autocast casts each linear weight and bias forward and its gradient back in every
    micro-batch; cast once, those casts are gone: two grouped copies a step instead."""
    from benchmarks.op_count import Dispatched

    counts = {}
    for cast in (False, True):
        acc, model, forward, opt = _training(cast)
        stats = StepStats.zeros(acc.device)
        batches = _batches(2)
        train_step(acc, forward, opt, batches, 0, 0.1, 0.0, stats)  # warm-up: Adam's state
        with Dispatched() as mode:
            train_step(acc, forward, opt, batches, 0, 0.1, 0.0, stats)
        counts[cast] = Counter({str(f): n for f, n in mode.calls.items()})
    modules = [m for m in Transformer(SMALL).modules() if isinstance(m, nn.Linear)]
    linear = sum(1 for m in modules for _ in m.parameters(recurse=False))
    casts = {cast: c["aten._to_copy.default"] for cast, c in counts.items()}
    assert casts[False] - casts[True] == 2 * 2 * linear  # 2 micro-batches x (forward, backward)
    assert counts[True]["aten._foreach_copy_.default"] == 2  # gradients in, weights out


def test_a_step_updates_the_master_and_refreshes_the_compute_weights():
    acc, model, forward, opt = _training(True)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    train_step(acc, forward, opt, _batches(1), 0, 0.1, 0.0, StepStats.zeros(acc.device))
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert changed and all(p.dtype == torch.float32 for p in model.parameters())
    for master, compute in forward.weights.pairs:
        torch.testing.assert_close(compute, master.detach().to(torch.bfloat16), rtol=0, atol=0)
        assert compute.grad is None


@pytest.mark.slow
def test_a_run_casting_once_saves_float32_weights_and_resumes_exactly(tmp_path):
    from test_train_runs import assert_same_log, final_weights, losses, train_here

    sets = ["train.cast_weights=true", "train.mixed_precision=bf16", "train.accumulate=2"]
    args = [a for kv in sets for a in ("--set", kv)]
    train_here(tmp_path / "full", *args)
    first = train_here(tmp_path / "resumed", *args, "--set", "train.max_steps=3")
    assert first.returncode == 0
    train_here(tmp_path / "resumed", *args, "--resume")
    assert_same_log(losses(tmp_path / "resumed"), losses(tmp_path / "full"))
    want, got = final_weights(tmp_path / "full"), final_weights(tmp_path / "resumed")
    for name, tensor in want.items():
        assert tensor.dtype == torch.float32, name
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=1e-6, msg=name)
    first_checkpoint = next((tmp_path / "full" / "checkpoints").glob("step-*"))
    saved = load_file(str(first_checkpoint / "model.safetensors"))
    assert {t.dtype for t in saved.values()} == {torch.float32}


@pytest.mark.parametrize("cast", [False, True])
def test_a_step_on_cuda_path_reads_nothing_back_to_the_host(cast):
    """No host synchronisation inside a step: along CUDA's code path a whole step
    (micro-batches, clipping, the optimizer, the weights' refresh) dispatches no
    `_local_scalar_dense`, the operator behind .item() and every device-to-host read."""
    from benchmarks.op_count import Dispatched
    from t2.model.codepath import simulated

    acc, model, forward, opt = _training(cast)
    stats = StepStats.zeros(acc.device)
    with simulated("cuda"):
        train_step(acc, forward, opt, _batches(2), 0, 0.1, 1.0, stats)  # Adam's state
        with Dispatched() as mode:
            train_step(acc, forward, opt, _batches(2), 0, 0.1, 1.0, stats)
    reads = {str(f): n for f, n in mode.calls.items() if "_local_scalar_dense" in str(f)}
    assert not reads, reads
