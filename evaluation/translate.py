"""Translate line by line, the same as `t2 translate`:
python evaluation/translate.py --checkpoint RUN_OR_CHECKPOINT [--input FILE]."""

from t2.cli import run_script

if __name__ == "__main__":
    run_script("translate")
