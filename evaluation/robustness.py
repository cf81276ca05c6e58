"""Report 003's robustness suite, the same as `t2 robustness`:
python evaluation/robustness.py --checkpoint RUN [RUN ...] --src FILE --ref FILE."""

from t2.cli import run_script

if __name__ == "__main__":
    run_script("robustness")
