"""Evaluation: translation in batches, sacreBLEU scoring, the robustness suite."""

from t2.evaluation.evaluate import decode_ids, translate, translate_nbest, translate_stream

__all__ = ["decode_ids", "translate", "translate_nbest", "translate_stream"]
