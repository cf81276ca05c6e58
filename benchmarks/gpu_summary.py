"""The summary of a benchmarks/gpu.sh run: OUT/summary.json and OUT/summary.md from the
files the run left in OUT (a missing part is reported as missing, never estimated).

python -m benchmarks.gpu_summary OUT

A compiled row that fell back to eager, skipped its CUDA graphs, timed no replay or
recompiled while timed is flagged as such (row_flags), and its ratio is "n/a, because"
the flags, never a figure; so is a row that a part was to measure and did not (cut at
its limit, skipped, failed, or its mode dropped for time), and a FlexAttention against
SDPA ratio either of whose rows is flagged or missing. Each part's outcome and the modes
it lost come from OUT/parts.tsv (benchmarks/gpu_plan.py writes it). Memory: a row with
CUDA graphs reports the memory torch's allocator has reserved (its graphs' pool
included), not the peak, which replays do not reach.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict
from pathlib import Path

from benchmarks.gpu_plan import CUT, Outcome, parts


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def part_outcome(o: Outcome, found: list[dict] | None = None) -> str:
    """How a part ended, and the modes it was to measure that it did not: dropped for
    time before it started, or lost when it was cut or failed (`found`: its rows)."""
    ran = {r.get("engine", "").removeprefix("t2-") for r in found or []}
    lost = [m for m in o.modes if m not in ran] if o.status != "0" else []
    tail = f"; lost {', '.join(lost)}" if lost else ""
    tail += f"; dropped for time: {', '.join(o.dropped)}" if o.dropped and o.modes else ""
    if o.status == "skipped":
        lost = f"; lost {', '.join(o.dropped)}" if o.dropped else ""
        return f"skipped: {o.left_s} s left, it needed about {o.need_s}{lost}"
    if o.status.isdigit() and int(o.status) in CUT:
        return f"cut short at its {o.limit_s} s limit (what it wrote before is kept){tail}"
    if o.status == "0":
        return f"done in {o.took_s} s{tail}"
    return f"failed (exit {o.status}) after {o.took_s} s: see its .txt{tail}"


def _why_missing(o: Outcome, mode: str) -> str:
    if o.status == "skipped":
        return f"{o.part} was skipped ({o.left_s} s left, it needed about {o.need_s})"
    if mode in o.dropped:
        return f"it was dropped for time before {o.part} started ({o.left_s} s left)"
    if o.status.isdigit() and int(o.status) in CUT:
        return f"{o.part} was cut at its {o.limit_s} s limit before this mode finished"
    if o.status != "0":
        return f"{o.part} failed (exit {o.status}) before this mode finished: see its .txt"
    return f"{o.part} ended without this mode's row: see its .txt"


def missing_rows(outcomes: list[Outcome], out: Path) -> list[str]:
    """A line for each mode a part was to measure and has no row of: n/a, because ..."""
    lines = []
    for o in outcomes:
        found = _json(out / f"{o.part}.json") or []
        ran = {r.get("engine", "").removeprefix("t2-") for r in found}
        for mode in [m for m in [*o.modes, *o.dropped] if m not in ran]:
            why = _why_missing(o, mode)
            lines.append(f"| t2-{mode} / peer tokens/s, {o.part} | n/a, because {why} |")
    return lines


def train_rows(out: Path) -> list[dict]:
    """Every training record: train.json and the per-recipe train-*.json, in name order."""
    rows: list[dict] = []
    for path in sorted(out.glob("train*.json")):
        rows += _json(path) or []
    return rows


def summarize(out: Path) -> dict:
    outcomes = parts(out)
    device = (out / "device.txt").read_text().splitlines() if (out / "device.txt").is_file() else []
    tests = (
        (out / "tests.txt").read_text().strip().splitlines()[-1:]
        if (out / "tests.txt").is_file()
        else []
    )
    return {
        "device": device,
        "parts": [
            {**asdict(o), "outcome": part_outcome(o, _json(out / f"{o.part}.json"))}
            for o in outcomes
        ],
        "missing": missing_rows(outcomes, out),
        "tests": tests[0] if tests else None,
        "memory_model": _json(out / "memory.json"),
        "recipe_base": _json(out / "recipe_base.json"),
        "train": train_rows(out),
        "ops": _json(out / "ops.json"),
        "quickstart": _json(out / "quickstart" / "results.json"),
        "mixed": _json(out / "mixed" / "results.json"),
    }


def row_flags(row: dict) -> list[str]:
    """What keeps a compiled row from counting as compiled, or as CUDA graphs replayed."""
    flags = []
    if row.get("t2_fallback"):
        flags.append(f"FELL BACK TO EAGER: {row['t2_fallback']}")
    if row.get("t2_cudagraph_skips"):
        reasons = "; ".join(row.get("t2_cudagraph_skip_reasons") or []) or "reason not logged"
        flags.append(f"CUDA GRAPHS SKIPPED ({row['t2_cudagraph_skips']}): {reasons}")
    if row.get("t2_cuda_graphs"):
        replays = row.get("t2_graph_replays_timed")
        if replays is None:
            flags.append("CUDA-GRAPH REPLAYS NOT COUNTABLE with this torch")
        elif replays == 0:
            flags.append("NO CUDA-GRAPH REPLAY TIMED")
        if row.get("t2_graph_recordings_timed"):
            flags.append(f"{row['t2_graph_recordings_timed']} CUDA-GRAPH RECORDINGS WHILE TIMED")
    if row.get("t2_recompiles"):
        flags.append(f"{row['t2_recompiles']} RECOMPILES WHILE TIMED")
    if row.get("t2_torch_fallbacks"):
        flags.append(f"TORCH LACKED, T2 FELL BACK: {'; '.join(row['t2_torch_fallbacks'])}")
    if "ratio" in row and not _positive(row["ratio"]):
        flags.append(f"TOKENS/S RATIO NOT A POSITIVE NUMBER ({row['ratio']})")
    return flags


def _positive(x: object) -> bool:
    """A figure a ratio can be stated from: a finite number above 0."""
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def compiled_line(row: dict) -> str:
    """A compiled row in words: compile time and source, replays timed, then its flags."""
    if not row.get("t2_compiled"):
        return "eager (not compiled)"
    compile_s = row.get("t2_compile_s")
    took = "n/a" if compile_s is None else f"{compile_s:.1f} s"
    words = [f"first compiled micro-batch {took} ({row.get('t2_compile_from')})"]
    if row.get("t2_cuda_graphs") and row.get("t2_graph_replays_timed") is not None:
        words.append(
            f"{row['t2_graph_replays_timed']} CUDA-graph replays in {row.get('timed_steps')} "
            f"timed steps ({row.get('shapes')} shapes, each seen "
            f"{row.get('sightings_before_timing')}x before timing)"
        )
    return "; ".join(words + row_flags(row))


def memory(row: dict) -> str:
    """Peak memory against the peer's; with CUDA graphs the allocator's reserved memory
    (replays bypass the allocator and the graphs' pool is in the peak's baseline)."""
    if row.get("t2_cuda_graphs"):
        reserved = row.get("t2_reserved_mib")
        if reserved is None:
            return "reserved memory n/a (CUDA graphs: the peak misses replays)"
        if not _positive(reserved):
            return f"reserved memory n/a (measured {reserved} MiB above the peer's baseline)"
        peer = row.get("marian_reserved_mib")
        than = f", {reserved / peer:.2f}x the peer's" if _positive(peer) else ", the peer's n/a"
        return f"reserved {reserved:,.0f} MiB with the graphs' pool{than} (the peak misses replays)"
    if not _positive(row.get("peak_memory_ratio")):
        return "peak memory n/a"
    return f"peak {row.get('t2_peak_mib', 0):,.0f} MiB, {row['peak_memory_ratio']:.2f}x the peer's"


def _speed(row: dict) -> str:
    """A t2 engine against the peer: ratio, MFU, host and GPU time per step, memory,
    recompiles; a flagged row's figures are n/a, with the flags as the reason."""
    flags = row_flags(row)
    label = f"| {row.get('engine', 't2')} / peer tokens/s, {row['recipe']} {row['precision']} |"
    if flags:
        line = f"{label} n/a, because {'; '.join(flags)} |"
    else:
        mfu = f"{row['mfu']:.1%}" if _positive(row.get("mfu")) else "n/a"
        host = row.get("t2_host_ms_per_step") or []
        host_ms = f"{sorted(host)[len(host) // 2]:.1f}" if host else "n/a"
        gpu = row.get("t2_gpu_ms_per_step")
        gpu_ms = "n/a" if gpu is None else f"{gpu:.1f}"
        line = (
            f"{label} {row['ratio']:.2f}x, MFU {mfu}, host {host_ms} ms / GPU {gpu_ms} ms a "
            f"step, {memory(row)}, {row.get('t2_recompiles', 'n/a')} recompiles |"
        )
    if "t2_compiled" in row:
        line += (
            f"\n| {row.get('engine', 't2')}: compilation, {row['recipe']} | {compiled_line(row)} |"
        )
    return line


