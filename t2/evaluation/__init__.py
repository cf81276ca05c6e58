"""Evaluation: translation in batches, sacreBLEU scoring, the robustness suite."""

from t2.evaluation.evaluate import decode_ids, translate

__all__ = ["decode_ids", "translate"]
