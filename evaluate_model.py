"""Score a checkpoint with sacreBLEU, the same as `t2 evaluate`:
python evaluate_model.py --checkpoint RUN_OR_CHECKPOINT [--src FILE --ref FILE]."""

from t2.cli import run_script

if __name__ == "__main__":
    run_script("evaluate")
