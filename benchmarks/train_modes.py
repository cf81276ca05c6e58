"""t2's training pass in each of bench_train's --modes, timed against the peer one mode
at a time, so that a time limit cuts short one mode and loses nothing else.

Shapes. Every engine cycles the same few pre-drawn batches (--batches) and steps through
each of them --sightings times (2) before its first timed step: torch's CUDA-graph trees
run a new shape eagerly on its first call, record it on its second and replay it from
its third, so every timed step of `graphs` is a replay, and a compiled mode's
recompilations for new shapes all happen in its warm-up. (The sampler draws ~13 batches
an epoch from 20k pairs at 25k tokens, each a shape of its own: drawn afresh, every timed
step was a first sight.) A cycle of a few shapes is what a long run does once it has seen
all of its plan's shapes (data.max_shapes).

Parts. The peer is warmed up first; then for each mode: its engine is built and warmed
up (the compilation: the first compiled micro-batch's seconds are the compile time), a
memory round of each, the timed rounds interleaved with the peer's on the same batches,
a profiled step of each on CUDA; `compare` yields the mode's figures (bench_train writes
its JSON then), and the engine and its compiled code are released before the next mode
compiles. While a mode runs, benchmarks/graph_probe.py counts its CUDA-graph warm-ups,
recordings and replays (in the timed rounds) and its skips with their reasons.

--compile-only (compile_only): the same warm-up of each mode and nothing else, so that
processes started side by side compile every mode's graphs into the shared compile cache
before any timed run (benchmarks/gpu.sh --quick).

Memory: what the CUDA allocator reserves at the end of a mode's rounds above what it
held after the peer's warm-up (t2_reserved_mib; the peer's own: marian_reserved_mib), the
figure a CUDA-graphs row gives instead of a peak that its replays never reach.
"""

from __future__ import annotations

import argparse
import gc
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch

from benchmarks.gpu_summary import compiled_line
from benchmarks.graph_probe import GraphCounts, GraphProbe
from benchmarks.train_loops import MarianEngine, Rounds, T2Engine, gpu_step, loader, run_round
from t2 import torch_compat
from t2.config import Config
from t2.progress import Progress
from t2.recipes import load_config
from t2.train.compiling import compiled_graphs


class Cycle:
    """Pre-drawn batches served in turn without end, from position `start`."""

    def __init__(self, batches: list[dict], start: int = 0) -> None:
        self.batches, self.served = batches, start

    def __iter__(self) -> Cycle:
        return self

    def __next__(self) -> dict:
        batch = self.batches[self.served % len(self.batches)]
        self.served += 1
        return batch

    @property
    def sightings(self) -> int:
        """How many times every batch has been served so far (the fewest)."""
        return self.served // len(self.batches)

    @property
    def shapes(self) -> int:
        """Distinct (source, target) shapes among the batches."""
        return len({(tuple(b["src"].shape), tuple(b["tgt_in"].shape)) for b in self.batches})


def predraw(ds, args: argparse.Namespace) -> list[dict]:  # noqa: ANN001
    """--batches batches of the training sampler, the same for every engine."""
    batches = loader(ds, args)
    return [next(batches) for _ in range(args.batches)]


@dataclass
class ModeRun:
    """One mode's figures: its rounds and the peer's in the same rounds, and the rest
    (the batches' shapes; what a compiled pass did: compiled_figures)."""

    name: str
    t2: Rounds
    peer: Rounds
    figures: dict


def _warm_up(engine, cycle: Cycle, args: argparse.Namespace, cfg: Config) -> float:  # noqa: ANN001
    """Steps until every pre-drawn batch was seen --sightings times; their wall time."""
    steps = args.sightings * len(cycle.batches) - cycle.served
    return run_round(engine, max(steps, 0), cfg, None, False)


def _paired(engine, peer, args: argparse.Namespace, cfg: Config, label: str):  # noqa: ANN001
    """A memory round of each, then --rounds timed rounds of the engine then the peer on
    the same batches (the peer's cycle put at the engine's position); graphs compiled
    while timed are counted as recompiles."""
    ours, theirs = Rounds(), Rounds()
    for e, rounds in ((engine, ours), (peer, theirs)):
        run_round(e, args.steps_per_round, cfg, rounds, True)
    peer.batches = Cycle(peer.batches.batches, engine.batches.served)
    with Progress(args.rounds * 2, f"{label} rounds", "rounds") as progress:
        for _ in range(args.rounds):
            for e, rounds in ((engine, ours), (peer, theirs)):
                graphs = compiled_graphs()
                run_round(e, args.steps_per_round, cfg, rounds, False)
                rounds.recompiles += compiled_graphs() - graphs
                progress.update(1)
    if torch.cuda.is_available():
        for e, rounds in ((engine, ours), (peer, theirs)):
            rounds.kernels_per_step, rounds.gpu_ms_per_step = gpu_step(e)
    return ours, theirs


