#!/usr/bin/env bash
# Every GPU figure of docs/performance.md, on a machine with a CUDA GPU and a Python that
# already has PyTorch for CUDA, in one call that never touches the network:
#
#   bash benchmarks/gpu.sh [OUT_DIR] [--quick] [--budget SECONDS] [--wheels DIR] [--data DIR]
#                          [--compile-cache DIR]
#
# --quick (at most 6 minutes, compilation included; --budget to change): tests/test_cuda.py
# first (the compiled pass with and without CUDA graphs against eager, a replay asserted),
# then the training step of base, then v2_rope_rmsnorm, eager, compiled and with CUDA
# graphs against the transformers peer (bench_train.py: 25k-token batches, pre-drawn and
# each seen twice before timing, so CUDA graphs replay every timed step; tokens/s, MFU,
# host and GPU ms per step, compile seconds, replays, skips, fallbacks), then FlexAttention
# against SDPA on base (train.padded_attention), operators and casts per eager step, and
# big last. Each part is a process of its own under its own time limit, cut to the time
# left; a part that would start with too little time is skipped (big first) and the
# summary says so; a part cut short keeps the modes it finished (bench_train writes its
# JSON after each).
#
# The full run (about 10 minutes, a limit on every part): the CUDA tests, the README
# quickstart, the memory model against torch.cuda's peaks (bench_memory.py), `base` as
# shipped against the recipe before the batch plan (bench_recipe.py), t2 against the peer
# with operator counts (bench_train.py --count-ops, the recipe's own train.compile), decoding
# against generate() (bench_decode.py), and 2 minutes of `base` on mixed, validated on
# newstest2013.
#
# OUT_DIR (default runs/gpu-DATE) gets each part's output (NAME.txt), JSON, parts.tsv (each
# part's limit, seconds and exit status), device.txt (GPU, driver, torch, the commit) and
# the summary (summary.md, summary.json: benchmarks/gpu_summary.py), and the compile cache
# (OUT/compile-cache, or --compile-cache DIR: train.compile_cache; its *.bin files, torch's
# portable artifacts, carried to the next session's checkout and named there save the
# compilations on the same GPU model and torch).
#
# t2 runs from this checkout with PYTHONPATH; nothing is installed over the machine's
# packages: what it lacks (datasets, dill, multiprocess, xxhash) is installed from --wheels
# DIR (default gpu-wheels) into gpu-site/, a folder of its own. The data are ../shared/data,
# else --data DIR, else gpu-data. Make gpu-wheels/ and gpu-data/ where PyPI is reached
# (pinned by constraints.txt, --no-deps; under 40 MiB together; the commit written beside):
#
#   bash benchmarks/gpu.sh --prepare [--python 3.11 3.12]   (default: Python 3.10 to 3.13)
#
# Exit status: 0 when every part ran (the summary says how each ended), 2 for a bad option
# or no Python, 3 when torch does not import, 4 without a CUDA device, 5 when the packages
# the machine lacks cannot be installed. Each error is one line on stderr.
# Set PYTHON to choose the interpreter (default: python, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."

py=${PYTHON:-$(command -v python || command -v python3 || true)}
if [[ -z "$py" ]] || ! command -v "$py" > /dev/null; then
  echo "error: no Python found${PYTHON:+ at $PYTHON}; set PYTHON to an interpreter with torch" >&2
  exit 2
fi
if [[ "${1:-}" == "--prepare" ]]; then
  shift
  exec "$py" -m benchmarks.gpu_prepare prepare "$@"
fi

out="" wheels="gpu-wheels" data="" quick=0 budget="" compile_cache=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --budget) budget=$2; shift 2 ;;
    --wheels) wheels=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --compile-cache) compile_cache=$2; shift 2 ;;
    -*) echo "error: unknown option $1; see the head of benchmarks/gpu.sh" >&2; exit 2 ;;
    *) out=$1; shift ;;
  esac
done
if [[ -n "$budget" && ! "$budget" =~ ^[0-9]+$ ]]; then
  echo "error: --budget takes whole seconds, got $budget" >&2
  exit 2
fi

probe="import torch; print(torch.cuda.is_available(), torch.__version__, torch.version.cuda)"
if ! found=$("$py" -c "$probe" 2>&1); then
  echo "error: torch does not import with $py: $(tail -n 1 <<< "$found")" >&2
  exit 3
