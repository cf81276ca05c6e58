#!/usr/bin/env bash
# Every GPU figure of docs/performance.md in one call, on a machine with a CUDA GPU and a
# Python that already has PyTorch for CUDA. It never touches the network:
#
#   bash benchmarks/gpu.sh [OUT_DIR] [--quick] [--wheels DIR] [--data DIR]
#
# --quick (at most ~6 minutes, compilation included): the training pass eager, compiled
# and with CUDA graphs against the transformers peer in the same run, for base,
# v2_rope_rmsnorm and big at 25k-token batches (tokens/s, MFU, host ms and GPU kernel ms
# per step, recompiles; bench_train.py --modes), the operators and casts per eager step,
# and the CUDA tests; each part under a time limit, so a borrowed GPU measures all of it
# in one call and a part cut short is named as missing in the summary.
#
# OUT_DIR (default runs/gpu-DATE) gets each benchmark's JSON and output. t2 runs from this
# checkout (nothing is installed over the machine's torch); what it needs that the
# machine lacks (datasets, dill, multiprocess, xxhash, pyarrow) is installed from --wheels
# DIR with --no-index, and wandb, ctranslate2 and flash-attn are optional. The data are
# ../shared/data or --data DIR (a copy of it). Make both folders where PyPI is reached:
#
#   bash benchmarks/gpu.sh --prepare [PYTHON_VERSION]   (gpu-wheels/ and gpu-data/, git-ignored)
#
# The figures, about 10 minutes on one GPU: the CUDA tests (tests/test_cuda.py), the README
# quickstart, the memory model against torch.cuda's peaks (bench_memory.py), `base` as
# shipped against the recipe before the batch plan (bench_recipe.py: 4,096-token
# micro-batches, accumulate 6, greedy batches, pairs up to 64 tokens), t2 against the
# transformers peer at 25k-token batches with MFU and operators and kernels per step
# (bench_train.py --count-ops), decoding against generate() (bench_decode.py), and 5
# minutes of `base` on ../shared/data/mixed validated on newstest2013. It writes
# OUT/summary.json and OUT/summary.md (gpu_summary.py). Without CUDA it says so in one line
# and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
NEEDED="datasets dill multiprocess xxhash pyarrow"

if [[ "${1:-}" == "--prepare" ]]; then
  extra=()
  if [[ -n "${2:-}" ]]; then
    extra=(--only-binary=:all: --python-version "$2" --platform manylinux2014_x86_64
           --platform manylinux_2_28_x86_64)
  fi
  # shellcheck disable=SC2086
  pip download -q -d gpu-wheels "${extra[@]}" $NEEDED
  if [[ -d ../shared/data && ! -d gpu-data ]]; then cp -r ../shared/data gpu-data; fi
  echo "gpu-wheels/ and gpu-data/ are ready: carry them with the checkout"
  exit 0
fi

out="" wheels="gpu-wheels" data="" quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --wheels) wheels=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    -*) echo "error: unknown option $1; see the head of benchmarks/gpu.sh" >&2; exit 2 ;;
    *) out=$1; shift ;;
  esac
done

if ! python -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  echo "no CUDA device here: benchmarks/gpu.sh measures GPU figures only, nothing to do"
  exit 0
fi
missing=$(python -c "import importlib.util as u; print(' '.join(m for m in '$NEEDED'.split() if u.find_spec(m) is None))")
if [[ -n "$missing" ]]; then
  if [[ ! -d "$wheels" ]]; then
    echo "error: $missing not installed and no wheel folder $wheels: run 'bash benchmarks/gpu.sh --prepare PYTHON_VERSION' where PyPI is reached, or pass --wheels DIR" >&2
    exit 2
  fi
  # shellcheck disable=SC2086
  pip install -q --no-index --find-links "$wheels" $missing
fi
if [[ -n "$data" ]]; then export T2_SHARED_DATA=$data
elif [[ ! -d ../shared/data && -d gpu-data ]]; then export T2_SHARED_DATA=$PWD/gpu-data; fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

out=${out:-runs/gpu-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
{ date -u; git rev-parse --short HEAD; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } > "$out/device.txt" 2>&1 || true
data_dir=${T2_SHARED_DATA:-$(cd .. && pwd)/shared/data}
run() { echo "== $*"; "$@"; }
if [[ $quick == 1 ]]; then
  # the step itself: eager vs compiled vs CUDA graphs against the peer, recipe by recipe
  # (the JSON grows after each, so a time limit keeps what finished)
  run timeout 270 python -m benchmarks.bench_train --recipes base,v2_rope_rmsnorm,big \
    --precisions bf16 --max-tokens 25000 --rounds 2 --steps-per-round 3 \
    --modes eager,compiled,graphs --json "$out/train.json" > "$out/train.txt" 2>&1 || true
  run timeout 40 python -m benchmarks.bench_train --recipes base --precisions bf16 \
    --max-tokens 25000 --rounds 0 --count-ops --json "$out/ops.json" > "$out/ops.txt" 2>&1 || true
  run timeout 60 python -m pytest -q tests/test_cuda.py > "$out/tests.txt" 2>&1 || true
  python -m benchmarks.gpu_summary "$out"
  echo "GPU figures in $out: summary.md and summary.json"
  exit 0
fi
# each part reports and the run goes on: the summary says what is missing
run python -m pytest -q tests/test_cuda.py > "$out/tests.txt" 2>&1 || true
run python train.py --recipe quickstart --out "$out/quickstart" --wandb disabled > "$out/quickstart.txt" 2>&1 || true
run python -m benchmarks.bench_memory --json "$out/memory.json" > "$out/memory.txt" 2>&1 || true
run python -m benchmarks.bench_recipe --recipe base --steps 60 --log-every 10 --rounds 1 --arm shipped= \
  --arm before=data.max_tokens=4096,train.accumulate=6,data.max_shapes=0,data.max_tokens_per_sentence=64 \
  --json "$out/recipe_base.json" > "$out/recipe_base.txt" 2>&1 || true
run python -m benchmarks.bench_train --recipes base,v2_rope_rmsnorm --precisions bf16 \
  --max-tokens 25000 --rounds 3 --count-ops --json "$out/train.json" > "$out/train.txt" 2>&1 || true
run python -m benchmarks.bench_decode --device cuda --bf16 --beams 1,4 > "$out/decode.txt" 2>&1 || true
run python train.py --recipe base --out "$out/mixed" --wandb disabled \
  --set "data.train=files:$data_dir/mixed/train" --set "data.valid=files:$data_dir/newstest/newstest2013" \
  --set "data.test=files:$data_dir/newstest/newstest2013" --set train.max_minutes=5 \
  --set train.eval_every=100000 --set train.save_every=100000 --set train.warmup_steps=1000 \
  --set decode.beam_size=1 > "$out/mixed.txt" 2>&1 || true
python -m benchmarks.gpu_summary "$out"
echo "GPU figures in $out: summary.md and summary.json"
