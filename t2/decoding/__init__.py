"""Decoding: the search strategies over a model's ids (a registry: greedy, beam,
sampling) and their options. The translation service that turns text into ids and back
around them is t2.serve.engine."""
