"""train.compile: every encoder and decoder layer compiled for the training pass with
static shapes, as torchtitan compiles per block. The bucketed batches (data.max_shapes)
bound the shapes, so each compiles once and then runs from the cache; the layers of a stack
share their graphs (dynamo takes a module's parameters as inputs). Decoding and the
teacher-forced validation run the same layers eagerly; the model's state dict is unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

# graphs a layer's code may hold: a forward and a backward per shape, and room for the
# last, partial batch of an epoch and for the validation's shapes
GRAPHS_PER_SHAPE = 2


def compile_layers(model: nn.Module, backend: str, max_shapes: int) -> None:
    """Compile each layer of `model` (t2.model.transformer.Transformer) in place for
    training; `max_shapes` bounds the shapes it will see (0: unbounded, left to dynamo)."""
    import torch._dynamo.config as dynamo

    if max_shapes:
        wanted = GRAPHS_PER_SHAPE * max_shapes + 8
        dynamo.recompile_limit = max(dynamo.recompile_limit, wanted)
        dynamo.accumulated_recompile_limit = max(dynamo.accumulated_recompile_limit, wanted * 4)
    for layer in (*model.encoder, *model.decoder):
        eager = layer.forward
        compiled = torch.compile(eager, dynamic=False if max_shapes else None, backend=backend)

        def forward(*args: Any, _eager=eager, _compiled=compiled, _layer=layer, **kwargs: Any):  # noqa: ANN001, ANN202
            training = _layer.training and torch.is_grad_enabled()
            return (_compiled if training else _eager)(*args, **kwargs)

        layer.forward = forward
    model.compiled_layers = True  # its forward runs unpacked: packing's shapes vary per batch


def compiled_graphs() -> int:
    """Graphs dynamo has compiled in this process: what metrics.jsonl logs as `compiles`."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])
