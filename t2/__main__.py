"""`python -m t2 COMMAND ...` (and `torchrun --nproc-per-node N -m t2 train ...`)."""

from t2.cli import main

if __name__ == "__main__":
    main()
