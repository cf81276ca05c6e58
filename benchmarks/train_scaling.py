"""`python -m benchmarks.bench_train --scaling`: how t2's cost grows with the batch, the
sentence length and the model, one configuration at a time on random ids (no padding).
`synthetic` is also bench_memory's source of batches."""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

import torch

from benchmarks.train_loops import Rounds, T2Engine, run_round
from t2.recipes import load_config

SCALING = (  # (what grows, recipe, data.max_tokens (tokens a side), sentence length)
    *(("batch tokens", "multi30k", n, 32) for n in (1024, 2048, 4096, 8192)),
    *(("sentence length", "multi30k", 4096, n) for n in (16, 32, 64, 128)),
    *(("model", r, 4096, 32) for r in ("quickstart", "multi30k", "base", "big")),
)


def synthetic(tokens: int, length: int, vocab: int):
    """Endless batches of tokens // length pairs, source and target `length` tokens each
    (random ids: speed does not depend on the text; no padding)."""
    g = torch.Generator().manual_seed(0)
    rows = max(tokens // length, 1)
    while True:
        src = torch.randint(3, vocab, (rows, length), generator=g)
        tgt = torch.randint(3, vocab, (rows, length + 1), generator=g)
        yield {"src": src, "tgt_in": tgt[:, :-1], "tgt_out": tgt[:, 1:]}


def scaling(args: argparse.Namespace, vocab: int, precision: str) -> list[dict]:
    """How t2's cost grows: one configuration at a time, 1 warm-up and --rounds steps."""
    print(
        f"\nhow cost grows (t2, {precision}; random ids, no padding; median of "
        f"{args.rounds} steps):"
    )
    print(
        f"{'grows':16} {'recipe':11} {'budget':>6} {'length':>6} {'params':>7} "
        f"{'tokens/s':>9} {'s/step':>7} {'GFLOP/s':>8} {'peak MiB':>9}"
    )
    rows = []
    for what, recipe, tokens, length in SCALING:
        cfg = load_config(recipe, args.set)
        cfg = replace(cfg, model=replace(cfg.model, vocab_size=vocab))
        engine = T2Engine(cfg, None, args, precision, synthetic(tokens, length, vocab))
        n_params = sum(p.numel() for p in engine.model.parameters())
        run_round(engine, 1, cfg, None, False)
        r = Rounds()
        run_round(engine, 1, cfg, r, True)  # peak memory, untimed
        for _ in range(args.rounds):
            run_round(engine, 1, cfg, r, False)
        tok_s, gflops = statistics.median(r.tokens_per_s), statistics.median(r.flops_per_s) / 1e9
        print(
            f"{what:16} {recipe:11} {tokens:6} {length:6} {n_params / 1e6:6.1f}M "
            f"{tok_s:9.0f} {statistics.median(r.s_per_step):7.3f} {gflops:8.1f} "
            f"{r.peak_mib:9.0f}",
            flush=True,
        )
        rows.append(
            {
                "scaling": what,
                "recipe": recipe,
                "precision": precision,
                "max_tokens": tokens,
                "length": length,
                "parameters": n_params,
                "tokens_per_s": tok_s,
                "flops_per_s": gflops * 1e9,
                "peak_mib": r.peak_mib,
            }
        )
        del engine
    return rows
