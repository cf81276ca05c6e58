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
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    total = 0
    for page in pages:
        quoted, typed = typed_lines(page.read_text(encoding="utf-8"), ROOT)
        assert not typed, f"{page.name} quotes lines its source does not have: {typed[:3]}"
        total += quoted
    assert total > 0  # the README quotes the report-004 study
