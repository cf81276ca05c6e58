"""Serving: export a trained model to CTranslate2 and translate with either engine
(docs/serving.md). This file stays free of heavy imports: `t2 export --help` reads it."""

# what CTranslate2's ModelSpec.optimize accepts; float32 keeps the weights exact
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                 "float16", "bfloat16")  # fmt: skip
ENGINES = ("t2", "ct2")  # t2's own search, or CTranslate2 over an export folder
# --precision: the type decoding computes in (default: as stored, float32 for t2's checkpoints)
PRECISIONS = ("float32", "bfloat16", "float16")


def add_engine_argument(parser) -> None:  # noqa: ANN001  (an argparse parser)
    """--engine and --precision, shared by `t2 evaluate` and `t2 translate`."""
    parser.add_argument(
        "--engine", default="t2", choices=ENGINES,
        help="t2: the run's checkpoint with t2's search (default); ct2: a folder written by "
        "t2 export --format ct2, translated by CTranslate2",
    )  # fmt: skip
    parser.add_argument(
        "--precision", choices=PRECISIONS,
        help="compute type of decoding (default: as stored: float32 for t2, the export's type "
        "for ct2). bfloat16 is faster on GPUs and on CPUs with AVX-512 BF16 or AMX and may "
        "change a few outputs (docs/serving.md); float16 is for GPUs",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=int, default=1, metavar="N",
        help="ct2 only: decode N batches at once, each by one CTranslate2 worker with its "
        "share of the threads (its inter_threads; default 1). On a CPU, one worker per core "
        "decodes faster than one worker with every core (docs/serving.md)",
    )  # fmt: skip
