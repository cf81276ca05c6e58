"""t2.torch_compat: an API of the compiled path that this torch lacks is one recorded line
and a fallback, never a crash (probed by introspection; torch 2.11 and 2.13 have them all)."""

from __future__ import annotations

import types

import pytest
import torch

import t2.torch_compat as compat
from t2.model import flex, kernels
from t2.model.codepath import simulated


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(compat, "FALLBACKS", [])


def test_this_torch_has_every_api_the_compiled_path_uses():
    assert compat.SDPA_SET_PRIORITY and compat.FLEX_BLOCK_MASK and compat.FLEX_GQA
    import torch._dynamo.config as dynamo

    for name in ("specialize_float", "recompile_limit", "accumulated_recompile_limit"):
        assert hasattr(dynamo, name), name


def test_a_missing_setting_is_one_line_once_and_a_present_one_is_set(fresh, capsys):
    old = types.SimpleNamespace(recompile_limit=8)
    for _ in range(2):
        compat.set_config(old, "torch._dynamo.config", "specialize_float", bool, "traces twice")
    compat.set_config(old, "torch._dynamo.config", "recompile_limit", lambda n: n + 4, "")
    err = capsys.readouterr().err
    assert err == (
        f"note: torch {torch.__version__}: no torch._dynamo.config.specialize_float; traces twice\n"
    )
    assert compat.FALLBACKS == ["no torch._dynamo.config.specialize_float; traces twice"]
    assert old.recompile_limit == 12 and not hasattr(old, "specialize_float")


def test_without_flex_block_masks_padded_attention_stays_on_sdpa(fresh, monkeypatch, capsys):
    monkeypatch.setattr(flex, "FLEX_BLOCK_MASK", False)
    monkeypatch.setattr(compat, "FLEX_BLOCK_MASK", False)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    with simulated("cuda"):
        assert not flex.flex_wanted("flex", torch.zeros(1))
    compat.report("flex")
    assert "padded attention stays on SDPA" in capsys.readouterr().err


def test_without_enable_gqa_or_set_priority_the_kernels_give_the_same_values(
    fresh, monkeypatch, capsys
):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, h, 5, 8, generator=g) for h in (4, 2, 2))
    want = flex.flex_attention_masked(q, k, v, None, None)
    monkeypatch.setattr(flex, "FLEX_GQA", False)
    torch.testing.assert_close(flex.flex_attention_masked(q, k, v, None, None), want)
    backends = kernels.CUDA_BACKENDS
    with simulated("cuda"):
        want = kernels.sdpa_on(q, k, v, None, True, 0.0, backends, None)
        monkeypatch.setattr(kernels, "SDPA_PRIORITY", {})
        torch.testing.assert_close(kernels.sdpa_on(q, k, v, None, True, 0.0, backends, None), want)
    monkeypatch.setattr(compat, "SDPA_SET_PRIORITY", False)
    monkeypatch.setattr(compat, "FLEX_GQA", False)
    compat.report("flex")
    assert compat.FALLBACKS == [
        "sdpa_kernel has no set_priority; SDPA tries its backends in torch's order",
        "flex_attention has no enable_gqa; key/value heads are repeated for it",
    ]
