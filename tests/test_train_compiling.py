"""The compiled training pass (t2.train.compiling): one graph with fullgraph=True on CUDA's
code path for every registered component, the eager loss and gradients, no recompilation
across bucket shapes, and a compiler failure that falls back to eager in one line.

Dynamo's own backends keep this on a CPU and within seconds per model: `eager` traces the
whole model as CUDA runs it (a graph break is an error under fullgraph=True), `aot_eager`
also traces the backward pass through AOTAutograd. Inductor's kernels are CUDA's business
and measured by benchmarks/gpu.sh.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from covering import residuals

from t2.config import ModelConfig
from t2.model.codepath import simulated
from t2.model.transformer import Transformer
from t2.registry import ATTENTION, FFN, NORM, POSITIONAL, RESIDUAL
from t2.train.compiling import TrainingForward, compiled_graphs, records_graphs, wanted

pytestmark = pytest.mark.usefixtures("single_thread")

TINY = dict(vocab_size=50, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1)


def covering() -> list[tuple[str, str, str, str, str, str, dict]]:
    """Every registered positional scheme, norm, feed-forward, attention kernel and residual
    connection, and both placements, each compiled at least once (every norm with every
    placement, each connection with a placement it is defined for), with multi-query
    attention and QK-norm each on and off along the rows: the full product (over 2,000
    models) would take hours of tracing on 2 cores."""
    pos, norm, ffn, attn = POSITIONAL.names(), NORM.names(), FFN.names(), ATTENTION.names()
    rows = max(len(pos), len(ffn), len(attn), 2 * len(norm), len(RESIDUAL.names()))
    placement = ("post", "pre")
    out = []
    for i in range(rows):
        place = placement[(i // len(norm)) % 2]
        residual = residuals(place)
        out.append(
            (
                pos[i % len(pos)],
                norm[i % len(norm)],
                ffn[i % len(ffn)],
                place,
                attn[i % len(attn)],
                residual[i % len(residual)],
                {"n_kv_heads": i % 2, "qk_norm": (i // 2) % 2 == 0},
            )
        )
    return out


def test_the_covering_set_compiles_every_residual_connection():
    assert {row[5] for row in covering()} == set(RESIDUAL.names())


def batch(rows: int = 4, src_len: int = 7, tgt_len: int = 6, seed: int = 1) -> dict:
    """A padded batch, as the bucketed sampler makes them (contiguous, padding at the end)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, TINY["vocab_size"], (rows, src_len), generator=g)
    tgt = torch.randint(3, TINY["vocab_size"], (rows, tgt_len + 1), generator=g)
    src[0, src_len - 2 :] = 0
    tgt[1, tgt_len - 1 :] = 0
    return {"src": src, "tgt_in": tgt[:, :-1].contiguous(), "tgt_out": tgt[:, 1:].contiguous()}


def loss_and_grads(forward: TrainingForward, b: dict) -> tuple[torch.Tensor, list]:
    forward.model.zero_grad(set_to_none=True)
    scale = torch.tensor(1.0 / 20)
    loss = forward.run(b, 0.1, scale, lambda x: x.backward(), contextlib.nullcontext)
    return loss, [p.grad.clone() for p in forward.model.parameters()]


def model(**overrides) -> Transformer:
    torch.manual_seed(0)
    return Transformer(ModelConfig(**TINY, dropout=0.0, **overrides)).train()


@pytest.mark.parametrize(
    ("positional", "norm", "ffn", "placement", "attention", "residual", "options"), covering()
)
def test_every_component_compiles_as_one_graph_on_cuda_path(
    positional, norm, ffn, placement, attention, residual, options
):
    torch._dynamo.reset()
    m = model(
        positional=positional,
        norm=norm,
        ffn=ffn,
        norm_position=placement,
        attention=attention,
        residual=residual,
        **options,
    )
    want = loss_and_grads(TrainingForward(m, False), batch())
    before = compiled_graphs()
    with simulated("cuda"):
        forward = TrainingForward(m, True, backend="eager")
        got = loss_and_grads(forward, batch())
    assert forward.is_compiled, forward.fallback  # fullgraph=True: a break falls back
    assert compiled_graphs() - before == 1
    torch.testing.assert_close(got[0], want[0], rtol=1e-4, atol=1e-5)
    for g, w in zip(got[1], want[1], strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)


def test_forward_and_backward_trace_once_for_every_bucket_shape():
    """AOTAutograd traces the backward pass too; the batch and length dimensions are
    symbolic, so other bucket shapes reuse the graph, with the eager figures."""
    torch._dynamo.reset()
    m = model(positional="rope", norm="rmsnorm", ffn="swiglu", norm_position="pre")
    shapes = [batch(), batch(8, 5, 9, seed=2)]
    want = [loss_and_grads(TrainingForward(m, False), b) for b in shapes]
    before = compiled_graphs()
    with simulated("cuda"):
        forward = TrainingForward(m, True, backend="aot_eager", max_shapes=2)
        got = [loss_and_grads(forward, b) for b in shapes]
    assert forward.is_compiled and compiled_graphs() - before == 1
    for (loss, grads), (want_loss, want_grads) in zip(got, want, strict=True):
        torch.testing.assert_close(loss, want_loss, rtol=1e-4, atol=1e-5)
        for g, w in zip(grads, want_grads, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-6)


