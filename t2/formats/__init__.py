"""Model formats, one module each: `run` (a run directory or checkpoint, what training
writes) and the export formats of t2.formats.export, `hf` (a Hugging Face model folder)
and `ct2` (a CTranslate2 folder), which `t2 export --format` writes (t2.registry.EXPORT).
Each names its detection, its reader, its writer, its files (what a Hub download fetches),
its engine and the export options it takes (the flags are declared in t2.formats.options,
which `t2 export --help` reads without importing the formats). t2.formats.choose says
which one a folder is; t2.opener asks it. This file stays free of imports."""
