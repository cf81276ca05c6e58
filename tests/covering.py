"""Sweeps that meet every registered residual connection without multiplying the product
(no tests here): a product sweep's rows each get one connection, so that every connection
meets every value of every other axis (`unmet` lists the pairs a sweep misses)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from t2.registry import RESIDUAL


def residuals(placement: str, ct2: bool = False) -> list[str]:
    """The connections defined for `placement` (and, with `ct2`, that CTranslate2 expresses)."""
    facts = {name: RESIDUAL.facts(name) for name in RESIDUAL.names()}
    return [
        name
        for name, f in facts.items()
        if placement in f.placements and not (ct2 and f.ct2.unexpressed)
    ]


def swept(*axes: Sequence[str], ct2: bool = False) -> list[tuple[str, ...]]:
    """The product of `axes` (the last one model.norm_position), each row with the
    connection at the sum of its values' indices modulo those defined for its placement:
    fixing any one value, another axis with at least as many values as there are
    connections runs the sum through every residue."""
    rows = []
    for indices in itertools.product(*(range(len(axis)) for axis in axes)):
        row = tuple(axis[i] for axis, i in zip(axes, indices, strict=True))
        valid = residuals(row[-1], ct2)
        rows.append((*row, valid[sum(indices) % len(valid)]))
    return rows


def unmet(rows: Sequence[tuple[str, ...]], ct2: bool = False) -> list[tuple[int, str, str]]:
    """(axis, value, connection) pairs no row holds, for connections defined with the
    value's rows' placements."""
    missing = []
    for axis in range(len(rows[0]) - 1):
        for value in sorted({row[axis] for row in rows}):
            placements = {row[-2] for row in rows if row[axis] == value}
            wanted = {r for p in placements for r in residuals(p, ct2)}
            held = {row[-1] for row in rows if row[axis] == value}
            missing += [(axis, value, r) for r in sorted(wanted - held)]
    return missing


def with_residuals(rows: Sequence[tuple[str, ...]], ct2: bool = False) -> list[tuple[str, ...]]:
    """`rows` (the last value model.norm_position) each with the connection, among those
    defined for its placement, that meets the most (value, connection) pairs not yet met:
    for a covering of the other axes that is not a product (swept's rule needs one)."""
    met: set[tuple[int, str, str]] = set()
    out = []
    for row in rows:
        gain = {
            r: sum((a, v, r) not in met for a, v in enumerate(row)) for r in residuals(row[-1], ct2)
        }
        best = max(gain, key=gain.get)  # the first of the best: in the registry's order
        met |= {(a, v, best) for a, v in enumerate(row)}
        out.append((*row, best))
    return out
