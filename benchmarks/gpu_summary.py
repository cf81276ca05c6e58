"""The summary of a benchmarks/gpu.sh run: OUT/summary.json and OUT/summary.md from the
files the run left in OUT (a missing part is reported as missing, never estimated).

python -m benchmarks.gpu_summary OUT

A compiled row that fell back to eager, skipped its CUDA graphs, timed no replay or
recompiled while timed is flagged as such (row_flags), not reported as compiled; each
part's outcome (done, cut short at its time limit, failed, or skipped for lack of time)
comes from OUT/parts.tsv, which gpu.sh writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# gpu.sh's exit statuses of a part: timeout(1) gives 124, or 137 when it had to kill
CUT = {124, 137}


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def parts(out: Path) -> list[dict]:
    """OUT/parts.tsv: name, time limit (s), seconds taken, exit status or `skipped`."""
    rows = []
    path = out / "parts.tsv"
    for line in path.read_text().splitlines() if path.is_file() else []:
        name, limit, took, status = line.split("\t")
        rows.append({"part": name, "limit_s": int(limit), "took_s": int(took), "status": status})
    return rows


def part_outcome(row: dict) -> str:
    status = row["status"]
    if status == "skipped":
        return "skipped: no time left in the budget"
    if status.isdigit() and int(status) in CUT:
        return f"cut short at its {row['limit_s']} s limit (what it wrote before is kept)"
    if status == "0":
        return f"done in {row['took_s']} s"
    return f"failed (exit {status}) after {row['took_s']} s: see its .txt"


def train_rows(out: Path) -> list[dict]:
    """Every training record: train.json and the per-recipe train-*.json, in name order."""
    rows: list[dict] = []
    for path in sorted(out.glob("train*.json")):
        rows += _json(path) or []
    return rows


def summarize(out: Path) -> dict:
    device = (out / "device.txt").read_text().splitlines() if (out / "device.txt").is_file() else []
    tests = (
        (out / "tests.txt").read_text().strip().splitlines()[-1:]
        if (out / "tests.txt").is_file()
        else []
    )
    return {
        "device": device,
        "parts": parts(out),
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
    return flags


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


def _speed(row: dict) -> str:
    """A t2 engine against the peer: ratio, MFU, host and GPU time per step, recompiles."""
    mfu = "n/a" if row.get("mfu") is None else f"{row['mfu']:.1%}"
    host = row.get("t2_host_ms_per_step") or []
    host_ms = f"{sorted(host)[len(host) // 2]:.1f}" if host else "n/a"
    gpu = row.get("t2_gpu_ms_per_step")
    gpu_ms = "n/a" if gpu is None else f"{gpu:.1f}"
    flags = row_flags(row)
    engine = row.get("engine", "t2") + (" (flagged)" if flags else "")
    line = (
        f"| {engine} / peer tokens/s, {row['recipe']} {row['precision']} "
        f"| {row['ratio']:.2f}x, MFU {mfu}, host {host_ms} ms / GPU {gpu_ms} ms a step, "
        f"{row.get('t2_recompiles', 'n/a')} recompiles |"
    )
    if "t2_compiled" in row:
        line += f"\n| {engine}: compilation, {row['recipe']} | {compiled_line(row)} |"
    return line


def flex_against_sdpa(rows: list[dict]) -> list[str]:
    """t2-flex over t2-compiled (SDPA), each as a ratio to its own run's peer."""
    by = {(r["recipe"], r["precision"], r.get("engine")): r for r in rows if "ratio" in r}
    lines = []
    for (recipe, precision, engine), flex in by.items():
        sdpa = by.get((recipe, precision, "t2-compiled"))
        if engine == "t2-flex" and sdpa is not None:
            lines.append(
                f"| padded attention, {recipe} {precision}: flex / sdpa tokens/s (via the "
                f"peer) | {flex['ratio'] / sdpa['ratio']:.2f}x |"
            )
    return lines


def markdown(s: dict) -> str:
    lines = [
        f"# GPU figures: {' | '.join(s['device']) or 'device unknown'}",
        "",
        "| figure | value |",
        "|---|---|",
    ]
    lines += [f"| part: {p['part']} | {part_outcome(p)} |" for p in s["parts"]]
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
    lines += flex_against_sdpa(s["train"])
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
