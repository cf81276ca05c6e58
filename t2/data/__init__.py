"""Data: sources, cleaning, a joint BPE tokenizer, token-budget batches (see docs/data.md).

Each module is imported by name (t2.data.pipeline, t2.data.tokenizer, ...): importing
the package alone stays light, so the config (t2.data.config) loads without `datasets`."""
