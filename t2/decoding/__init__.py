"""Decoding: search strategies (a registry: greedy, beam, sampling), their options and
the translation service that turns text into ids and back around them."""
