#!/usr/bin/env bash
# Every GPU figure of docs/performance.md in one call, on a machine with a CUDA device:
#
#   bash benchmarks/gpu.sh [OUT_DIR]       (default runs/gpu-DATE; a summary at the end)
#
# It installs t2 from this checkout without touching the machine's torch, and what t2 needs
# that the machine lacks (datasets, wandb, ...) from a gpu-wheels/ folder carried along; the
# shared data are read from gpu-data/ when ../shared/data is not there. Both folders are
# made on a machine that reaches PyPI and has ../shared/data by
#
#   bash benchmarks/gpu.sh --prepare [PYTHON_VERSION]     (the GPU machine's, e.g. 3.12)
#
# and are ignored by git. The figures: the memory model against torch.cuda's peaks
# (bench_memory), `base` as shipped against the recipe before the batch plan
# (bench_recipe: 4,096-token micro-batches, accumulate 6, greedy batches, pairs <= 64
# tokens), and t2 against the transformers peer at 25k-token batches (bench_train).
set -euo pipefail
cd "$(dirname "$0")/.."
NEEDED="datasets dill multiprocess xxhash pyarrow wandb"

if [[ "${1:-}" == "--prepare" ]]; then
  pyver=${2:-}
  extra=()
  [[ -n "$pyver" ]] && extra=(--only-binary=:all: --python-version "$pyver"
                              --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64)
  # shellcheck disable=SC2086
  pip download -q -d gpu-wheels "${extra[@]}" $NEEDED
  if [[ -d ../shared/data && ! -d gpu-data ]]; then cp -r ../shared/data gpu-data; fi
  echo "gpu-wheels/ and gpu-data/ ready: carry them with the checkout"
  exit 0
fi

if ! python -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  echo "error: no CUDA device here: benchmarks/gpu.sh measures GPU figures; run it on a machine where torch.cuda.is_available()" >&2
  exit 2
fi
missing=$(python -c "import importlib.util as u; print(' '.join(m for m in '$NEEDED'.split() if u.find_spec(m) is None))")
if [[ -n "$missing" ]]; then
  if [[ ! -d gpu-wheels ]]; then
    echo "error: $missing not installed and no gpu-wheels/ folder: run 'bash benchmarks/gpu.sh --prepare PYTHON_VERSION' where PyPI is reached and carry gpu-wheels/" >&2
    exit 2
  fi
  # shellcheck disable=SC2086
  pip install -q --no-index --find-links gpu-wheels $missing
fi
pip install -q --no-deps -e .
if [[ ! -d ../shared/data && -d gpu-data ]]; then export T2_SHARED_DATA=${T2_SHARED_DATA:-$PWD/gpu-data}; fi

out=${1:-runs/gpu-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
{ date -u; git rev-parse --short HEAD; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } > "$out/device.txt" 2>&1 || true
python benchmarks/bench_memory.py --json "$out/memory.json" | tee "$out/memory.txt"
python benchmarks/bench_recipe.py --recipe base --steps 300 --rounds 2 --arm shipped= \
  --arm before=data.max_tokens=4096,train.accumulate=6,data.max_shapes=0,data.max_tokens_per_sentence=64 \
  --json "$out/recipe_base.json" | tee "$out/recipe_base.txt"
python benchmarks/bench_train.py --recipes base,v2_rope_rmsnorm --precisions bf16 \
  --max-tokens 25000 --json "$out/train.json" | tee "$out/train.txt"
echo "GPU figures in $out (device: $(sed -n 3p "$out/device.txt"))"
