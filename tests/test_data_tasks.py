"""Generated tasks of report 002: deterministic, correct, and disjoint across splits."""

from __future__ import annotations

import re
from datetime import date, datetime

import pytest

from t2.data.tasks import DAYS, MONTHS, TASKS, expand, generate, split_of
from t2.errors import ConfigError, DataError


@pytest.mark.parametrize("name", TASKS.names())
def test_every_task_is_deterministic_aligned_and_split_disjoint(name: str) -> None:
    train = generate(name, "train", 2000, seed=3)
    assert train == generate(name, "train", 2000, seed=3)
    assert train != generate(name, "train", 2000, seed=4)
    assert len(train[0]) == len(train[1]) == 2000 and all(train[0]) and all(train[1])
    valid, test = generate(name, "valid", 100, seed=3), generate(name, "test", 100, seed=3)
    assert len(set(valid[0])) == 100  # evaluation inputs are distinct
    assert not set(train[0]) & set(valid[0]) and not set(train[0]) & set(test[0])
    assert not set(valid[0]) & set(test[0])
    assert all(split_of(x) == "valid" for x in valid[0])


def _symbols(text: str) -> list[int]:
    return [int(s) for s in text.split()]


def test_symbol_tasks_follow_their_rules() -> None:
    for x, y in zip(*generate("copy", "train", 200, 1), strict=True):
        assert x == y
    for x, y in zip(*generate("reverse", "train", 200, 1), strict=True):
        assert _symbols(y) == _symbols(x)[::-1]
    for x, y in zip(*generate("sort", "train", 200, 1), strict=True):
        assert _symbols(y) == sorted(_symbols(x))
    for x, y in zip(*generate("sum", "train", 200, 1), strict=True):
        xs, ys = _symbols(x), _symbols(y)
        assert ys[0] == xs[0] + 1 and all(ys[k] == xs[k] + xs[k - 1] for k in range(1, len(xs)))


def test_sum_matches_report_002_example() -> None:
    # Report 002: X [7, 10, 8, 3] -> Y [8, 17, 18, 11] (the <go> symbol 1 is left of the first).
    xs = [7, 10, 8, 3]
    assert [a + b for a, b in zip(xs, [1, *xs[:-1]], strict=True)] == [8, 17, 18, 11]


FORMATS = [  # strptime patterns of each rendering, English names matched case-insensitively
    "%B %d %Y %A",
    "%d %b %Y",
    "%d.%m.%Y",
    "%A, %B %d, %Y",
    "%B %d, %Y",
    "%d %B %Y",
    "%m/%d/%Y",
    "%A %d %B %Y",
    "%b %d, %Y",
]


def _parse(text: str) -> tuple[date, str | None]:
    for fmt in FORMATS:
        try:
            parsed = datetime.strptime(text.title(), fmt)
        except ValueError:
            continue
        weekday = next((d for d in DAYS if d.lower() in text.lower()), None)
        return parsed.date(), weekday
    raise AssertionError(f"no format parses {text!r}")


def test_fake_dates_are_correct_iso_dates_with_true_weekdays() -> None:
    seen_formats, weekdays = set(), 0
    for x, y in zip(*generate("fake_dates", "train", 500, 7), strict=True):
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", y)
        parsed, weekday = _parse(x)
        assert parsed.isoformat() == y
        if weekday:
            assert DAYS[parsed.weekday()] == weekday
            weekdays += 1
        seen_formats.add(re.sub(r"\d", "9", re.sub(r"[A-Za-z]+", "w", x)))
    assert len(seen_formats) >= 6  # several human formats
    assert weekdays >= 50  # formats with a weekday were checked, not skipped


def test_fake_dates_month_names_match_report_example() -> None:
    assert MONTHS[3] == "April" and DAYS[date(1981, 4, 11).weekday()] == "Saturday"


def test_polynomial_expansion_is_exact_at_many_points() -> None:
    for x, y in zip(*generate("polynomial", "train", 500, 5), strict=True):
        var = re.findall(r"[a-z]", x)[0]
        assert re.fullmatch(rf"[-+*0-9{var}]+", y), y
        for value in (-7, -2, -1, 0, 1, 3, 11):
            assert eval(x, {}, {var: value}) == eval(y, {}, {var: value}), (x, y)  # noqa: S307


def test_expand_formats_like_the_report() -> None:
    # Report 002: (7-3*z)*(-5*z-9) -> 15*z**2-8*z-63 and (2-2*n)*(n-1) -> -2*n**2+4*n-2
    assert expand([15, -8, -63], "z") == "15*z**2-8*z-63"
    assert expand([-2, 4, -2], "n") == "-2*n**2+4*n-2"
    assert expand([1, 0, -9], "x") == "x**2-9"
    assert expand([-1, -1, 0], "s") == "-s**2-s"


def test_unknown_task_fails_with_the_valid_names() -> None:
    with pytest.raises(ConfigError, match="valid choices: copy, fake_dates"):
        generate("dates", "train", 10, 1)


def test_a_task_space_too_small_for_the_eval_size_fails_clearly(monkeypatch) -> None:
    tiny = lambda rng: (str(rng.randrange(40)), "x")  # noqa: E731  (40 inputs, ~2 in valid)
    monkeypatch.setattr(TASKS, "_entries", dict(TASKS._entries))
    TASKS.register("tiny")(tiny)
    with pytest.raises(DataError, match="fewer than 10 distinct valid inputs; lower data"):
        generate("tiny", "valid", 10, 1)
