"""The summary of a benchmarks/gpu.sh run: OUT/summary.json and OUT/summary.md from the
files the run left in OUT (a missing part is reported as missing, never estimated).

python -m benchmarks.gpu_summary OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def summarize(out: Path) -> dict:
    device = (out / "device.txt").read_text().splitlines() if (out / "device.txt").is_file() else []
    tests = (
        (out / "tests.txt").read_text().strip().splitlines()[-1:]
        if (out / "tests.txt").is_file()
        else []
    )
    return {
        "device": device,
        "tests": tests[0] if tests else None,
        "memory_model": _json(out / "memory.json"),
        "recipe_base": _json(out / "recipe_base.json"),
        "train": _json(out / "train.json"),
        "ops": _json(out / "ops.json"),
        "quickstart": _json(out / "quickstart" / "results.json"),
        "mixed_5min": _json(out / "mixed" / "results.json"),
    }


def _speed(row: dict) -> str:
    """A t2 engine against the peer: ratio, MFU, host and GPU time per step, recompiles."""
    mfu = "n/a" if row.get("mfu") is None else f"{row['mfu']:.1%}"
    host = row.get("t2_host_ms_per_step") or []
    host_ms = f"{sorted(host)[len(host) // 2]:.1f}" if host else "n/a"
    gpu = row.get("t2_gpu_ms_per_step")
    gpu_ms = "n/a" if gpu is None else f"{gpu:.1f}"
    return (
        f"| {row.get('engine', 't2')} / peer tokens/s, {row['recipe']} {row['precision']} "
        f"| {row['ratio']:.2f}x, MFU {mfu}, host {host_ms} ms / GPU {gpu_ms} ms a step, "
        f"{row.get('t2_recompiles', 'n/a')} recompiles |"
    )


def markdown(s: dict) -> str:
    lines = [
        f"# GPU figures: {' | '.join(s['device']) or 'device unknown'}",
        "",
        "| figure | value |",
        "|---|---|",
        f"| CUDA tests | {s['tests'] or 'missing'} |",
    ]
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
    for row in [*(s["train"] or []), *(s.get("ops") or [])]:
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
    for name in ("quickstart", "mixed_5min"):
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
