"""Experiments, in four homes:

- sweeps: a sweep file (sweepfile), running its arms x seeds (sweep, jobs), the records
  kept apart from the weights (records), the run directories read back (runs, metrics),
  report 003's robustness suite on each run (robust);
- statistics: the intervals a verdict reads (evidence; twoway, the headline over seeds and
  sentences; seeds, paired t; welch), sacreBLEU's paired tests (significance), the BCa
  over seeds (bootstrap), group-sequential looks (sequential), spreads for power (spreads);
- decisions: the rule written before the first run (rule), each arm's verdict (verdict,
  readings), the plan and its record (plan, planbook), how many seeds (planning);
- reports: the sweep's report (report) with its tables, verdict section and disclosure
  (tables, paired, disclosure), `t2 compare` (compare) and curves (plots)."""
