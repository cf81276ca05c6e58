"""A WMT-sized corpus made from real text: each pair is two random pairs of the shared mixed
corpus joined by a space (237k pairs become any number, ~107 bytes a side, as WMT14's 4.5M
pairs are: 512 MB of German, 444 MB of English). Written a chunk at a time, in bounded
memory, and reused when it exists with the same size and seed.

python -m benchmarks.corpus --pairs 4500000 --out /tmp/wmt-sized/train
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from t2.atomic import atomic_text
from t2.errors import DataError

SHARED = Path(
    os.environ.get("T2_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
MIXED = SHARED / "mixed" / "train"
CHUNK = 200_000  # pairs written at a time


def mixed_prefix() -> Path:
    """../shared/data/mixed/train, or a one-line error naming T2_SHARED_DATA."""
    if not Path(f"{MIXED}.de").is_file():
        raise DataError(f"{MIXED}.de not found; set T2_SHARED_DATA to the shared data folder")
    return MIXED


def _lines(path: Path) -> pa.Array:
    return pa.array(path.read_text(encoding="utf-8").split("\n")[:-1], pa.string())


def build(out: Path, pairs: int, seed: int = 46, langs: tuple[str, str] = ("de", "en")) -> Path:
    """OUT.de and OUT.en with `pairs` joined pairs (kept if already built so); returns OUT."""
    stamp = Path(f"{out}.built")
    wanted = f"{pairs} {seed} {MIXED}\n"
    if stamp.is_file() and stamp.read_text() == wanted:
        return out
    source = {lang: _lines(Path(f"{mixed_prefix()}.{lang}")) for lang in langs}
    n = len(source[langs[0]])
    rng = np.random.default_rng(seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    for lang in langs:  # a stamp from another size must not survive a partial rebuild
        Path(f"{out}.{lang}").unlink(missing_ok=True)
    stamp.unlink(missing_ok=True)
    files = {lang: open(f"{out}.{lang}", "w", encoding="utf-8") for lang in langs}  # noqa: SIM115
    try:
        for start in range(0, pairs, CHUNK):
            count = min(CHUNK, pairs - start)
            first, second = rng.integers(0, n, count), rng.integers(0, n, count)
            for lang, f in files.items():
                joined = pc.binary_join_element_wise(
                    source[lang].take(first), source[lang].take(second), " "
                )
                f.write("\n".join(joined.to_pylist()) + "\n")
    finally:
        for f in files.values():
            f.close()
    with atomic_text(stamp) as f:
        f.write(wanted)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="prefix: OUT.de and OUT.en")
    parser.add_argument("--seed", type=int, default=46)
    args = parser.parse_args()
    prefix = build(args.out, args.pairs, args.seed)
    for lang in ("de", "en"):
        size = Path(f"{prefix}.{lang}").stat().st_size
        print(f"{prefix}.{lang}: {args.pairs} lines, {size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
