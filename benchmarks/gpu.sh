#!/usr/bin/env bash
# Every GPU figure of docs/performance.md, on a machine with a CUDA GPU and a Python that
# already has PyTorch for CUDA, in one call that never touches the network:
#
#   bash benchmarks/gpu.sh [OUT_DIR] [--quick] [--budget SECONDS] [--wheels DIR] [--data DIR]
#                          [--compile-cache DIR] [--dry-run]
#
# A relative OUT_DIR, --wheels, --data or --compile-cache is relative to the folder gpu.sh
# was run from; the defaults are in the checkout. --dry-run prints the interpreter, the
# install and the parts' command lines (benchmarks/gpu_run.py --dry-run), and runs none.
#
# --quick (6 minutes of wall time, set-up and compilation included: --budget 355 seconds
# from the script's start, the summary after; benchmarks/gpu_plan.py's QUICK, run by
# benchmarks/gpu_run.py, whose --dry-run prints the command lines): first a warm-up, side
# by side on the CPU cores while nothing is timed, one process per compiled mode of the
# timed parts (bench_train.py --compile-only, the part's own options and batches) filling
# the one compile cache, with tests/test_cuda.py beside them; then, each a process of its
# own loading from that cache, in order of value: the training step of base, then of
# v2_rope_rmsnorm, eager and with CUDA graphs against the transformers peer (25k-token
# batches, pre-drawn and each seen twice before timing, so CUDA graphs replay every timed
# step; tokens/s, MFU, host and GPU ms per step, compile seconds, replays, skips,
# fallbacks), operators and casts per eager step, FlexAttention with CUDA graphs on
# base (its SDPA partner: train-base's graphs row, the same seeded padded batches), then
# v2 compiled without CUDA graphs and big, not warmed up. The warm-up's need is its
# largest part's, a timed part's from the compile seconds measured (cold for a part not
# warmed up); until a run has measured them (it keeps them in the compile cache's folder,
# gpu-durations.json, for the next run) the priors of benchmarks/gpu_durations.py: the
# review's estimates with a 20% margin (a cold compilation 108 s, 1.3x beside the others;
# 25 s from the cache); a part that does not fit in the time left is skipped and
# the next tried, modes that do not fit are dropped, and the summary names every mode
# lost; a part cut at its limit keeps the modes it finished (bench_train writes its JSON
# after each).
#
# The full run (--budget 570): the CUDA tests, the README quickstart, the memory model
# against torch.cuda's peaks (bench_memory.py), `base` as shipped against the recipe
# before the batch plan (bench_recipe.py), t2 against the peer with operator counts
# (bench_train.py --count-ops, the recipe's own train.compile), decoding against
# generate() (bench_decode.py), and 2 minutes of `base` on mixed, validated on newstest2013.
#
# OUT_DIR (default runs/gpu-DATE, also when it is given empty; one at most) gets each part's output (NAME.txt), JSON, parts.tsv (each
# part's time left, need, limit, seconds, exit status, modes run and dropped), device.txt
# (the interpreter chosen, GPU, driver, torch, the commit) and the summary (summary.md,
# summary.json: benchmarks/gpu_summary.py). The compile cache is one folder outside OUT,
# gpu-compile-cache/ in the checkout (or --compile-cache DIR), shared by every part
# (train.compile_cache), by the CUDA tests (TORCHINDUCTOR_CACHE_DIR=DIR/inductor) and by a
# second run: a before/after pair compiles once. Its *.bin files (torch's portable
# artifacts), carried to the next session's checkout, save the compilations there on the
# same GPU model and torch.
#
# The interpreter: PYTHON if set, else the first of python3 and python that imports a
# torch that sees a CUDA device (a python without torch does not hide a python3 with
# it); device.txt and the first line of output name it with its torch and CUDA.
# t2 runs from this checkout with PYTHONPATH; nothing is installed over the machine's
# packages: what it lacks (datasets, dill, multiprocess, xxhash) is installed from --wheels
# DIR (default gpu-wheels) into gpu-site/, a folder of its own. The data are ../shared/data,
# else --data DIR, else gpu-data. Make gpu-wheels/ and gpu-data/ where PyPI is reached
# (pinned by constraints.txt, --no-deps; under 40 MiB together; the commit written beside):
#
#   bash benchmarks/gpu.sh --prepare [--python 3.11 3.12]   (default: Python 3.10 to 3.13)
#
# Exit status: 0 when every part ran or was skipped (the summary says how each ended), 2
# for a bad option or no Python, 3 when torch imports with no interpreter, 4 without a
# CUDA device, 5 when the packages the machine lacks cannot be installed. Each error is
# one line on stderr.
set -euo pipefail
since=$(date +%s.%N)  # the budget's clock: set-up counts
caller=$PWD  # the user's relative paths are relative to it, not to the checkout
cd "$(dirname "$0")/.."

if [[ -n "${PYTHON:-}" ]]; then candidates=("$PYTHON"); else candidates=(python3 python); fi
found=() failed=()
for candidate in "${candidates[@]}"; do
  path=$(command -v "$candidate" || true)
  [[ -n "$path" ]] && found+=("$path")
