"""Reports: the sweep's report, its tables and verdict section, `t2 compare`, curves."""
