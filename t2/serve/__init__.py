"""Serving: export a trained model to CTranslate2 and translate with either engine
(docs/serving.md). This file stays free of heavy imports: `t2 export --help` reads it."""

# what CTranslate2's ModelSpec.optimize accepts; float32 keeps the weights exact
QUANTIZATIONS = (
    "float32",
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
)
# --precision: the type decoding computes in (default: as stored, float32 for t2's checkpoints)
PRECISIONS = ("float32", "bfloat16", "float16")
