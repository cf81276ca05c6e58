"""Decoding: cached greedy and batched beam search, checkpoint averaging."""

from t2.decoding.search import Hypothesis, beam_search, greedy_search, length_penalty, search

__all__ = ["Hypothesis", "beam_search", "greedy_search", "length_penalty", "search"]
