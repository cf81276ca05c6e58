"""t2.model.codepath: a tensor's device decides its code path, except within `simulated`,
which is scoped to its block and its thread, nests, and is seen (and guarded) by Dynamo."""

from __future__ import annotations

import threading

import pytest
import torch

from t2.model.codepath import code_path, simulated

pytestmark = pytest.mark.usefixtures("single_thread")


def test_outside_simulated_the_path_is_the_tensor_s_device():
    assert code_path(torch.zeros(1)) == "cpu"
    assert code_path(torch.zeros(1, device="meta")) == "meta"


def test_nested_blocks_restore_the_enclosing_kind_even_on_an_error():
    x = torch.zeros(1)
    with simulated("cuda"):
        assert code_path(x) == "cuda"
        with pytest.raises(RuntimeError), simulated("mps"):
            assert code_path(x) == "mps"
            raise RuntimeError
        assert code_path(x) == "cuda"
    assert code_path(x) == "cpu"


def test_a_thread_started_inside_the_block_takes_its_tensors_own_path():
    seen = []
    with simulated("cuda"):
        worker = threading.Thread(target=lambda: seen.append(code_path(torch.zeros(1))))
        worker.start()
        worker.join()
        assert code_path(torch.zeros(1)) == "cuda"
    assert seen == ["cpu"]


def test_compiled_code_follows_the_override_in_one_graph_per_path():
    """fullgraph=True: Dynamo traces code_path without a break, and its guard recompiles
    when the block is entered or left instead of reusing the other path's graph."""
    torch._dynamo.reset()

    def f(x: torch.Tensor) -> torch.Tensor:
        return x + 1 if code_path(x) == "cuda" else x - 1

    compiled = torch.compile(f, fullgraph=True, backend="eager")
    x = torch.zeros(2)
    assert compiled(x).tolist() == [-1.0, -1.0]
    with simulated("cuda"):
        assert compiled(x).tolist() == [1.0, 1.0]
    assert compiled(x).tolist() == [-1.0, -1.0]