def compiled_figures(engine: T2Engine, timed: GraphCounts, whole: GraphCounts) -> dict:
    """What the engine's compiled pass did: compile seconds and where it came from, a
    fallback to eager, CUDA graphs recorded or replayed while timed, skips and reasons."""
    forward = engine.forward
    if forward.compiled is None:
        return {"t2_compiled": False}
    return {
        "t2_compiled": True,
        "t2_compile_s": forward.first_s,
        "t2_compile_from": forward.compile_note,
        "t2_fallback": forward.fallback,
        "t2_cuda_graphs": forward.graphs,
        "t2_graph_replays_timed": timed.replays,
        "t2_graph_recordings_timed": timed.recordings,
        "t2_graph_warmups_timed": timed.warmups,
        "t2_cudagraph_skips": whole.skips,
        "t2_cudagraph_skip_reasons": sorted(set(whole.reasons)),
        # what this torch lacked and t2 ran instead (a flex row on SDPA would look like flex)
        "t2_torch_fallbacks": list(torch_compat.FALLBACKS),
    }


def reserved_mib() -> float | None:
    """What torch's CUDA allocator holds (CUDA graphs' pools included), or None on a CPU."""
    return torch.cuda.memory_reserved() / 2**20 if torch.cuda.is_available() else None


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _release() -> None:
    """A released engine's memory and compiled code (its CUDA graphs' pool)."""
    gc.collect()
    torch._dynamo.reset()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def compile_only(
    cfg: Config, ds, args: argparse.Namespace, precision: str, modes: list[str | None]
) -> Iterator[dict]:  # noqa: ANN001
    """Each of `modes` built and warmed up on the pre-drawn batches exactly as `compare`
    warms it up (the same batches, shapes and compilations), untimed and with no peer:
    gpu.sh's parallel warm-up, which fills the compile cache that the timed run loads."""
    batches = predraw(ds, args)
    for mode in modes:
        with GraphProbe() as probe:
            engine = T2Engine(cfg, ds, args, precision, batches=Cycle(batches), mode=mode)
            warmup = _warm_up(engine, engine.batches, args, cfg)
            figures = compiled_figures(engine, probe.counts(), probe.counts())
        yield {"engine": engine.name, "warmup_s": warmup, "batches": len(batches), **figures}
        del engine
        _release()


def compare(
    cfg: Config, ds, args: argparse.Namespace, precision: str, modes: list[str | None]
) -> Iterator[ModeRun]:  # noqa: ANN001
    """Each of `modes` (None: the recipe's own train.compile) against the peer, in turn."""
    batches = predraw(ds, args)
    before_peer = reserved_mib()
    peer = MarianEngine(cfg, ds, args, precision, batches=Cycle(batches))
    peer_warmup = _warm_up(peer, peer.batches, args, cfg)
    with_peer = reserved_mib()  # its cache refills to about this in each mode's rounds
    for mode in modes:
        with GraphProbe() as probe:
            engine = T2Engine(cfg, ds, args, precision, batches=Cycle(batches), mode=mode)
            warmup = _warm_up(engine, engine.batches, args, cfg)
            sightings, before = engine.batches.sightings, probe.counts()
            ours, theirs = _paired(engine, peer, args, cfg, f"{precision} {engine.name}")
            timed = probe.counts() - before
            ours.warmup_s, theirs.warmup_s = warmup, peer_warmup
            figures = compiled_figures(engine, timed, probe.counts())
        figures.update(
            batches=len(batches),
            shapes=engine.batches.shapes,
            sightings_before_timing=sightings,
            timed_steps=args.rounds * args.steps_per_round,
            t2_reserved_mib=_minus(reserved_mib(), with_peer),
            marian_reserved_mib=_minus(with_peer, before_peer),
        )
        yield ModeRun(engine.name, ours, theirs, figures)
        del engine
        _release()


def warm_only(args: argparse.Namespace, ds, vocab: int, save) -> list[dict]:  # noqa: ANN001
    """bench_train --compile-only: each recipe, precision and mode warmed up (compile_only);
    a record of each, every record so far given to `save` after each."""
    records = []
    modes = [None] if args.modes == "auto" else args.modes.split(",")
    for recipe in args.recipes.split(","):
        cfg = load_config(recipe, args.set)
        cfg = replace(cfg, model=replace(cfg.model, vocab_size=vocab))
        for precision in args.precisions.split(","):
            for record in compile_only(cfg, ds, args, precision, modes):
                records.append({"recipe": recipe, "precision": precision, **record})
                said = compiled_line({**record, "t2_cuda_graphs": False})  # nothing timed
                print(f"{recipe} {precision} {record['engine']}: {said}", flush=True)
                save(records)
    return records
