"""t2: encoder-decoder Transformers for translation from registered components."""

__version__ = "0.2.0"
