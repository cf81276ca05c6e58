"""benchmarks/kernel_bits.py: one hash per component of base and v2, the same every time
on one machine (so that a difference between two machines is the machines')."""

from __future__ import annotations

from benchmarks.kernel_bits import kernel_bits


def test_each_component_hashes_the_same_twice():
    first = kernel_bits()
    assert len(first) == 8 and "layernorm (base)" in first and "t2 rmsnorm (v2)" in first
    assert kernel_bits() == first
