"""Evaluation: sacreBLEU scoring of a test set, forced-decoding measures and the
robustness suite; translation itself is t2.serve.engine's."""
