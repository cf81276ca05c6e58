"""Train a recipe's joint BPE once, the same as `t2 tokenizer`:
python tokenizer/train_tokenizer.py --recipe NAME --out DIR [--set KEY=VALUE ...] [--force]."""

from t2.cli import run_script

if __name__ == "__main__":
    run_script("tokenizer")
