"""The files of a t2 model folder (the `hf` export format), one place for their names."""

from t2.rundir.layout import PLUGINS, WEIGHTS

HUB_FORMAT = 1  # the folder format this t2 writes and the newest it reads
CONFIG_JSON, CARD = "config.json", "README.md"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
REQUIRED = (CONFIG_JSON, WEIGHTS, "tokenizer.json")
PLUGIN_FILES = f"{PLUGINS}/*"  # the run's plugin copies and manifest (t2.rundir.plugins)
# what is written, uploaded and downloaded (names, and a pattern for the plugins)
FILES = (CONFIG_JSON, WEIGHTS, *TOKENIZER_FILES, CARD, PLUGIN_FILES)
SECTIONS = ("model", "data", "train", "decode")
TOP_KEYS = ("t2_format", "t2_version", *SECTIONS, "source")  # source: the run it came from
