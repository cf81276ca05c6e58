"""What the README and docs quote from generated files is quoted, not typed: every line
between `<!-- quoted from PATH -->` and `<!-- end quote -->` is a line of PATH (a report
written by t2 and committed beside the docs)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUOTE = re.compile(r"<!-- quoted from (\S+) -->\n(.*?)<!-- end quote -->", re.S)


def typed_lines(page: str, root: Path) -> tuple[int, list[str]]:
    """(lines quoted, those not found in their source file) of one page's text."""
    quoted, typed = 0, []
    for match in QUOTE.finditer(page):
        have = set((root / match[1]).read_text(encoding="utf-8").splitlines())
        lines = [x for x in match[2].splitlines() if x.strip()]
        quoted += len(lines)
        typed += [f"{match[1]}: {x}" for x in lines if x not in have]
    return quoted, typed


def test_a_line_changed_by_hand_is_caught(tmp_path):
    (tmp_path / "r.md").write_text("# report\n| x | 1.00 |\n| y | 2.00 |\n")
    page = "a\n<!-- quoted from r.md -->\n| x | 1.00 |\n\n| y | {} |\n<!-- end quote -->\nb\n"
    assert typed_lines(page.format("2.00"), tmp_path) == (2, [])
    assert typed_lines(page.format("2.50"), tmp_path) == (2, ["r.md: | y | 2.50 |"])


def test_every_quoted_line_is_in_its_generated_file():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    total = 0
    for page in pages:
        quoted, typed = typed_lines(page.read_text(encoding="utf-8"), ROOT)
        assert not typed, f"{page.name} quotes lines its source does not have: {typed[:3]}"
        total += quoted
    assert total > 0  # docs/results/report004.md quotes the report-004 study


# a figure with decimals (36.52, +0.84, 0.0067), not a version (2.6.0) or part of a name
FIGURE = re.compile(r"(?<![\w.])[+−-]?\d+\.\d+(?![\w.])")
REPORT_004 = ROOT / "docs" / "results" / "report004.md"
REPORT_004_SOURCES = [
    "docs/results/report004/records/report.md",
    "docs/results/report004/history/issue40-report.md",
    "docs/results/report004/report.md",
    "docs/results/report004/sweep.log",
    "sweeps/report004_base_v2.yaml",
]


def untyped_figures(section: str, sources: str) -> list[str]:
    """The figures of a section's prose (its quoted blocks left out) that its sources do not
    have; − and - read alike, and a leading + is optional."""
    prose = QUOTE.sub("", section).replace("−", "-")
    have = sources.replace("−", "-")
    return [f for f in FIGURE.findall(prose) if f not in have and f.lstrip("+") not in have]


def test_a_figure_typed_into_the_prose_is_caught():
    sources = "| v2 | +0.84 [+0.27, +1.41] |\nversion:2.6.0"
    assert untyped_figures("v2 gains +0.84 (0.27 to 1.41); sacreBLEU 2.6.0", sources) == []
    assert untyped_figures("v2 gains 0.85 BLEU", sources) == ["0.85"]


def test_every_figure_in_report_004s_prose_comes_from_its_reports():
    page = REPORT_004.read_text(encoding="utf-8")  # its quotes are checked above
    assert "### The first sweep" in page and "unexplained" in page  # the whole history
    sources = "\n".join((ROOT / p).read_text(encoding="utf-8") for p in REPORT_004_SOURCES)
    assert not untyped_figures(page, sources)


MAIN_JOB = (
    "pip install torch==2.13.0 -c constraints.txt && pip install -e . -c constraints.txt && "
    "python train.py --recipe quickstart --out runs/quickstart"
)


def test_the_readme_is_short_and_runs_what_ci_runs():
    """A newcomer's README: at most 250 lines (results and histories live in docs/results/),
    the main job's command, and the test command exactly as .ci/run runs it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert MAIN_JOB in blocks and ci in blocks
    for link in re.findall(r"\]\(((?:docs/)[^)#]+)", readme):  # every page it links exists
        assert (ROOT / link).exists(), link