def _flex_pair_issues(pair: dict[str, dict | None]) -> list[str]:
    """Why a flex / sdpa ratio cannot be stated: a row missing or flagged."""
    why = []
    for engine, row in pair.items():
        if row is None:
            why.append(f"the {engine} row is missing")
        elif row_flags(row):
            why.append(f"the {engine} row is flagged: {'; '.join(row_flags(row))}")
    return why


# each FlexAttention mode and the SDPA mode it is compared with: the same compile mode
SDPA_PARTNER = {"flex": "compiled", "flex-graphs": "graphs"}


def flex_against_sdpa(rows: list[dict], part_rows: list[dict]) -> list[str]:
    """Each flex row over its SDPA partner (SDPA_PARTNER: compiled alike), each as a ratio
    to its own run's peer on the same seeded batches; n/a, with the reason, when either
    row is flagged or missing. Asked for by a flex row, or by a part that was to measure
    flex (on base, gpu.sh's only flex part)."""
    by = {(r["recipe"], r["precision"], r.get("engine")): r for r in rows if "ratio" in r}
    wanted = sorted(
        {(k[0], k[1], k[2][3:]) for k in by if k[2] in {f"t2-{f}" for f in SDPA_PARTNER}}
    )
    planned = [p for p in part_rows if set(SDPA_PARTNER) & {*p["modes"], *p["dropped"]}]
    if not wanted and planned:
        wanted = [
            ("base", "bf16", m)
            for m in SDPA_PARTNER
            if m in {*planned[0]["modes"], *planned[0]["dropped"]}
        ]
    lines = []
    for recipe, precision, flex in wanted:
        sdpa = SDPA_PARTNER[flex]
        both = f"{flex} / sdpa{'' if flex == 'flex' else ' with CUDA graphs'}"
        label = f"| padded attention, {recipe} {precision}: {both} tokens/s (via the peer) |"
        pair = {e: by.get((recipe, precision, f"t2-{e}")) for e in (flex, sdpa)}
        why = _flex_pair_issues(pair)
        if not why:
            lines.append(f"{label} {pair[flex]['ratio'] / pair[sdpa]['ratio']:.2f}x |")
            continue
        why += [f"{p['part']}: {p['outcome']}" for p in planned]
        lines.append(f"{label} n/a, because {'; '.join(why)} |")
    return lines


