"""`python -m benchmarks.bench_decode --kv-heads 0,2,1`: the decoding cache and speed of
t2's search with fewer key/value heads (grouped-query and multi-query attention) against
the same model with one per query head (the first count given), interleaved on the same
sentences and forced lengths (bench_decode's module doc says how).

Per count and beam size: wall time (the best of --repeats, and the spread of the timed
runs), tokens per second, the process's peak memory above its start
(decode_common.PeakMemory) and the cache's: the largest sum of every layer's
self- and cross-attention key/value buffers (KVCache, spare reorder buffers included) after
any decoding step of the search, measured, not computed. Then each one's ratios to the
reference: cache bytes, wall time, CPU time.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import torch

from benchmarks.decode_common import Timing, compare, eos_masked, run_t2, t2_config
from t2.model.transformer import DecoderState, Transformer


def state_bytes(state: DecoderState) -> int:
    """Bytes of every key/value buffer a decoding state holds."""
    buffers = [
        t
        for cache in (*state.self_caches, *state.cross_caches)
        for t in (cache.k, cache.v, *(cache.spare or ()))
        if t is not None
    ]
    return sum(t.numel() * t.element_size() for t in {id(t): t for t in buffers}.values())


@contextmanager
def cache_peak(model: Transformer) -> Iterator[list[int]]:
    """Within the block, the largest state_bytes of a decoding state of `model` after any
    of its decoder steps, in a list of one (model.decode is wrapped, then put back)."""
    peak = [0]
    decode = model.decode

    def measured(tgt_in, memory, src_pad, state=None):  # noqa: ANN001, ANN202
        logits = decode(tgt_in, memory, src_pad, state)
        if state is not None:
            peak[0] = max(peak[0], state_bytes(state))
        return logits

    model.decode = measured
    try:
        yield peak
    finally:
        del model.decode  # the class's method again


def _measured_run(peaks: dict[str, int], name: str) -> Callable:
    """run_t2, recording the cache's peak of this engine's runs under `name`."""

    def run(model: Transformer, src_ids: list, lengths: list, beam: int, args) -> int:  # noqa: ANN001
        with cache_peak(model) as peak:
            tokens = run_t2(model, src_ids, lengths, beam, args)
        peaks[name] = max(peaks.get(name, 0), peak[0])
        return tokens

    return run


def kv_heads(args: argparse.Namespace, vocab: int, work: tuple) -> list[dict]:
    """The comparison of --kv-heads on `work` (source ids, forced lengths), per beam size."""
    counts = [int(n) for n in args.kv_heads.split(",")]
    engines, peaks = {}, {}
    for n in counts:
        torch.manual_seed(0)
        cfg = replace(t2_config(args, vocab), n_kv_heads=n)
        name = f"kv={cfg.kv_heads}"
        model = eos_masked(Transformer(cfg).to(args.device).eval())
        engines[name] = (_measured_run(peaks, name), model)
    print(
        f"{'search':8} {'kv heads':9} {'wall s':>8} {'spread':>7} {'tokens/s':>9} "
        f"{'CPU s':>8} {'peak MiB':>9} {'cache MiB':>10} {'cache':>7} {'wall':>6} {'CPU':>6}"
    )
    records = []
    for beam in [int(b) for b in args.beams.split(",")]:
        peaks.clear()
        timings = compare(engines, work, beam, args)
        records += _report("greedy" if beam == 1 else f"beam {beam}", timings, peaks)
    return records


def _report(label: str, timings: dict[str, Timing], peaks: dict[str, int]) -> list[dict]:
    """One row per count, ratios to the first (the reference); the spread is the slowest
    timed run's wall time over the fastest's, less 1."""
    first = next(iter(timings))
    ref, ref_cache = timings[first], peaks[first]
    rows = []
    for name, t in timings.items():
        row = {
            "search": label,
            "kv_heads": name,
            "wall_s": t.wall,
            "spread": max(t.walls) / min(t.walls) - 1,
            "tokens_per_s": t.tokens / t.wall,
            "cpu_s": t.cpu,
            "peak_mib": t.peak_mib,
            "cache_mib": peaks[name] / 2**20,
            "cache_ratio": peaks[name] / ref_cache,
            "wall_ratio": t.wall / ref.wall,
            "cpu_ratio": t.cpu / ref.cpu,
        }
        print(
            f"{label:8} {name:9} {t.wall:8.2f} {100 * row['spread']:6.1f}% "
            f"{row['tokens_per_s']:9.1f} {t.cpu:8.2f} "
            f"{t.peak_mib:9.1f} {row['cache_mib']:10.2f} {row['cache_ratio']:6.3f}x "
            f"{row['wall_ratio']:5.2f}x {row['cpu_ratio']:5.2f}x",
            flush=True,
        )
        rows.append(row)
    return rows
