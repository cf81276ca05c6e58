"""train.compile: the training forward pass, the whole model with its loss, compiled by
torch.compile as one graph (`fullgraph=True`: a graph break is an error, not a silent
split), as nanoGPT compiles its model in train.py.

- `auto` (the default) compiles on CUDA, where the host's Python is the bottleneck of an
  eager step (docs/performance.md), and runs eagerly on a CPU, where two to three minutes
  of compilation per run bought no clear speed (measured there). t2.train.plan resolves it.
- The batch and length dimensions are symbolic (`dynamic=True`): one graph serves every
  bucket shape of the batch plan (data.max_shapes) instead of one compilation per shape.
  `train.compile_mode: graphs` adds CUDA graphs (torch.compile's `reduce-overhead`): one
  graph recorded per bucket shape, all in one shared memory pool, which removes the
  kernel-launch cost that remains. Recompilations are bounded by the plan's shape count
  and logged (`compiles` in metrics.jsonl; a line when the count grows). Every backend
  that records CUDA graphs (`graphs` mode, or `train.compile_backend: cudagraphs`) gets
  the same safeguards: a step mark before each replay, gradients in buffers of their own
  and the loss copied out of the graph's memory.
- The first compilation is kept in the run's compile cache (t2.train.compile_cache) and
  reused by the next run that names the same folder; the log's compile line says how long
  the first micro-batch took and whether its graphs came from the cache.
- Only the training pass is compiled: validation, decoding and the state dict use the
  plain model, and the compiled code reads the same parameters.
- A compiler or graph-capture failure falls back to the eager step with one warning line
  that says why; the micro-batch that failed runs again eagerly, and the run goes on.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from t2.torch_compat import report, set_config
from t2.train.precision import ComputeWeights

if TYPE_CHECKING:
    from t2.train.compile_cache import CompileCache

# torch.compile's modes by train.compile_mode
MODES = {
    "default": "default",
    "graphs": "reduce-overhead",
    "max-autotune": "max-autotune-no-cudagraphs",
}
# compile backends (train.compile_backend) that record CUDA graphs whatever the mode
CUDA_GRAPH_BACKENDS = ("cudagraphs",)


def records_graphs(mode: str, backend: str) -> bool:
    """Whether a compiled pass of `mode` (train.compile_mode) on `backend` replays CUDA
    graphs, whose outputs the next replay overwrites: it then needs graphs mode's
    safeguards."""
    return mode == "graphs" or backend in CUDA_GRAPH_BACKENDS


def wanted(setting: bool | str, device_kind: str) -> bool:
    """Whether train.compile (`true`, `false` or `auto`) compiles on a `device_kind` device."""
    return device_kind == "cuda" if setting == "auto" else bool(setting)


def compile_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean "the compiler failed", not "the step failed" (an
    out-of-memory error or a bad input is the step's and propagates)."""
    from torch._dynamo.exc import TorchDynamoException

    errors: list[type[BaseException]] = [TorchDynamoException]
    try:
        from torch._inductor.exc import InductorError

        errors.append(InductorError)
    except ImportError:  # older PyTorch: inductor errors arrive wrapped by dynamo
        pass
    return tuple(errors)


def limit_recompiles(max_shapes: int) -> None:
    """Room for a recompilation per bucket shape (and the validation's), not dynamo's
    default of 8, before it gives up on compiling; and for as many CUDA graphs. And no
    duck sizing: by default two dimensions of equal size in the first batch (a bucket's
    source and target lengths, often) become one symbol, and the first batch where they
    differ compiles the whole model again. A setting this torch lacks is one recorded line
    (t2.torch_compat)."""
    import torch._dynamo.config as dynamo
    import torch.fx.experimental._config as shapes

    wanted_limit = 2 * max(max_shapes, 1) + 8
    set_config(
        shapes,
        "torch.fx.experimental._config",
        "use_duck_shape",
        lambda _: False,
        "equal dimensions of the first batch share a symbol",
    )
    for name, least in (
        ("recompile_limit", wanted_limit),
        ("accumulated_recompile_limit", 4 * wanted_limit),
    ):
        set_config(
            dynamo,
            "torch._dynamo.config",
            name,
            partial(max, least),
            "dynamo's default limit on recompilations applies",
        )
    try:
        import torch._inductor.config as inductor
    except ImportError:
        return
    set_config(
        inductor.triton,
        "torch._inductor.config.triton",
        "cudagraph_dynamic_shape_warn_limit",
        lambda limit: limit if limit is None else max(limit, wanted_limit),
        "inductor warns from its default count of CUDA graphs",
    )


def trace_once() -> None:
    """Python floats (the label smoothing) as constants in the graph: by default
    (`specialize_float=False`, torch 2.11 and 2.13) dynamo first makes such a float a
    symbol, then restarts its whole analysis to turn it into a tensor ("Restarting analysis
    due to _tensorify_python_scalars"), which traced every compile twice (docs/performance.md
    has the seconds). The smoothing is fixed for a run, so a constant costs no recompilation.
    Dynamo reads its config at every trace (the first call and each recompilation, not at
    torch.compile()), so it is set for the process, as limit_recompiles' settings are."""
    import torch._dynamo.config as dynamo

    set_config(
        dynamo,
        "torch._dynamo.config",
        "specialize_float",
        lambda _: True,
        "each compile traces twice (a float input is made a tensor after a restart)",
    )


