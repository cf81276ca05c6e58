"""Figures of a run: the sinusoidal positional encoding (report 000, figure 1.1), every
head's attention for one sentence, the learning-rate range test and training curves."""

from t2.figures.capture import AttentionMaps, capture_attention
from t2.figures.make import FigureOptions, write_figures

__all__ = ["AttentionMaps", "FigureOptions", "capture_attention", "write_figures"]
