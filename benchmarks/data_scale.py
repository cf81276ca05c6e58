"""What benchmarks/bench_data.py runs in child processes, one measurement each, so that each
has its own peak memory: t2 from raw files (or its cache) to the first training step, and
the raw limits for the same texts on the same cores, `tokenizers`' own encode_batch of
every text and its BPE trainer on the same sample.

python -m benchmarks.data_scale KIND JSON  (prints one JSON line: the figures)
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

RSS_EVERY_S = 0.02  # how often the resident memory is sampled


class Peaks:
    """The resident memory (VmRSS) and CPU time (all threads) of this process sampled in a
    thread, to find each stage's peak and CPU seconds afterwards from its span (ru_maxrss
    would give one peak for the whole run). CPU seconds are what a machine shared with
    other work changes least: a stage that waits for a core counts no CPU time."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, int, float]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @staticmethod
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _run(self) -> None:
        while not self.done.wait(RSS_EVERY_S):
            self.samples.append((time.perf_counter(), self.rss(), time.process_time()))

    def peak_mb(self, start: float = 0.0, end: float = float("inf")) -> float:
        """The highest sample from `start` to `end`; for a span shorter than the sampling,
        the sample nearest to it."""
        inside = [rss for t, rss, _ in self.samples if start <= t <= end]
        if not inside:
            inside = (
                [min(self.samples, key=lambda s: abs(s[0] - start))[1]]
                if self.samples
                else [self.rss()]
            )
        return round(max(inside) / 2**20, 1)

    def cpu_s(self, start: float, end: float) -> float:
        """CPU seconds of every thread from `start` to `end`, interpolated between samples."""
        import numpy as np

        t, cpu = [s[0] for s in self.samples], [s[2] for s in self.samples]
        return round(float(np.interp(end, t, cpu) - np.interp(start, t, cpu)), 2)

    def stop(self) -> None:
        self.done.set()
        self.thread.join()


def t2_run(args: dict[str, Any]) -> dict[str, Any]:
    """build_run of the recipe on the corpus, then one training micro-batch: each data
    stage's seconds and peak memory, and the time to the first step's end."""
    peaks, start = Peaks(), time.perf_counter()
    import torch

    from t2.data import stages
    from t2.data.loader import Batches
    from t2.recipes import load_config
    from t2.train.setup import build_run
    from t2.train.step import StepStats, train_step

    cfg = load_config(args["recipe"], args["sets"])
    imported = time.perf_counter()
    run = build_run(cfg, args["recipe"], Path(args["run"]), False, "disabled")
    built = time.perf_counter()
    batch = next(Batches(run.loader))
    ready = time.perf_counter()
    t = run.cfg.train
    stats = StepStats.zeros(run.accelerator.device)
    pad = run.tokenizer.pad_token_id
    train_step(
        run.accelerator,
        run.forward,
        run.optimizer,
        [batch],
        pad,
        t.label_smoothing,
        t.clip_norm,
        stats,
    )
    torch.cuda.synchronize() if torch.cuda.is_available() else None
    end = time.perf_counter()
    peaks.stop()
    spans = stages.spans()
    figures = {
        name: {"s": round(b - a, 2), "cpu_s": peaks.cpu_s(a, b), "peak_mb": peaks.peak_mb(a, b)}
        for name, a, b in spans
    }
    data_end = max((b for _, _, b in spans), default=built)
    train = run.loader.dataset.ds  # the encoded pairs beside their texts
    files = {Path(f["filename"]).name: f["filename"] for f in train.cache_files}
    return {
        "stages": figures,
        "import_s": round(imported - start, 2),
        "build_run_s": round(built - imported, 2),
        "ready_s": round(ready - start, 2),
        "first_step_s": round(end - ready, 2),
        "total_s": round(end - start, 2),
        "peak_mb_data": peaks.peak_mb(0.0, data_end),
        "peak_mb_ready": peaks.peak_mb(0.0, ready),
        "peak_mb": peaks.peak_mb(),
        "pairs": len(train),
        "pairs_file": files["pairs.arrow"],
        "ids_file": files["ids.arrow"],
        "tokenizer": str(run.run_dir.tokenizer),
        "record": stages.record(),
    }


def raw_encode(args: dict[str, Any]) -> dict[str, Any]:
    """tokenizers' encode_batch of every text of the pairs, in its own threads (all cores):
    the seconds inside encode_batch only (reading the texts is not counted); with "fast",
    encode_batch_fast too (no offsets, as t2 calls it), chunk by chunk after it."""
    from tokenizers import Tokenizer

    from t2.data.cache import read_stream

    peaks = Peaks()
    tok = Tokenizer.from_file(str(Path(args["tokenizer"]) / "tokenizer.json"))
    names = ["encode_batch", *(["encode_batch_fast"] if args["fast"] else [])]
    seconds = {key: 0.0 for name in names for key in (name, f"{name}_cpu")}
    for batch in read_stream(Path(args["pairs"])):
        src, tgt = batch["src"].to_pylist(), batch["tgt"].to_pylist()
        for name in names:
            encode = getattr(tok, name)
            begin, cpu = time.perf_counter(), time.process_time()
            encode(src, add_special_tokens=False)
            encode(tgt, add_special_tokens=False)
            seconds[name] += time.perf_counter() - begin
            seconds[f"{name}_cpu"] += time.process_time() - cpu
    peaks.stop()
    return {**{k: round(v, 2) for k, v in seconds.items()}, "peak_mb": peaks.peak_mb()}


def raw_train(args: dict[str, Any]) -> dict[str, Any]:
    """tokenizers' BPE trainer with t2's settings on the same sample, the texts in memory
    first (in batches, as its documentation advises): the seconds of the training only."""
    from tokenizers import pre_tokenizers, trainers

    from t2.data.cache import open_stream
    from t2.data.tokenizer import FULL_ALPHABET_FROM, build_tokenizer, sample_rows, sample_texts
    from t2.specials import SPECIALS

    peaks = Peaks()
    rows = sample_rows(args["pairs_count"], args["sample"])
    texts = list(sample_texts(open_stream(Path(args["pairs"])), rows))
    batches = [texts[i : i + 10000] for i in range(0, len(texts), 10000)]
    tok = build_tokenizer(args["split_digits"])
    trainer = trainers.BpeTrainer(
        vocab_size=args["vocab_size"],
        min_frequency=args["min_frequency"],
        special_tokens=list(SPECIALS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        if args["vocab_size"] >= FULL_ALPHABET_FROM
        else [],
        show_progress=False,
    )
    begin, cpu = time.perf_counter(), time.process_time()
    tok.train_from_iterator(iter(batches), trainer)
    seconds, cpu = time.perf_counter() - begin, time.process_time() - cpu
    peaks.stop()
    t2s = json.loads((Path(args["tokenizer"]) / "tokenizer.json").read_text())["model"]
    same = json.loads(tok.to_str())["model"] == t2s  # the same vocabulary and merges
    texts = sum(len(b) for b in batches)
    return {
        "train": round(seconds, 2),
        "train_cpu": round(cpu, 2),
        "texts": texts,
        "peak_mb": peaks.peak_mb(),
        "same": same,
    }


KINDS = {"t2": t2_run, "encode": raw_encode, "train": raw_train}

if __name__ == "__main__":
    result = KINDS[sys.argv[1]](json.loads(sys.argv[2]))
    print(json.dumps(result))