def markdown(s: dict) -> str:
    lines = [
        f"# GPU figures: {' | '.join(s['device']) or 'device unknown'}",
        "",
        "| figure | value |",
        "|---|---|",
    ]
    lines += [f"| part: {p['part']} | {p['outcome']} |" for p in s["parts"]]
    lines.append(f"| CUDA tests | {s['tests'] or 'missing'} |")
    for row in s["memory_model"] or []:
        lines.append(
            f"| memory model / peak: {row['recipe']}, vocabulary {row['vocab']}, "
            f"{row['tokens']} tokens, pairs of "
            f"{row['length']}, {row['precision']} | {row['ratio']:.2f} |"
        )
    for row in s["recipe_base"] or []:
        lines.append(
            f"| `base` {row['arm']}: target tokens/s | {row['tokens_per_s']:,.0f} "
            f"(x{row['ratio']:.2f}) |"
        )
    for row in [*s["train"], *(s.get("ops") or [])]:
        if "ratio" in row:
            lines.append(_speed(row))
        if "ops_per_step" in row:
            t2 = f"{row['ops_per_step']} ({row['kernels_per_step']})"
            peer = f"{row['peer_ops_per_step']} ({row['peer_kernels_per_step']})"
            lines.append(
                f"| ops (kernels) per step, {row['recipe']} {row['precision']}: "
                f"t2 / peer | {t2} / {peer} |"
            )
            if "casts_per_step" in row:
                casts = f"{row['casts_per_step']} / {row['peer_casts_per_step']}"
                lines.append(f"| `_to_copy` per eager step, {row['recipe']}: t2 / peer | {casts} |")
    lines += s["missing"]
    lines += flex_against_sdpa(s["train"], s["parts"])
    ran = {p["part"] for p in s["parts"]}
    for name in ("quickstart", "mixed"):  # parts of the full run (every part, if unknown)
        if ran and name not in ran:
            continue
        r = s[name]
        value = (
            "missing"
            if not r
            else (
                f"BLEU {r.get('bleu', float('nan')):.2f}, {r.get('steps')} steps, "
                f"{r.get('elapsed_s')} s"
            )
        )
        lines.append(f"| {name} | {value} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    out = Path(sys.argv[1])
    s = summarize(out)
    (out / "summary.json").write_text(json.dumps(s, indent=1))
    (out / "summary.md").write_text(markdown(s))
    print(markdown(s))


if __name__ == "__main__":
    main()
