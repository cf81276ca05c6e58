"""Training helpers: schedules, parameter groups, the non-finite skip and atomic checkpoints."""

from __future__ import annotations

import math

import pytest
import torch
from accelerate import Accelerator

from t2.config import Config, ModelConfig, TrainConfig
from t2.errors import T2Error
from t2.model.transformer import Transformer
from t2.train.compiling import TrainingForward
from t2.train.lr_find import step_loss, suggest
from t2.train.optim import build_optimizer, build_scheduler, param_groups, peak_lr
from t2.train.step import StepStats, train_step

TINY = ModelConfig(
    vocab_size=40,
    d_model=16,
    n_heads=2,
    d_ff=32,
    n_encoder_layers=1,
    n_decoder_layers=1,
    dropout=0.0,
)


def lrs(cfg: TrainConfig, d_model: int, steps: int) -> list[float]:
    model = torch.nn.Linear(2, 2)
    opt = build_optimizer(model, cfg, d_model)
    sched = build_scheduler(opt, cfg, d_model)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_inverse_sqrt_is_the_papers_formula():
    cfg = TrainConfig(warmup_steps=40)
    got = lrs(cfg, 512, 120)
    for step, lr in enumerate(got, 1):
        paper = 512**-0.5 * min(step**-0.5, step * 40**-1.5)
        assert lr == pytest.approx(paper, rel=1e-9)


def test_max_lr_scales_the_peak():
    cfg = TrainConfig(warmup_steps=40, max_lr=1e-3)
    got = lrs(cfg, 512, 100)
    assert max(got) == pytest.approx(1e-3)
    assert got.index(max(got)) == 39  # the peak is at the end of warm-up (step 40)
    assert peak_lr(TrainConfig(warmup_steps=4000), 512) == pytest.approx(6.988e-4, rel=1e-3)


def test_cosine_warms_up_and_decays_to_the_floor():
    cfg = TrainConfig(schedule="cosine", warmup_steps=10, max_steps=50, max_lr=1e-3, min_lr=1e-5)
    got = lrs(cfg, 512, 51)
    assert got[0] == pytest.approx(1e-4)
    assert got[9] == pytest.approx(1e-3)
    assert got[50] == pytest.approx(1e-5)
    assert all(a >= b for a, b in zip(got[9:], got[10:], strict=False))


def test_weight_decay_excludes_norms_biases_and_embeddings():
    model = Transformer(TINY)
    decay, no_decay = param_groups(model, 0.01)
    decayed = {id(p) for p in decay["params"]}
    for name, p in model.named_parameters():
        is_matrix = p.dim() == 2 and "embed" not in name and "positional" not in name
        assert (id(p) in decayed) == is_matrix, name
    assert no_decay["weight_decay"] == 0.0 and decay["weight_decay"] == 0.01


