"""Generated translation tasks of report 002: symbol copy/reverse/sort/sum, fake dates, polynomials.

Each generator draws one (source, target) pair of text from a `random.Random`. Splits are
disjoint by construction: a source belongs to train, valid or test by a hash of its text,
so an evaluation input is never a training input, even for tasks with a small space.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from datetime import date, timedelta

from t2.errors import DataError
from t2.registry import Registry

Generator = Callable[[random.Random], tuple[str, str]]
TASKS: Registry[Generator] = Registry("generated task (task:NAME)")

SYMBOLS = range(2, 20)  # report 002: 20 symbols, 0 and 1 being <go> and <stop>
GO = 1  # the left neighbour of the first symbol in `sum` (report 002's example)
MIN_LEN, MAX_LEN = 2, 8
HASH_BUCKETS = 20  # 18 buckets for train, 1 for valid, 1 for test
SPLIT_BUCKETS = {"train": range(0, 18), "valid": range(18, 19), "test": range(19, 20)}


def _symbols(rng: random.Random) -> list[int]:
    return [rng.choice(SYMBOLS) for _ in range(rng.randint(MIN_LEN, MAX_LEN))]


def _text(symbols: list[int]) -> str:
    return " ".join(map(str, symbols))


@TASKS.register("copy")
def copy_task(rng: random.Random) -> tuple[str, str]:
    """Copy the symbols unchanged (report 002, toy task 1)."""
    x = _symbols(rng)
    return _text(x), _text(x)


@TASKS.register("reverse")
def reverse_task(rng: random.Random) -> tuple[str, str]:
    """Reverse the symbols (report 002, toy task 2)."""
    x = _symbols(rng)
    return _text(x), _text(x[::-1])


@TASKS.register("sort")
def sort_task(rng: random.Random) -> tuple[str, str]:
    """Order the symbols ascending (report 002, toy task 3: ordering)."""
    x = _symbols(rng)
    return _text(x), _text(sorted(x))


@TASKS.register("sum")
def sum_task(rng: random.Random) -> tuple[str, str]:
    """Y_k = X_k + X_(k-1), with <go> (1) left of the first symbol (report 002, toy task 4)."""
    x = _symbols(rng)
    return _text(x), _text([a + b for a, b in zip(x, [GO, *x[:-1]], strict=True)])


# English names written out: calendar.month_name follows the locale, these must not.
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
FIRST_DAY, N_DAYS = date(1900, 1, 1), (date(2099, 12, 31) - date(1900, 1, 1)).days + 1


def _date_formats(d: date) -> list[str]:
    """Human renderings of a date; the separator tells day-first from month-first apart."""
    month, day = MONTHS[d.month - 1], DAYS[d.weekday()]
    return [
        f"{month.lower()} {d.day} {d.year} {day.lower()}",  # april 11 1981 saturday
        f"{d.day} {month[:3].lower()} {d.year}",  # 11 apr 1981
        f"{d.day:02d}.{d.month:02d}.{d.year}",  # 11.04.1981
        f"{day}, {month} {d.day}, {d.year}",  # Saturday, April 11, 1981
        f"{month} {d.day}, {d.year}",  # April 11, 1981
        f"{d.day} {month} {d.year}",  # 11 April 1981
        f"{d.month:02d}/{d.day:02d}/{d.year}",  # 04/11/1981
        f"{day.lower()} {d.day} {month.lower()} {d.year}",  # saturday 11 april 1981
        f"{month[:3]} {d.day}, {d.year}",  # Apr 11, 1981
        f"{d.day} {month[:3].upper()} {d.year}",  # 11 APR 1981
    ]


@TASKS.register("fake_dates")
def fake_dates_task(rng: random.Random) -> tuple[str, str]:
    """A human-written date to ISO 8601 YYYY-MM-DD (report 002's FakeDates)."""
    d = FIRST_DAY + timedelta(days=rng.randrange(N_DAYS))
    return rng.choice(_date_formats(d)), d.isoformat()


def _linear(a: int, b: int, var: str, rng: random.Random) -> str:
    """a*var + b as text, terms in random order: "3*z-7", "-7+3*z", "z+2"."""
    term = f"{'' if a == 1 else '-' if a == -1 else a}{'*' if abs(a) != 1 else ''}{var}"
    return f"{term}{b:+d}" if rng.random() < 0.5 else f"{b}{'+' if a > 0 else ''}{term}"


def expand(coefficients: list[int], var: str) -> str:
    """c2*x**2 + c1*x + c0 in the report's format: "15*z**2-8*z-63", zero terms left out."""
    out = ""
    for power, c in zip((2, 1, 0), coefficients, strict=True):
        if c == 0:
            continue
        sign = "-" if c < 0 else "+" if out else ""
        mono = {2: f"{var}**2", 1: var, 0: ""}[power]
        if power and abs(c) == 1:
            out += f"{sign}{mono}"
        else:
            out += f"{sign}{abs(c)}{'*' if power else ''}{mono}"
    return out or "0"


@TASKS.register("polynomial")
def polynomial_task(rng: random.Random) -> tuple[str, str]:
    """Expand a product like "(7-3*z)*(-5*z-9)" to "15*z**2-8*z-63" (report 002), exactly."""
    var = rng.choice("abcdefghjkmnpqrstuvwxyz")
    nonzero = [c for c in range(-9, 10) if c]
    p1, p0, q1, q0 = (rng.choice(nonzero) for _ in range(4))
    form = rng.randrange(3)
    if form == 0:  # (p1*x+p0)*(q1*x+q0)
        src = f"({_linear(p1, p0, var, rng)})*({_linear(q1, q0, var, rng)})"
    elif form == 1:  # (p1*x+p0)**2
        q1, q0 = p1, p0
        src = f"({_linear(p1, p0, var, rng)})**2"
    else:  # p1*x*(q1*x+q0)
        p0 = 0
        src = (
            f"{'-' if p1 == -1 else '' if p1 == 1 else f'{p1}*'}{var}*({_linear(q1, q0, var, rng)})"
        )
    return src, expand([p1 * q1, p1 * q0 + p0 * q1, p0 * q0], var)


def split_of(source: str) -> str:
    """The split a generated source belongs to, from a stable hash of its text."""
    bucket = zlib.crc32(source.encode("utf-8")) % HASH_BUCKETS
    return next(name for name, buckets in SPLIT_BUCKETS.items() if bucket in buckets)


def generate(name: str, split: str, size: int, seed: int) -> tuple[list[str], list[str]]:
    """`size` pairs of task `name` for `split`, deterministic given the seed."""
    make = TASKS.get(name)
    rng = random.Random(f"{seed}:{name}:{split}")
    unique = split != "train"  # evaluation sets hold distinct inputs
    src: list[str] = []
    tgt: list[str] = []
    seen: set[str] = set()
    for _ in range(200 * size + 1000):
        if len(src) == size:
            return src, tgt
        x, y = make(rng)
        if split_of(x) != split or (unique and x in seen):
            continue
        seen.add(x)
        src.append(x)
        tgt.append(y)
    raise DataError(
        f"task:{name} has fewer than {size} distinct {split} inputs; "
        f"lower data.task_eval_size or data.task_train_size"
    )