def reason(err: BaseException) -> str:
    """The root cause of a compiler error in a line: dynamo wraps a backend's own error
    (BackendCompilerFailed: backend='inductor' raised: ...) around the one that says why."""
    inner = getattr(err, "inner_exception", None) or err.__cause__
    if inner is not None and inner is not err:
        return reason(inner)
    first = next((line for line in str(err).splitlines() if line.strip()), "")
    return f"{type(err).__name__}: {first.strip()}"[:300]


def compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process: what metrics.jsonl logs as `compiles`."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class TrainingForward:
    """The training pass of `model` (forward with the loss, then backward), compiled or
    eager: `run(batch, ...)` returns the micro-batch's summed loss after its backward."""

    def __init__(
        self,
        model: nn.Module,
        compile: bool,
        mode: str = "default",
        backend: str = "inductor",
        max_shapes: int = 0,
        weights: ComputeWeights | None = None,
        padded_attention: str = "sdpa",
        cache: CompileCache | None = None,
    ) -> None:
        self.model, self.graphs = model, compile and records_graphs(mode, backend)
        self.weights = weights  # bf16 compute weights of an fp32 master (t2.train.precision)
        self.padded_attention = padded_attention  # train.padded_attention (t2.model.flex)
        self.cache = cache if compile else None  # the run's compile cache, if any
        self.compiled: Callable[..., Any] | None = None
        self.fallback: str | None = None  # why the compiled pass was given up, if it was
        self.first_s: float | None = None  # the first compiled micro-batch's wall time
        self.graphs_reported: int | None = None  # the graph count last printed (loop.py)
        if compile:
            limit_recompiles(max_shapes)
            trace_once()
            report(padded_attention)
            if self.cache is not None:
                self.cache.load()
            options = {"backend": backend, "fullgraph": True, "dynamic": True}
            if backend == "inductor":
                options["mode"] = MODES[mode]
            self.compiled = torch.compile(model, **options)
        if self.graphs:  # gradients accumulate into buffers of their own, never into a
            for p in model.parameters():  # graph's output memory, which the next replay reuses
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)

    @property
    def keeps_gradients(self) -> bool:
        """Whether the optimizer step zeroes the gradients in place instead of freeing them."""
        return self.graphs

    def after_backward(self) -> None:
        """Once per step, after the last micro-batch: gradients to the master's."""
        if self.weights is not None:
            self.weights.gradients_to_master(keep=self.graphs)

    def after_update(self) -> None:
        """After the optimizer updated (or a checkpoint loaded) the master's weights."""
        if self.weights is not None:
            self.weights.refresh()

    @property
    def is_compiled(self) -> bool:
        return self.compiled is not None and self.fallback is None

    @property
    def compile_note(self) -> str:
        """Where the first compilation came from, in words, for the log's compile line."""
        return self.cache.note if self.cache is not None else "no compile cache"

    def run(
        self,
        batch: dict[str, torch.Tensor],
        smoothing: float,
        scale: torch.Tensor,
        backward: Callable[[torch.Tensor], None],
        autocast: Any,
    ) -> torch.Tensor:
        """The loss of one micro-batch, its gradient (times `scale`) accumulated by
        `backward`; the forward runs under `autocast` (a context manager factory)."""
        if self.is_compiled:
            compiled = partial(
                self._pass, self.compiled, batch, smoothing, scale, backward, autocast
            )
            try:
                if self.first_s is not None:
                    return compiled()
                loss, self.first_s = self._first(compiled)
                return loss
            except compile_errors() as err:
                self._give_up(err)
        return self._pass(self.model, batch, smoothing, scale, backward, autocast)

    def _first(self, compiled: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, float]:
        """The first compiled micro-batch (the compilation) and its seconds, through the
        compile cache if the run has one."""
        if self.cache is not None:
            return self.cache.first_pass(compiled)
        start = time.perf_counter()
        loss = compiled()
        return loss, time.perf_counter() - start

    def _pass(
        self,
        forward: Callable[..., Any],
        batch: dict[str, torch.Tensor],
        smoothing: float,
        scale: torch.Tensor,
        backward: Callable[[torch.Tensor], None],
        autocast: Any,
    ) -> torch.Tensor:
        if self.graphs and forward is self.compiled:  # a new graph replay: earlier outputs go
            torch.compiler.cudagraph_mark_step_begin()
        with autocast():
            loss, _ = forward(
                batch["src"],
                batch["tgt_in"],
                batch["tgt_out"],
                smoothing,
                scale,
                padded_attention=self.padded_attention,
            )
        backward(loss * scale)
        # a CUDA graph's output is overwritten by the next replay: keep a copy of the loss
        return loss.detach().clone() if self.graphs else loss.detach()

    def _give_up(self, err: BaseException) -> None:
        self.fallback = reason(err)
        print(
            f"warning: torch.compile failed ({self.fallback}); training goes on eagerly "
            f"(set train.compile=false to skip compiling)",
            file=sys.stderr,
            flush=True,
        )
