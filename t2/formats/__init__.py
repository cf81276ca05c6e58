"""Model formats, one module each: `run` (a run directory or checkpoint, what training
writes), `hf` (a Hugging Face model folder) and `ct2` (a CTranslate2 folder). Each names
its detection, its reader, its writer, its files (what a Hub download fetches) and its
export options (declared in t2.formats.options, which `t2 export`'s flags come from
without importing the formats); `hf` and `ct2` are registered in t2.registry.EXPORT for
`t2 export --format`. t2.formats.choose says which one a folder is; t2.opener asks it.
This file stays free of imports: `t2 export --help` reads t2.formats.options."""
