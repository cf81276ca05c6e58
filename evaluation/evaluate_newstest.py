"""Score a checkpoint on newstest sets by their sacreBLEU names, the same as `t2 evaluate`:
python evaluation/evaluate_newstest.py --checkpoint TARGET --testset wmt13 wmt14
--langpair de-en (or --src FILE --ref FILE)."""

from t2.cli import run_script

if __name__ == "__main__":
    run_script("evaluate")
