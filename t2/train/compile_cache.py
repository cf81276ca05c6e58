"""train.compile_cache: a compilation paid once per machine type, not once per run.

torch.compile keeps what inductor compiled under /tmp/torchinductor_$USER, which a
cluster node loses with its /tmp and never shares with another node or job: a sweep of 16
seeds per arm spread over a cluster compiled the same model up to 32 times (1.5-3 minutes
each on a GPU, 2 on this project's CPU). Here the run names a folder that outlives /tmp
and that the runs of a sweep share (default: beside the data cache, `cache_root/compile`):

- `inductor/`: inductor's own cache (TORCHINDUCTOR_CACHE_DIR, Triton's kernels in it), so
  a second run on a machine that sees the folder reuses the compiled kernels whole;
- `<key>.bin`: torch's portable artifacts (`torch.compiler.save_cache_artifacts`, loaded
  by `load_cache_artifacts` before compiling), one file per model, compile settings,
  torch version and device, which carry a compilation to a node with an empty cache (a
  copy of the folder, a cluster without a shared disk).

`CompileCache.first_pass` wraps the first compiled micro-batch: its seconds and whether it
came from the cache (inductor's graphs all hits, no miss) are what the training log's
compile line reports; a run that compiled something new saves the artifacts (written
whole, then renamed: runs of a sweep that finish together leave one complete file).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import torch

from t2.atomic import atomic_file
from t2.config import COMPILE_CACHE_OFF, Config
from t2.data.pipeline import cache_root
from t2.errors import ConfigError, T2Error
from t2.machine import cpu_name

OFF = COMPILE_CACHE_OFF
T = TypeVar("T")


def folder(cfg: Config) -> Path | None:
    """train.compile_cache: a folder, or empty for `cache_root/compile` beside the data
    cache, or `off` (None)."""
    setting = cfg.train.compile_cache
    if setting == OFF:
        return None
    return Path(setting).expanduser() if setting else cache_root(cfg.data) / "compile"


def device_name(kind: str) -> str:
    """The GPU's name on CUDA, else the CPU's model (its instruction set shapes the code)."""
    return torch.cuda.get_device_name() if kind == "cuda" else cpu_name()


def key(cfg: Config, device: str) -> str:
    """What a compilation depends on: the model, the compile settings, precision, torch,
    Python and the `device` (device_name)."""
    t = cfg.train
    parts = {
        "model": cfg.to_dict()["model"],
        "train": [t.compile_mode, t.compile_backend, t.padded_attention, t.mixed_precision],
        "cast_weights": t.cast_weights,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def _inductor_dir() -> str | None:
    """TORCHINDUCTOR_CACHE_DIR as an absolute path, if set."""
    value = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return None if value is None else os.path.abspath(value)


def _default_inductor_dir() -> str | None:
    """torch's default for inductor's cache (/tmp/torchinductor_$USER), if it says."""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:
        return None
    return os.path.abspath(default_cache_dir())


def _cache_counts() -> tuple[int, int]:
    """(hits, misses) of inductor's compiled-graph cache in this process."""
    from torch._dynamo.utils import counters

    return counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]


class CompileCache:
    """The run's compile cache folder and its artifact file for this compilation."""

    def __init__(self, root: Path, name: str) -> None:
        self.root, self.artifacts = root, root / f"{name}.bin"
        self.loaded = False
        self.note = ""  # after the first pass: where the compilation came from, in words

    @classmethod
    def of(cls, cfg: Config, device_kind: str) -> CompileCache | None:
        """The cache of `cfg`'s run on a `device_kind` device, or None (off, or a backend
        other than inductor, which keeps nothing to reuse)."""
        root = folder(cfg)
        if root is None or cfg.train.compile_backend != "inductor":
            return None
        return cls(root, key(cfg, device_name(device_kind)))

    def load(self) -> None:
        """Before compiling: inductor's cache under the folder (unless the environment
        names another than torch's default), and the portable artifacts of an earlier run
        into it."""
        inductor = self.root / "inductor"
        try:
            inductor.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(
                f"train.compile_cache: cannot make {inductor} ({err.strerror}); name a "
                f"writable folder, or set train.compile_cache=off"
            ) from None
        if _inductor_dir() in (None, _default_inductor_dir()):  # importing inductor sets it
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(inductor)
        if self.artifacts.is_file():
            try:
                found = torch.compiler.load_cache_artifacts(self.artifacts.read_bytes())
            except Exception as err:  # noqa: BLE001 - a cache is worth a warning, not a run
                found, why = None, str(err)
            else:
                why = "not torch's cache artifacts"
            self.loaded = found is not None
            if not self.loaded:
                _warn(f"the compile cache file {self.artifacts} did not load ({why}); compiling")

    def first_pass(self, run: Callable[[], T]) -> tuple[T, float]:
        """`run()` (the first compiled micro-batch) and its seconds; sets `note`, and saves
        the artifacts when it compiled anything anew."""
        hits, misses = _cache_counts()
        start = time.perf_counter()
        out = run()
        seconds = time.perf_counter() - start
        hits, misses = _cache_counts()[0] - hits, _cache_counts()[1] - misses
        if misses == 0 and hits > 0:
            self.note = f"from the compile cache {self.root}"
        else:
            self.save()
            self.note = f"compiled, saved to the compile cache {self.root}"
        return out, seconds

    def save(self) -> None:
        """torch's artifacts of this process's compilations, written whole, then renamed;
        a failure (a full disk) is a warning: the run trains on without the file."""
        try:
            saved: Any = torch.compiler.save_cache_artifacts()
            if saved is not None:
                with atomic_file(self.artifacts, binary=True) as f:
                    f.write(saved[0])
        except (OSError, T2Error) as err:
            _warn(
                f"the compile cache file {self.artifacts} was not written ({err}); training goes on"
            )


def _warn(what: str) -> None:
    print(f"warning: {what}", file=sys.stderr, flush=True)