fi
read -r cuda torch_version cuda_version <<< "$(tail -n 1 <<< "$found")"
if [[ $cuda != True ]]; then
  echo "error: no CUDA device visible to torch $torch_version (CUDA $cuda_version):" \
    "gpu.sh measures GPU figures only" >&2
  exit 4
fi
export PYTHONPATH=$PWD:$PWD/gpu-site${PYTHONPATH:+:$PYTHONPATH}
"$py" -m benchmarks.gpu_prepare install --wheels "$wheels" --site gpu-site || exit 5
if [[ -n "$data" ]]; then export T2_SHARED_DATA=$data
elif [[ ! -d ../shared/data && -d gpu-data ]]; then export T2_SHARED_DATA=$PWD/gpu-data; fi
data_dir=${T2_SHARED_DATA:-$(cd .. && pwd)/shared/data}

out=${out:-runs/gpu-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
commit=$(git rev-parse HEAD 2> /dev/null || cat gpu-wheels/COMMIT 2> /dev/null || echo unknown)
{
  date -u
  echo "commit $commit"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  "$py" -c "import sys, torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'Python', sys.version.split()[0])"
} > "$out/device.txt" 2>&1
compile_cache=$(realpath -m "${compile_cache:-$out/compile-cache}")
cache="--set=train.compile_cache=$compile_cache"

budget=${budget:-$([[ $quick == 1 ]] && echo 345 || echo 570)}
start=$SECONDS
: > "$out/parts.tsv"
# shellcheck source=benchmarks/gpu_parts.sh
source benchmarks/gpu_parts.sh  # part NAME LIMIT MIN CMD...: CMD within the budget
bench() {  # bench NAME LIMIT MIN RECIPE MODES [bench_train options...]
  local name=$1 limit=$2 min=$3 recipe=$4 modes=$5
  shift 5
  part "$name" "$limit" "$min" "$py" -m benchmarks.bench_train --recipes "$recipe" \
    --precisions bf16 --max-tokens 25000 --modes "$modes" "$cache" --json "$out/$name.json" "$@"
}

if [[ $quick == 1 ]]; then
  quick_rounds=(--rounds 2 --steps-per-round 3)
  part tests 120 60 "$py" -m pytest -q -p no:cacheprovider tests/test_cuda.py
  bench train-base 100 45 base eager,compiled,graphs "${quick_rounds[@]}"
  bench train-v2 90 45 v2_rope_rmsnorm eager,compiled,graphs "${quick_rounds[@]}"
  bench train-base-flex 50 30 base flex "${quick_rounds[@]}"
  part ops 30 20 "$py" -m benchmarks.bench_train --recipes base --precisions bf16 \
    --max-tokens 25000 --rounds 0 --count-ops --json "$out/ops.json"
  bench train-big 90 60 big eager,compiled,graphs "${quick_rounds[@]}"
else
  part tests 120 60 "$py" -m pytest -q -p no:cacheprovider tests/test_cuda.py
  part quickstart 60 30 "$py" train.py --recipe quickstart --out "$out/quickstart" \
    --wandb disabled "$cache"
  part memory 45 30 "$py" -m benchmarks.bench_memory --json "$out/memory.json"
  part recipe_base 75 45 "$py" -m benchmarks.bench_recipe --recipe base --steps 60 \
    --log-every 10 --rounds 1 --arm shipped= --json "$out/recipe_base.json" \
    --arm before=data.max_tokens=4096,train.accumulate=6,data.max_shapes=0,data.max_tokens_per_sentence=64
  bench train-base 75 45 base auto --rounds 3 --count-ops
  bench train-v2 75 45 v2_rope_rmsnorm auto --rounds 3 --count-ops
  part decode 45 30 "$py" -m benchmarks.bench_decode --device cuda --bf16 --beams 1,4
  part mixed 150 90 "$py" train.py --recipe base --out "$out/mixed" --wandb disabled "$cache" \
    --set "data.train=files:$data_dir/mixed/train" \
    --set "data.valid=files:$data_dir/newstest/newstest2013" \
    --set "data.test=files:$data_dir/newstest/newstest2013" --set train.max_minutes=2 \
    --set train.eval_every=100000 --set train.save_every=100000 --set train.warmup_steps=1000 \
    --set decode.beam_size=1
fi
"$py" -m benchmarks.gpu_summary "$out"
echo "GPU figures in $out: summary.md and summary.json"