@pytest.fixture
def fresh_accelerator_state():
    """Each test sets its own precision; Accelerate's state is a process-wide singleton."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "src": torch.randint(4, 40, (3, 5), generator=g),
        "tgt_in": torch.randint(4, 40, (3, 4), generator=g),
        "tgt_out": torch.randint(4, 40, (3, 4), generator=g),
    }


@pytest.mark.parametrize("precision", ["no", "bf16", "fp16"])  # fp16: bf16 on this CPU
@pytest.mark.usefixtures("fresh_accelerator_state")
def test_a_non_finite_step_is_skipped_without_changing_weights(precision, capsys):
    from t2.train.plan import mixed_precision
    from t2.train.setup import prepare_model

    torch.manual_seed(0)
    acc = Accelerator(cpu=True, mixed_precision=mixed_precision(precision, cuda=False))
    assert acc.mixed_precision == ("no" if precision == "no" else "bf16")
    model = Transformer(TINY)
    opt = build_optimizer(model, TrainConfig(), TINY.d_model)
    model, opt = prepare_model(acc, model, opt)
    stats = StepStats.zeros(acc.device)
    train_step(acc, TrainingForward(model, False), opt, [_batch()], 0, 0.1, 0.0, stats)
    assert stats.skipped.item() == 0 and stats.bad_run.item() == 0
    with torch.no_grad():
        model.encoder[0].ffn.w1.bias[0] = float("nan")  # poisons the loss
    before = {k: v.clone() for k, v in model.state_dict().items()}
    moments = _cloned(opt.state_dict()["state"])
    attributes = set(vars(opt.optimizer))
    for _ in range(2):
        train_step(acc, TrainingForward(model, False), opt, [_batch()], 0, 0.1, 0.0, stats)
    assert stats.skipped.item() == 2 and stats.bad_run.item() == 2
    for k, v in model.state_dict().items():  # the poisoned bias too, its NaN in place
        torch.testing.assert_close(v, before[k], rtol=0, atol=0, equal_nan=True, msg=k)
    torch.testing.assert_close(opt.state_dict()["state"], moments, rtol=0, atol=0)  # and steps
    assert set(vars(opt.optimizer)) == attributes  # the skip flag lasted its step alone
    assert "found_inf" not in attributes
    assert math.isfinite(stats.loss.item())  # skipped steps add nothing to the logged loss


def _cloned(state: dict) -> dict:
    return {i: {k: v.clone() for k, v in s.items()} for i, s in state.items()}


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_the_optimizer_is_torch_s_fused_one_that_skips_a_flagged_step(name):
    """build_optimizer's Adam(W) keeps torch's state_dict (checkpoints load either way) and
    adds skip_if: a flagged step changes nothing, the next one steps; pickled, it still
    forgets the flag after a step."""
    import copy

    from t2.train.optim import skippable

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = build_optimizer(model, TrainConfig(optimizer=name), 4)
    plain = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[name]
    assert isinstance(opt, plain) and opt.defaults["fused"]
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    weights, state = model.weight.detach().clone(), _cloned(opt.state_dict()["state"])
    for copied in (opt, copy.deepcopy(opt)):
        assert skippable(copied) is copied
        copied.skip_if(torch.tensor(1.0))
        copied.step()
        assert "found_inf" not in vars(copied)
    torch.testing.assert_close(model.weight, weights, rtol=0, atol=0)
    torch.testing.assert_close(opt.state_dict()["state"], state, rtol=0, atol=0)
    opt.skip_if(torch.tensor(0.0))
    opt.step()
    assert not torch.equal(model.weight, weights) and opt.state[model.weight]["step"].item() == 2
    reference = plain(model.parameters(), fused=True)
    groups = [opt.state_dict()["param_groups"], reference.state_dict()["param_groups"]]
    assert groups[0][0].keys() == groups[1][0].keys()
    with pytest.raises(TypeError, match="cannot skip"):
        skippable(reference)


@pytest.mark.usefixtures("fresh_accelerator_state")
def test_bf16_train_step_gives_the_reference_loss_and_gradients(monkeypatch):
    """prepare_model drops Accelerate's float32 copy of the outputs, and train_step projects
    the decoder's states and takes the loss under autocast (the projection in bf16, as the
    reference's autocast linear): its loss and gradients are the reference path's, which
    upcasts the bf16 logits."""
    import t2.model.transformer as transformer_module
    from t2.model.loss import projected_cross_entropy
    from t2.train.setup import prepare_model

    acc = Accelerator(cpu=True, mixed_precision="bf16")
    torch.manual_seed(0)
    reference = Transformer(TINY)
    model = Transformer(TINY)
    model.load_state_dict(reference.state_dict())
    opt = build_optimizer(model, TrainConfig(), TINY.d_model)
    model, opt = prepare_model(acc, model, opt)
    with acc.autocast():
        assert model(_batch()["src"], _batch()["tgt_in"]).dtype == torch.bfloat16
    assert model(_batch()["src"], _batch()["tgt_in"]).dtype == torch.float32  # no autocast left

    seen = []

    def spy(*args, **kwargs):
        seen.append(torch.is_autocast_enabled("cpu"))
        return projected_cross_entropy(*args, **kwargs)

    monkeypatch.setattr(transformer_module, "projected_cross_entropy", spy)
    opt.step = lambda: None  # keep the gradients to compare them
    opt.zero_grad = lambda set_to_none=True: None
    stats = StepStats.zeros(acc.device)
    train_step(acc, TrainingForward(model, False), opt, [_batch()], 0, 0.1, 0.0, stats)
    assert seen == [True]

    b = _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = reference(b["src"], b["tgt_in"])
    loss = torch.nn.functional.cross_entropy(
        logits.float().flatten(0, 1),
        b["tgt_out"].flatten(),
        ignore_index=0,
        label_smoothing=0.1,
        reduction="sum",
    )
    tokens = b["tgt_out"].ne(0).sum()
    (loss / tokens).backward()
    assert stats.loss.item() == pytest.approx(loss.item(), rel=1e-5)
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        error = (p.grad - q.grad).abs().max()  # bf16's rounding: ~1% of the largest
        assert error <= 2e-2 * q.grad.abs().max(), name


def test_fp16_without_a_loss_scaler_falls_back_to_bf16_and_says_so(capsys):
    from t2.train.plan import mixed_precision

    assert mixed_precision("fp16", cuda=False) == "bf16"
    assert "fp16 needs CUDA's loss scaler; using bf16" in capsys.readouterr().out
    assert mixed_precision("fp16", cuda=True) == "fp16"
    assert mixed_precision("auto", cuda=False) == "no" and mixed_precision("no") == "no"


def test_lr_suggestion_is_the_steepest_descent_before_divergence():
    lrs_ = [10 ** (-6 + i * 0.1) for i in range(60)]
    # flat, then falling fastest around 1e-3, then diverging
    losses = [5 - 4 / (1 + math.exp(-(math.log10(lr) + 3) * 4)) for lr in lrs_[:45]]
    losses += [losses[-1] * 3**k for k in range(1, 16)]
    lr, i = suggest(lrs_, losses)
    assert 3e-4 < lr < 3e-3 and i < 45  # the steepest fall, before the divergence at 45
    diverging_early = losses[:30] + [losses[29] * 3**k for k in range(1, 31)]
    lr, i = suggest(lrs_, diverging_early)  # the curve is cut at the divergence point
    assert i < 30 and lr < lrs_[30]


def test_lr_finder_counts_a_skipped_step_as_divergence_not_as_zero_loss():
    stats = StepStats.zeros(torch.device("cpu"))
    stats.loss += 6.0
    stats.tokens += 3.0
    assert step_loss(stats).item() == 2.0
    stats.skipped += 1.0  # train_step skipped it: its sums stay as they were
    assert math.isnan(step_loss(stats).item())
    lrs_ = [10 ** (-6 + i * 0.1) for i in range(40)]
    losses = [5.0 - 0.1 * i for i in range(20)] + [math.nan] * 20
    lr, i = suggest(lrs_, losses)
    assert i < 20 and lr == lrs_[i]
    with pytest.raises(T2Error, match="diverged at once"):
        suggest(lrs_, [math.nan] * 40)


def test_wandb_that_cannot_start_is_one_line_error(tmp_path):
    from wandb.errors import UsageError

    from t2.errors import ConfigError
    from t2.train.tracking import init_wandb

    class NoAccount:
        def init_trackers(self, **kwargs):
            raise UsageError("No API key configured. Use `wandb login` to log in.")

    with pytest.raises(ConfigError, match=r"W&B online could not start \(No API key"):
        init_wandb(NoAccount(), Config(), "quickstart", tmp_path, "online")


def test_ddp_does_not_rebroadcast_the_positional_tables_each_forward():
    """DDP syncs the buffers (positional tables) once, as it is made, never at each forward;
    and Accelerate passes it no broadcast_buffers, deprecated since torch 2.13 (a
    FutureWarning in every process's log)."""
    import warnings

    from torch.nn.parallel import DistributedDataParallel

    from t2.train.setup import make_accelerator, prepare_model

    assert make_accelerator(Config(), "disabled").ddp_handler is None

    class Prepared:  # Accelerate's prepare on several processes: DDP, made as Accelerate does
        def prepare(self, model, optimizer):
            return DistributedDataParallel(model), optimizer

        def unwrap_model(self, model, keep_fp32_wrapper):
            return model.module

    store = torch.distributed.HashStore()
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        model = Transformer(TINY)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            ddp, _ = prepare_model(Prepared(), model, None)
        assert list(model.buffers()) and not ddp.will_sync_module_buffers()
    finally:
        torch.distributed.destroy_process_group()


def test_the_collective_timeout_is_checked_and_sets_the_process_group_timeout():
    from datetime import timedelta

    from t2.errors import ConfigError
    from t2.train.setup import make_accelerator

    assert Config().train.collective_timeout == 300  # a training step's wait, not 30 min
    for bad in (0, -5, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="train.collective_timeout must be"):
            TrainConfig(collective_timeout=bad)
    cfg = Config(train=TrainConfig(collective_timeout=20))
    assert make_accelerator(cfg, "disabled").init_handler.timeout == timedelta(seconds=20)


class _Processes:
    num_processes, process_index = 2, 1


def test_a_collective_that_waited_the_timeout_is_one_line_naming_the_checkpoint(tmp_path):
    import time

    from t2.errors import LostProcessError
    from t2.train.collective import LostProcess

    ckpt = tmp_path / "checkpoints" / "step-0000003"
    lost = LostProcess(_Processes(), 0.05, lambda: ckpt)
    with pytest.raises(LostProcessError) as caught, lost:
        lost.mark(4)
        time.sleep(0.06)
        raise RuntimeError("[gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting")
    message = str(caught.value)
    assert "\n" not in message and "train.collective_timeout=0.05 s at step 5" in message
    assert f"{ckpt} is intact: restart the job with --resume" in message
    assert message.startswith("process 1: another process did not answer")
    with pytest.raises(RuntimeError, match="a bug"), lost:  # at once: not a wait
        lost.mark(5)
        raise RuntimeError("a bug")
    one = LostProcess(type("One", (), {"num_processes": 1})(), 0.0, lambda: None)
    with pytest.raises(RuntimeError, match="alone"), one:  # one process waits for nobody
        raise RuntimeError("alone")


def test_processes_that_never_join_the_rendezvous_end_it_in_one_line(monkeypatch):
    """torch's store timeouts while the process group is made (the master waiting for the
    others, a process finding no master) become one line naming the address and the fix."""
    from datetime import timedelta

    from t2.errors import LostProcessError
    from t2.train.collective import rendezvous

    env = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "gpu07", "MASTER_PORT": "18456"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    store = torch.distributed.DistNetworkError("The client socket has timed out after 5000ms")
    with pytest.raises(LostProcessError) as caught, rendezvous(timedelta(seconds=5)):
        raise store
    message = str(caught.value)
    assert message.startswith("process 1 of 2: the others did not join at gpu07:18456 within")
    assert "train.collective_timeout=5 s (The client socket has timed out" in message
