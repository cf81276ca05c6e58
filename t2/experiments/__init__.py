"""Experiments: read run directories (runs), compare them (compare, plots), run sweeps of
arms x seeds (sweepfile, sweep) and summarise them with intervals that can say "I don't
know" (stats, report, robust)."""
