"""What t2's compiled path needs of PyTorch, probed by introspection rather than by version
number: t2 is built against torch 2.13, and the CUDA 13 image may carry 2.11 (checked
against 2.11.0's source: every API below is there). Where one is missing, the caller falls
back and `report` records why in one line (printed once to stderr, kept in FALLBACKS),
never a crash:

- torch._dynamo.config.specialize_float: without it every compile traces twice (dynamo
  restarts its analysis to turn the label-smoothing float into a tensor);
- the recompile limits (recompile_limit, accumulated_recompile_limit), duck sizing
  (use_duck_shape) and inductor's CUDA-graph shape warning
  (triton.cudagraph_dynamic_shape_warn_limit): dynamo's defaults are kept;
- sdpa_kernel's `set_priority`: SDPA's backends are tried in torch's order, not t2's;
- FlexAttention's block masks (train.padded_attention: flex): the padded attention stays
  on SDPA; its `enable_gqa`: key/value heads are repeated before the call.

The probes are plain module constants, read inside compiled code as literals (a function
call there would be traced; printing there breaks the graph)."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.attention import sdpa_kernel

FALLBACKS: list[str] = []  # every fallback recorded in this process, in words


def has_parameter(fn: Callable[..., Any], name: str) -> bool:
    """Whether `fn` takes a parameter called `name` (False where it has no signature)."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _flex() -> tuple[bool, bool]:
    """(FlexAttention with block masks exists, its flex_attention takes enable_gqa)."""
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError:
        return False, False
    return callable(create_block_mask), has_parameter(flex_attention, "enable_gqa")


SDPA_SET_PRIORITY = has_parameter(sdpa_kernel, "set_priority")
# sdpa_kernel's keywords: backends tried in the order given, where torch takes the order
SDPA_PRIORITY: dict[str, bool] = {"set_priority": True} if SDPA_SET_PRIORITY else {}
FLEX_BLOCK_MASK, FLEX_GQA = _flex()


def fall_back(line: str) -> None:
    """Record a fallback in one line, once per process."""
    if line not in FALLBACKS:
        FALLBACKS.append(line)
        print(f"note: torch {torch.__version__}: {line}", file=sys.stderr, flush=True)


def set_config(
    module: Any, where: str, name: str, value: Callable[[Any], Any], without: str
) -> None:
    """module.name = value(current value) where torch has that setting (`where`: the
    module's name, for the line); else one line naming it and what goes on `without` it."""
    if not hasattr(module, name):
        fall_back(f"no {where}.{name}; {without}")
        return
    setattr(module, name, value(getattr(module, name)))


def report(padded_attention: str) -> None:
    """Record, once, each API of the path a run takes that this torch lacks (the calls
    themselves fall back by the constants above)."""
    if not SDPA_SET_PRIORITY:
        fall_back("sdpa_kernel has no set_priority; SDPA tries its backends in torch's order")
    if padded_attention == "flex" and not FLEX_BLOCK_MASK:
        fall_back("no FlexAttention block masks; padded attention stays on SDPA")
    elif padded_attention == "flex" and not FLEX_GQA:
        fall_back("flex_attention has no enable_gqa; key/value heads are repeated for it")