def test_a_compiler_failure_falls_back_to_eager_in_one_warning_line(capsys):
    def broken(gm, inputs):  # noqa: ANN001, ANN202 - a backend that cannot compile
        raise RuntimeError("no C compiler on this machine")

    torch._dynamo.reset()
    m = model()
    want = loss_and_grads(TrainingForward(m, False), batch())
    forward = TrainingForward(m, True, backend=broken)
    got = loss_and_grads(forward, batch())
    again = loss_and_grads(forward, batch())
    assert not forward.is_compiled and "no C compiler on this machine" in forward.fallback
    err = capsys.readouterr().err
    assert err.count("warning: torch.compile failed") == 1 and err.count("\n") == 1, err
    assert "training goes on eagerly" in err and "train.compile=false" in err
    for result in (got, again):
        torch.testing.assert_close(result[0], want[0])


def test_out_of_memory_in_the_compiled_pass_is_the_steps_error_not_a_compiler_failure():
    """The compiled code runs out of memory as the eager step would: the error propagates
    (t2.train.memory turns it into one line); the run does not silently go eager."""

    def runs_out(gm, inputs):  # noqa: ANN001, ANN202 - compiles, then fails at run time
        def run(*args):  # noqa: ANN002, ANN202
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9 GiB")

        return run

    torch._dynamo.reset()
    forward = TrainingForward(model(), True, backend=runs_out)
    with pytest.raises(torch.OutOfMemoryError):
        loss_and_grads(forward, batch())
    assert forward.fallback is None


def test_cuda_graphs_keep_the_gradients_out_of_the_graphs_memory():
    """With train.compile_mode=graphs, a replay reuses its outputs' memory: gradients live
    in buffers of their own, accumulated in place and zeroed in place by the step."""
    m = model()
    forward = TrainingForward(m, True, mode="graphs", backend="eager")
    assert forward.keeps_gradients
    assert all(p.grad is not None and not p.grad.any() for p in m.parameters())
    plain = TrainingForward(model(), True, backend="eager")
    assert not plain.keeps_gradients and all(p.grad is None for p in plain.model.parameters())


def test_every_backend_that_records_cuda_graphs_gets_graphs_modes_safeguards(monkeypatch):
    """compile_backend=cudagraphs records CUDA graphs whatever train.compile_mode says:
    gradients in buffers of their own, a step mark before each replay, the loss copied
    out of the graph's memory, as with compile_mode=graphs."""
    assert records_graphs("graphs", "inductor") and records_graphs("default", "cudagraphs")
    assert not records_graphs("default", "inductor") and not records_graphs("default", "eager")
    assert not records_graphs("max-autotune", "aot_eager")
    m = model()
    forward = TrainingForward(m, True, backend="cudagraphs")
    assert forward.keeps_gradients
    assert all(p.grad is not None and not p.grad.any() for p in m.parameters())
    marks = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    forward.compiled = m  # the pass as the compiled code runs it, without compiling here
    loss = forward.run(
        batch(), 0.1, torch.tensor(0.05), lambda x: x.backward(), contextlib.nullcontext
    )
    assert marks == [1] and loss._base is None and not loss.requires_grad


def test_compile_auto_means_cuda_and_is_resolved_by_the_plan():
    from t2.recipes import load_config
    from t2.train.plan import Device, planned

    assert wanted("auto", "cuda") and not wanted("auto", "cpu")
    assert wanted(True, "cpu") and not wanted(False, "cuda")
    cfg = load_config("quickstart")
    assert cfg.train.compile == "auto"
    on_gpu, _ = planned(cfg, 1, Device("cuda", 80 * 2**30, "a GPU"))
    on_cpu, _ = planned(cfg, 1, Device("cpu", None, "CPU"))
    assert on_gpu.train.compile is True and on_cpu.train.compile is False
    gpu = Device("cuda", 80 * 2**30, "a GPU")
    off, _ = planned(load_config("quickstart", ["train.compile=false"]), 1, gpu)
    assert off.train.compile is False


def test_a_bad_compile_setting_fails_with_the_choices():
    from t2.errors import ConfigError
    from t2.recipes import load_config

    with pytest.raises(ConfigError, match="train.compile must be true, false or auto"):
        load_config("quickstart", ["train.compile=sometimes"])
    with pytest.raises(ConfigError, match="valid choices: default, graphs, max-autotune"):
        load_config("quickstart", ["train.compile_mode=fast"])
    with pytest.raises(ConfigError, match="valid choices: flex, sdpa"):
        load_config("quickstart", ["train.padded_attention=flash"])


@pytest.mark.slow
def test_a_compile_traces_the_model_once_with_no_restart():
    """Dynamo made the label-smoothing float a symbol, then restarted its whole analysis to
    make it a tensor ("Restarting analysis due to _tensorify_python_scalars", a pass of
    AOTAutograd's, hence aot_eager): every compile traced twice. TrainingForward
    specializes floats, so one trace (~20 s here, twice that before)."""
    import logging

    import torch._dynamo.config as dynamo

    torch._dynamo.reset()
    restarts: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda r: restarts.append(r.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("torch._dynamo.convert_frame")
    level = log.level
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:  # torch's default, whatever ran before; TrainingForward sets its own
        with simulated("cuda"), dynamo.patch(specialize_float=False):
            forward = TrainingForward(model(), True, backend="aot_eager")
            loss_and_grads(forward, batch())
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    assert forward.is_compiled
    assert not [r for r in restarts if "Restarting analysis" in r], restarts
