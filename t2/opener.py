"""One opener for whatever a user points at: `open_model(TARGET)` with TARGET a run
directory (its best checkpoint), a checkpoint, a folder of a registered export format (hf,
ct2) or a Hugging Face Hub repo id (owner/name, through the hub's cache; a pushed hf folder
or CTranslate2 export). It returns an `Opened`: an engine that translates, the Bundle (the
run's config and tokenizer, the model where t2 computes with it, the path read; the type
every reader returns) and where it came from. Which format a folder is, the formats say
(t2.formats)."""

from __future__ import annotations

from pathlib import Path

from t2.errors import CheckpointError, ConfigError
from t2.formats.base import ModelFormat, Opened
from t2.formats.choose import format_of, hub_files, import_kept
from t2.formats.options import engine_names
from t2.hub.download import locate
from t2.serve import PRECISIONS


def _local_or_hub(target: str | Path, revision: str | None, cache_dir: str | None) -> Path:
    """A local path as it is; a name that is no local path but a repo id (owner/name, whose
    owner is not a local folder either) through the hub's cache."""
    path = Path(target)
    if path.exists() or path.parent.is_dir() or path.is_absolute():
        return path  # a local path, perhaps missing: reading it names what is wrong
    return locate(str(target), revision, cache_dir, hub_files())


def _check(
    fmt: ModelFormat,
    engine: str | None,
    average_last: int,
    precision: str | None,
    workers: int,
    target: str | Path,
) -> None:
    if precision is not None and precision not in PRECISIONS:
        raise ConfigError(
            f"unknown precision {precision!r}; valid choices: {', '.join(PRECISIONS)}"
        )
    if workers < 1:
        raise ConfigError(f"--workers {workers}: pass a number of workers of at least 1")
    kind, engines = fmt.name, engine_names()
    if engine is not None and engine not in engines:
        raise ConfigError(f"unknown engine {engine!r}; valid choices: {', '.join(engines)}")
    if engine is not None and fmt.engine != engine:
        hint = "leave --engine out: the folder says what it is"
        raise CheckpointError(
            f"{target} is a {kind} folder, not one --engine {engine} reads; {hint}"
        )
    if workers != 1 and not fmt.parallel:
        raise ConfigError(
            f"--workers is for CTranslate2 exports (its parallel batches); {target} is a "
            f"{kind} folder, whose engine decodes one batch at a time with every thread: "
            f"leave --workers out"
        )
    if average_last and not fmt.averages:
        raise ConfigError(
            f"--average-last averages a run's checkpoints, and {target} is a {kind} folder "
            f"(one set of weights); drop --average-last, or export an average: t2 export RUN "
            f"--average-last N --format {kind} --out DIR"
        )


def open_model(
    target: str | Path,
    *,
    average_last: int = 0,
    device: str = "cpu",
    precision: str | None = None,
    workers: int = 1,
    engine: str | None = None,
    revision: str | None = None,
    cache_dir: str | None = None,
    trust_plugins: bool = False,
) -> Opened:
    """Open `target` (see the module doc) for translation on `device`; `precision`
    (PRECISIONS, None: as stored) is the type decoding computes in; `average_last` N
    averages a run's last N checkpoints; `workers` (CTranslate2) batches decode at once;
    `engine` (t2 or ct2, optional) only checks that the folder is one it reads;
    `trust_plugins`: an exported folder's plugin code may run (t2.rundir.plugins)."""
    path = _local_or_hub(target, revision, cache_dir)
    fmt = format_of(path)  # a hub snapshot is never a run folder (t2.formats.choose)
    _check(fmt, engine, average_last, precision, workers, target)
    import_kept(path, fmt, trust_plugins)  # the code its config's names need
    return fmt.load(path, device, precision, workers, average_last)
