"""The verbs of the `t2` command, one module each: HELP (one line), add_arguments(parser)
and run(args). Heavy imports happen inside run(), so `t2 --help` stays quick."""

VERBS = (
    "train",
    "evaluate",
    "translate",
    "robustness",
    "average",
    "tokenizer",
    "figures",
    "compare",
    "sweep",
    "save",
    "push",
    "export",
    "sanity",
    "components",
)
