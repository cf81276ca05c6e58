"""Corpus BLEU (Papineni et al. 2002) and chrF (Popovic 2015) through sacreBLEU (Post 2018,
arXiv:1804.08771) with its signatures, and the test sets they score: local files,
sacreBLEU's named sets, or a recipe's own test split."""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from sacrebleu.dataset import DATASETS
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.utils import SACREBLEU_DIR, get_reference_files, get_source_file

from t2.config import Config
from t2.data.pipeline import load_pairs
from t2.errors import DataError


@dataclass(frozen=True)
class Scores:
    """Corpus scores with the signatures that make them reproducible."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    bleu_detail: str  # sacreBLEU's line: n-gram precisions, brevity penalty, lengths

    def to_dict(self) -> dict[str, float | str]:
        return asdict(self)


def score_corpus(hypotheses: list[str], references: list[list[str]]) -> Scores:
    """BLEU and chrF of `hypotheses` against one or more reference streams (default settings:
    13a tokenization, exponential smoothing, chrF with n-char 6 and beta 2)."""
    for i, stream in enumerate(references):
        if len(stream) != len(hypotheses):
            raise DataError(
                f"reference stream {i + 1} has {len(stream)} lines but there are "
                f"{len(hypotheses)} hypotheses; pass aligned files"
            )
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(hypotheses, references)
    c = chrf.corpus_score(hypotheses, references)
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()), str(b))


def load_testset(
    name: str, langpair: str, timeout: float = 20.0
) -> tuple[list[str], list[list[str]]]:
    """Sources and reference streams of a sacreBLEU test set, from its cache or downloaded."""
    if name not in DATASETS:
        raise DataError(f"unknown sacreBLEU test set {name!r}; `sacrebleu --list` names them")
    pairs = DATASETS[name].langpairs
    if langpair not in pairs:
        raise DataError(
            f"sacreBLEU test set {name} has no language pair {langpair!r}; "
            f"valid: {', '.join(sorted(p for p in pairs if '-' in p))}"
        )
    old_timeout = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout)
    try:
        src_file = get_source_file(name, langpair)
        ref_files = get_reference_files(name, langpair)
    except (Exception, SystemExit) as err:  # no network: URLError, timeouts, sys.exit(1)
        raise DataError(
            f"sacreBLEU test set {name} {langpair} is not in sacreBLEU's cache ({SACREBLEU_DIR}, "
            f"set by the SACREBLEU environment variable) and downloading it needs the internet "
            f"({type(err).__name__}); pass local files with --src FILE --ref FILE instead"
        ) from None
    finally:
        socket.setdefaulttimeout(old_timeout)
    sources = _lines(Path(src_file))
    return sources, [_lines(Path(f)) for f in ref_files]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n")


@dataclass(frozen=True)
class TestSet:
    """Sources and one or more reference streams, with a short tag for output folders."""

    __test__ = False  # not a pytest test class despite its name
    tag: str
    sources: list[str]
    references: list[list[str]]
    origin: str


def read_sentences(path: str | Path, what: str) -> list[str]:
    """Lines of a UTF-8 text file (blank lines kept, so that files stay aligned)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{what} file {path} not found; pass an existing text file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{what} file {path} is not UTF-8 ({err.reason}); convert it") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, it does not start a new one
    if not lines:
        raise DataError(f"{what} file {path} is empty; pass a file with one sentence a line")
    return [line.rstrip("\r") for line in lines]


def local_testset(src: str | Path, ref: str | Path) -> TestSet:
    sources, references = read_sentences(src, "source"), read_sentences(ref, "reference")
    if len(sources) != len(references):
        raise DataError(
            f"{src} has {len(sources)} lines but {ref} has {len(references)}; "
            f"pass line-aligned source and reference files"
        )
    return TestSet(Path(src).stem, sources, [references], f"{src} -> {ref}")


def recipe_testset(cfg: Config) -> TestSet:
    """The run's own test split (data.test of its recipe)."""

    pairs = load_pairs(cfg.data, "test", cfg.train.seed)
    return TestSet("test", list(pairs["src"]), [list(pairs["tgt"])], f"data.test={cfg.data.test}")


def choose_testsets(
    cfg: Config, src: str | None, ref: str | None, testsets: tuple[str, ...], langpair: str | None
) -> list[TestSet]:
    """--src/--ref files, sacreBLEU test sets by name, or else the recipe's test split."""
    if (src is None) != (ref is None):
        raise DataError("pass --src FILE and --ref FILE together")
    if src is not None and testsets:
        raise DataError("pass either --src/--ref or --testset, not both")
    if src is not None:
        return [local_testset(src, ref)]
    if testsets and not langpair:
        raise DataError(f"--testset {testsets[0]} needs --langpair, e.g. --langpair de-en")
    out = []
    for name in testsets:
        sources, references = load_testset(name, langpair)
        out.append(TestSet(f"{name}-{langpair}", sources, references, f"sacrebleu {name}"))
    return out or [recipe_testset(cfg)]
