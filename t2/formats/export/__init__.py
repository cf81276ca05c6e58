"""The export formats (`t2 export --format NAME`), one module each: hf (a Hugging Face model
folder) and ct2 (a CTranslate2 folder). Each is a t2.formats.base.ModelFormat that reads
and writes its folders; the registry (t2.registry.EXPORT) lists this package to know
their names without importing them."""
