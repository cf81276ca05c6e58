"""Benchmarks: each a module run from the checkout as `python -m benchmarks.NAME`; they
print ratios against the peer measured in the same run, interleaved, with the spread."""
