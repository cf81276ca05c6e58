"""What benchmarks/gpu.sh carries to a GPU machine that reaches no package index, and how
it installs it there (the Python standard library and t2.atomic only: it runs before
anything else is known to import).

    python -m benchmarks.gpu_prepare prepare [--python 3.11 ...]   (gpu.sh --prepare)
    python -m benchmarks.gpu_prepare install                       (gpu.sh, on the GPU)

prepare, where PyPI is reached: the wheels of the packages the GPU image lacks (NEEDED:
datasets and what it needs that the image has not; the image has torch, transformers,
accelerate, numpy, pyarrow, pandas and the rest), at the versions constraints.txt pins,
without their dependencies (`--no-deps`), for each Python version the machine may run
(its version is not known in advance; a wheel is small); the data files gpu.sh reads
(DATA_FILES, not all of ../shared/data); and the project's commit beside them (the copy
on the GPU machine has no .git). Both folders must stay under LIMIT bytes together, so
that they travel with the checkout. install, on the GPU machine: the missing packages from
those wheels into a folder of their own (pip --target, put on PYTHONPATH by gpu.sh), never
over the machine's packages; then they must import, or it says which did not.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from t2.atomic import atomic_folder
from t2.errors import T2Error

ROOT = Path(__file__).resolve().parent.parent
NEEDED = ("datasets", "dill", "multiprocess", "xxhash")  # pip's names = their modules' names
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
DATA_FILES = (  # what gpu.sh's parts read of ../shared/data
    *("mixed/train.de", "mixed/train.en", "mixed/valid.de", "mixed/valid.en"),
    *("newstest/newstest2013.de", "newstest/newstest2013.en"),
    *("multi30k/val.de", "multi30k/val.en"),
)
LIMIT = 40 << 20  # wheels and data together: the checkout carries at most 64 MiB


def pins(constraints: Path = ROOT / "constraints.txt") -> list[str]:
    """NEEDED as constraints.txt pins them (name==version)."""
    pinned = {}
    for line in constraints.read_text(encoding="utf-8").splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and not line.startswith("#"):
            pinned[name.lower().replace("_", "-")] = version
    missing = [n for n in NEEDED if n not in pinned]
    if missing:
        raise T2Error(f"{constraints} pins no {', '.join(missing)}: pin it there first")
    return [f"{n}=={pinned[n]}" for n in NEEDED]


def download_commands(specs: list[str], pythons: list[str], dest: Path) -> list[list[str]]:
    """pip download of exactly `specs` (no dependencies), binary wheels for each Python."""
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    return [
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        + ["--python-version", version, *platforms, "-d", str(dest), *specs]
        for version in pythons
    ]


def copy_data(source: Path, dest: Path) -> None:
    for name in DATA_FILES:
        if not (source / name).is_file():
            raise T2Error(f"{source / name} not found: set T2_SHARED_DATA to the shared data")
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, dest / name)


def size(*folders: Path) -> int:
    return sum(f.stat().st_size for folder in folders for f in folder.rglob("*") if f.is_file())


def check_size(*folders: Path) -> int:
    """Their bytes, or an error when they would not travel with the checkout."""
    total = size(*folders)
    if total > LIMIT:
        names = " and ".join(f"{f.name}/" for f in folders)
        raise T2Error(
            f"{names} hold {total / 2**20:.1f} MiB, over the {LIMIT >> 20} MiB that may travel "
            f"with the checkout: carry fewer Python versions (--python) or less data"
        )
    return total


def commit() -> str:
    """The checkout's commit, marked when the tree has changes that are not committed."""
    git = ["git", "-C", str(ROOT)]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return "unknown (no git checkout)"
    dirty = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True)
    return head.stdout.strip() + (" with uncommitted changes" if dirty.stdout.strip() else "")


def prepare(wheels: Path, data: Path, source: Path, pythons: list[str]) -> int:
    """Both folders, whole (each written under a temporary name, then renamed); their size."""
    with atomic_folder(wheels) as tmp:
        for command in download_commands(pins(), pythons, tmp):
            if subprocess.run(command).returncode != 0:
                raise T2Error(f"pip download failed: {' '.join(command)}")
        (tmp / "COMMIT").write_text(commit() + "\n", encoding="utf-8")
    with atomic_folder(data) as tmp:
        copy_data(source, tmp)
    return check_size(wheels, data)


def missing() -> list[str]:
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


def install_command(wheels: Path, site: Path, names: list[str]) -> list[str]:
    """pip install of `names` from `wheels` only, into `site`, nothing else touched."""
    return [
        *(sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"),
        *("--find-links", str(wheels), "--target", str(site), *names),
    ]


def install(wheels: Path, site: Path) -> list[str]:
    """The NEEDED packages this Python lacks, from `wheels` into `site`; what was installed."""
    names = missing()
    if not names:
        return []
    if not wheels.is_dir():
        raise T2Error(
            f"{' '.join(names)} not installed and no wheel folder {wheels}: run 'bash "
            f"benchmarks/gpu.sh --prepare' where PyPI is reached and carry gpu-wheels/ along"
        )
    done = subprocess.run(install_command(wheels, site, names), capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise T2Error(f"installing {' '.join(names)} from {wheels} failed: {last}")
    check = subprocess.run(
        [sys.executable, "-c", f"import {', '.join(NEEDED)}"], capture_output=True, text=True
    )
    if check.returncode != 0:
        last = (check.stderr.strip().splitlines() or ["no output"])[-1]
        raise T2Error(f"{' '.join(names)} installed into {site} but do not import: {last}")
    return names


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("prepare", "install"))
    p.add_argument("--python", nargs="+", default=list(PYTHONS), help="versions to carry")
    p.add_argument("--wheels", type=Path, default=ROOT / "gpu-wheels")
    p.add_argument("--data", type=Path, default=ROOT / "gpu-data")
    shared = os.environ.get("T2_SHARED_DATA", ROOT.parent / "shared" / "data")
    p.add_argument("--source", type=Path, default=Path(shared), help="the shared data")
    p.add_argument("--site", type=Path, default=ROOT / "gpu-site")
    args = p.parse_args(argv)
    try:
        if args.action == "prepare":
            total = prepare(args.wheels, args.data, args.source, args.python)
            print(
                f"{args.wheels.name}/ and {args.data.name}/ are ready ({total / 2**20:.1f} MiB, "
                f"commit {commit()}): carry them with the checkout"
            )
        else:
            installed = install(args.wheels, args.site)
            if installed:
                print(f"installed into {args.site}: {' '.join(installed)}")
    except T2Error as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