done
if [[ ${#found[@]} == 0 ]]; then
  echo "error: no Python found${PYTHON:+ at $PYTHON}; set PYTHON to an interpreter with torch" >&2
  exit 2
fi
if [[ "${1:-}" == "--prepare" ]]; then
  shift
  exec "${found[0]}" -m benchmarks.gpu_prepare prepare "$@"
fi

out="" named="" wheels="gpu-wheels" data="" quick=0 budget="" compile_cache="gpu-compile-cache" dry=0
from_caller() { if [[ "$1" == /* ]]; then echo "$1"; else echo "$caller/$1"; fi; }
while [[ $# -gt 0 ]]; do
  if [[ "$1" == --budget || "$1" == --wheels || "$1" == --data || "$1" == --compile-cache ]] \
    && [[ $# -lt 2 || "$2" == -* ]]; then
    echo "error: $1 takes a value; see the head of benchmarks/gpu.sh" >&2
    exit 2
  fi
  case "$1" in
    --quick) quick=1; shift ;;
    --dry-run) dry=1; shift ;;
    --budget) budget=$2; shift 2 ;;
    --wheels) wheels=$(from_caller "$2"); shift 2 ;;
    --data) data=$(from_caller "$2"); shift 2 ;;
    --compile-cache) compile_cache=$(from_caller "$2"); shift 2 ;;
    -*) echo "error: unknown option $1; see the head of benchmarks/gpu.sh" >&2; exit 2 ;;
    *)
      if [[ -n "$named" ]]; then
        echo "error: two OUT_DIRs, '${named#-}' and '$1'; give one" >&2
        exit 2
      fi
      named=-$1  # set, even for an empty OUT_DIR
      if [[ -n "$1" ]]; then out=$(from_caller "$1"); fi  # empty: the default
      shift ;;
  esac
done
if [[ -n "$budget" && ! "$budget" =~ ^[0-9]+$ ]]; then
  echo "error: --budget takes whole seconds, got $budget" >&2
  exit 2
fi

# the first interpreter whose torch sees a CUDA device; else the first whose torch imports
probe="import sys, torch; print(torch.cuda.is_available(), torch.__version__, torch.version.cuda, sys.version.split()[0])"
py="" torch_py=""
for path in "${found[@]}"; do
  if ! said=$("$path" -c "$probe" 2>&1); then
    failed+=("$path ($(tail -n 1 <<< "$said"))")
    continue
  fi
  read -r cuda torch_version cuda_version py_version <<< "$(tail -n 1 <<< "$said")"
  if [[ $cuda == True ]]; then py=$path; break; fi
  [[ -z "$torch_py" ]] && torch_py="torch $torch_version (CUDA $cuda_version) of $path"
done
if [[ -z "$py" && -z "$torch_py" ]]; then
  printf -v why '%s; ' "${failed[@]}"
  echo "error: torch does not import with ${why%; }; set PYTHON to an interpreter with torch" >&2
  exit 3
fi
if [[ -z "$py" ]]; then
  echo "error: no CUDA device visible to $torch_py: gpu.sh measures GPU figures only" >&2
  exit 4
fi
chosen="python $py (Python $py_version): torch $torch_version, CUDA $cuda_version"
echo "$chosen"
export PYTHONPATH=$PWD:$PWD/gpu-site${PYTHONPATH:+:$PYTHONPATH}
install=("$py" -m benchmarks.gpu_prepare install --wheels "$(realpath -m "$wheels")" --site gpu-site)
if [[ $dry == 1 ]]; then echo "install: $(printf '%q ' "${install[@]}")"; else "${install[@]}" || exit 5; fi
if [[ -n "$data" ]]; then export T2_SHARED_DATA=$data
elif [[ ! -d ../shared/data && -d gpu-data ]]; then export T2_SHARED_DATA=$PWD/gpu-data; fi
data_dir=${T2_SHARED_DATA:-$(cd .. && pwd)/shared/data}

out=$(realpath -m "${out:-runs/gpu-$(date +%Y%m%d-%H%M%S)}")
compile_cache=$(realpath -m "$compile_cache")
plan=(--python "$py" --since "$since" --compile-cache "$compile_cache" --data "$data_dir")
if [[ $quick == 1 ]]; then plan+=(--quick --budget "${budget:-355}"); else plan+=(--budget "${budget:-570}"); fi
export TORCHINDUCTOR_CACHE_DIR=$compile_cache/inductor  # the CUDA tests' compilations too
if [[ $dry == 1 ]]; then
  echo "environment: $(printf '%q' "TORCHINDUCTOR_CACHE_DIR=$TORCHINDUCTOR_CACHE_DIR") (every part's)"
  exec "$py" -m benchmarks.gpu_run "$out" "${plan[@]}" --dry-run
fi
mkdir -p "$out"
commit=$(git rev-parse HEAD 2> /dev/null || cat "$wheels/COMMIT" 2> /dev/null || echo unknown)
{
  date -u
  echo "commit $commit"
  echo "$chosen${failed[*]:+; not: ${failed[*]}}"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
} > "$out/device.txt" 2>&1

"$py" -m benchmarks.gpu_run "$out" "${plan[@]}"
"$py" -m benchmarks.gpu_summary "$out"
echo "GPU figures in $out: summary.md and summary.json"
