"""t2.experiments.statistics.bootstrap: its BCa over seeds reproduces the referee's figure for
report
004. (The seeds x sentences bootstrap it made until issue 52 is gone: its coverage is in
benchmarks/interval_coverage.py, the headline's tests in test_experiments_twoway.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from t2.experiments.statistics.bootstrap import over_seeds

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "docs" / "results" / "report004" / "records"


def test_bca_over_seeds_gives_the_referees_interval_for_report_004():
    """Issue 49: "BCa gives [+0.28, +1.29]" over report 004's 15 per-seed differences."""
    bleu = {
        (arm, s): json.loads((RECORDS / arm / f"seed-{s}" / "results.json").read_text())["bleu"]
        for arm in ("base", "v2")
        for s in range(1, 16)
    }
    diffs = [bleu["v2", s] - bleu["base", s] for s in range(1, 16)]
    found = over_seeds(diffs, 0.95)
    assert (round(found.low, 2), round(found.high, 2)) == (0.28, 1.29)
    assert found.method == "bootstrap over 15 seeds, BCa"
    assert over_seeds([1.0], 0.95) is None and over_seeds([0.5, 0.5], 0.95).low == 0.5
