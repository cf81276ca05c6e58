"""Sweeps: sweep files, running arms x seeds, packing runs, records, the runs' figures."""
