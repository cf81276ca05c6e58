"""Serving: export a trained model to CTranslate2 and translate with either engine
(docs/serving.md). This file stays free of heavy imports: `t2 export --help` reads it."""

# what CTranslate2's ModelSpec.optimize accepts; float32 keeps the weights exact
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                 "float16", "bfloat16")  # fmt: skip
ENGINES = ("t2", "ct2")  # t2's own search, or CTranslate2 over an export folder


def add_engine_argument(parser) -> None:  # noqa: ANN001  (an argparse parser)
    """--engine, shared by `t2 evaluate` and `t2 translate`."""
    parser.add_argument(
        "--engine", default="t2", choices=ENGINES,
        help="t2: the run's checkpoint with t2's search (default); ct2: a folder written by "
        "t2 export --format ct2, translated by CTranslate2",
    )  # fmt: skip
