"""Train a recipe, the same as `t2 train`: python train.py --recipe NAME [--set KEY=VALUE ...]
[--out DIR]. Also runs under `torchrun --nproc-per-node N train.py ...` and
`accelerate launch train.py ...`."""

from t2.cli import run_script

if __name__ == "__main__":
    run_script("train")
