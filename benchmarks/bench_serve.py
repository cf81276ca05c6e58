"""Serving speed: beam search over real newstest2013 German by Hugging Face
`MarianMTModel.generate()`, t2's own search, and t2's CTranslate2 export at float32 and int8,
for full-size `base` and `v2_rope_rmsnorm` models with random weights.

python -m benchmarks.bench_serve [--recipes base,v2_rope_rmsnorm] [--sentences 100]
    [--max-len 32] [--beam 4] [--threads 2] [--repeats 5] [--engines hf,t2,ct2_int8@2,...]
    [--json FILE]

Equal work: every engine emits exactly --max-len tokens for every sentence, then EOS
(CTranslate2 takes one minimum and maximum decoding length per call, so lengths are fixed for
all engines rather than each reference's; `bench_decode.py --lengths reference` compares t2
and HF with per-sentence lengths). The sentences are batched identically for every engine,
longest first. The engines are timed interleaved (hf, t2, ct2 float32, ct2 int8, hf, ...)
--repeats times after one warm-up pass each; the table shows the median wall time with the
fastest and slowest run, target tokens/s at the median, the ratio of medians to HF and the
peak resident memory above the loaded model. The HF peer is a MarianMTModel of the recipe's
dimensions (post-norm, sinusoidal, ReLU, tied): Marian has no RoPE, RMSNorm or SwiGLU, so for
`v2_rope_rmsnorm` it stands for "the same size in transformers".

--trained CHECKPOINT --peer PEER_DIR --src FILE --ref FILE times trained models decoding
freely instead: t2's checkpoint by its own search and by its CTranslate2 export at float32 and
int8, and a trained MarianMTModel of the same size (PEER_DIR as benchmarks/train_peer.py
writes it: model/ and tokenizer/) by generate(), each with its usual beam search (beam --beam,
length penalty 0.6 as log p / n^0.6; generate's early_stopping=False, t2's `heuristic` rule,
CTranslate2's stop at --beam finished hypotheses), on the sentences of --src in batches of
--batch-size sorted by length. Outputs differ, so the figure is target tokens/s: the tokens
of each engine's outputs, re-encoded with the shared BPE, over its median wall time; sacreBLEU
against --ref shows what each engine's speed buys.

An engine named ENGINE@N runs on N workers that share the --threads (threads // N each) and
decode N batches at once, as a server that runs one copy per core does: CTranslate2 through
its own inter_threads (`t2 translate --engine ct2 --workers N`), HF and t2 as N processes
(one model each) that the batches are dealt to in turn. The work and the batches are the
same; the peak memory counts the worker processes.

ct2_peer_float32 and ct2_peer_int8 (not run unless named) are the HF peer converted by
CTranslate2's own converter: the speed CTranslate2 itself reaches with a model of that size,
against which t2's export is measured.

Speed is not quality: BLEU of int8 against float32 on a trained model comes from
`t2 export ... --quantization int8` and `evaluate_model.py --engine ct2` (docs/serving.md),
or from --trained.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from benchmarks.bench_decode import newstest_sources, run_hf
from benchmarks.decode_common import PeakMemory, eos_masked, run_t2
from benchmarks.engines import (
    DEFAULT_ENGINES,
    ENGINES,
    Runs,
    bad_engine,
    engine_spec,
    fmt_ratio,
    ordered,
    peer_of,
    ratios,
)
from benchmarks.pool import Pool
from t2.config import Config, ModelConfig
from t2.model.transformer import Transformer
from t2.progress import Progress
from t2.recipes import load_config
from t2.serve.engine import length_batches
from t2.specials import SPECIALS


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--recipes", default="base,v2_rope_rmsnorm", help="architectures to time")
    p.add_argument(
        "--engines",
        default=",".join(DEFAULT_ENGINES),
        help=f"subset of {','.join(ENGINES)}, each as ENGINE or ENGINE@WORKERS",
    )
    p.add_argument(
        "--sentences",
        type=int,
        default=None,
        help="first N lines of newstest2013.de (100), or of --src (all)",
    )
    p.add_argument("--max-len", type=int, default=32, help="target tokens per sentence")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--vocab", type=int, default=8000, help="BPE trained on mixed/train")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--repeats", type=int, default=5, help="timed runs per engine, interleaved")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="model.KEY=VALUE",
        help="override a model key of every recipe, e.g. model.d_model=64",
    )
    p.add_argument("--json", help="write every figure to this file")
    p.add_argument("--trained", help="a t2 run or checkpoint: time trained models (see above)")
    p.add_argument("--peer", help="with --trained: the trained MarianMTModel's folder")
    p.add_argument("--src", help="with --trained: source sentences, one per line")
    p.add_argument("--ref", help="with --trained: reference translations")
    args = p.parse_args(argv)
    if args.trained and not (args.peer and args.src and args.ref):
        p.error("--trained needs --peer, --src and --ref")
    if args.sentences is None:
        args.sentences = 0 if args.trained else 100
    args.device, args.bf16 = "cpu", False  # what bench_decode's runners read
    for spec in args.engines.split(","):
        if why := bad_engine(spec):
            p.error(why)
        if args.trained and spec.startswith("ct2_peer"):
            p.error(f"{spec!r} is for random weights; with --trained, leave it out")
    return args


def marian(mcfg: ModelConfig):
    """transformers' MarianMTModel of a t2 model config's dimensions (ReLU, post-norm)."""
    from transformers import MarianMTModel

    from benchmarks.bench_decode import marian_config

    shape = argparse.Namespace(
        d_model=mcfg.d_model, layers=mcfg.n_encoder_layers, n_heads=mcfg.n_heads, d_ff=mcfg.d_ff
    )
    return MarianMTModel(marian_config(shape, mcfg.vocab_size)).eval()


def ct2_translator(
    model: Transformer, mcfg: ModelConfig, tokenizer, quant: str, threads: int, workers: int = 1
):
    """Export the model through t2.serve.ct2 (what `t2 export` writes) and load it with
    `workers` workers (CTranslate2's inter_threads) sharing `threads`."""
    import ctranslate2

    from t2.serve.ct2 import save_spec

    folder = tempfile.mkdtemp(prefix=f"t2-ct2-{quant}-")
    save_spec(model, Config(model=mcfg), tokenizer, folder, quant)
    return ctranslate2.Translator(
        folder,
        device="cpu",
        compute_type=quant,
        inter_threads=workers,
        intra_threads=max(1, threads // workers),
    )


def ct2_runner(tokenizer):
    """A runner like bench_decode's: every sentence gets exactly `length` tokens, then EOS.
    Every batch is queued at once; the translator's workers take them in turn."""
    specials = [[SPECIALS["pad"]], [SPECIALS["bos"]]]

    def run(translator, src_ids: list[list[int]], lengths: list[int], beam: int, args) -> int:
        jobs = []
        for batch in length_batches([len(r) for r in src_ids], args.batch_size):
            source = [tokenizer.convert_ids_to_tokens(src_ids[i][:-1]) for i in batch]
            steps = lengths[batch[0]] + 1  # the tokens, then the step where t2 and HF emit EOS
            jobs += translator.translate_batch(
                source,
                beam_size=beam,
                length_penalty=0.6,
                max_decoding_length=steps,
                min_decoding_length=steps,
                max_input_length=0,
                return_end_token=True,
                suppress_sequences=specials,
                asynchronous=True,
            )
        return sum(len(job.result().hypotheses[0]) for job in jobs)

    return run


def ct2_peer(mcfg: ModelConfig, tokenizer, quant: str, threads: int, workers: int = 1):
    """The HF peer (seed 0) converted by CTranslate2's own TransformersConverter and loaded as
    ct2_translator loads t2's export: shows whether the export decodes as fast as what
    CTranslate2 itself makes of a model of that size. Its Marian loader drops the last token
    and embedding row, where HF's Marian vocabularies keep `<pad>`; t2's BPE has PAD at id 0,
    so the vocabulary is taken whole (the BART loader's)."""
    import ctranslate2
    from ctranslate2.converters import TransformersConverter
    from ctranslate2.converters import transformers as loaders

    class WholeVocabulary(loaders.MarianMTLoader):
        def get_vocabulary(self, model, tokenizer) -> list[str]:  # noqa: ANN001
            return loaders.BartLoader.get_vocabulary(self, model, tokenizer)

        def _remove_pad_weights(self, spec) -> None:  # noqa: ANN001
            pass

    folder = Path(tempfile.mkdtemp(prefix=f"t2-ct2-peer-{quant}-"))
    torch.manual_seed(0)
    marian(mcfg).save_pretrained(folder / "hf")
    tokenizer.save_pretrained(folder / "hf")
    name = "MarianConfig"
    original, loaders._MODEL_LOADERS[name] = loaders._MODEL_LOADERS[name], WholeVocabulary()
    try:
        TransformersConverter(str(folder / "hf")).convert(str(folder / "ct2"), quantization=quant)
    finally:
        loaders._MODEL_LOADERS[name] = original
    return ctranslate2.Translator(
        str(folder / "ct2"),
        device="cpu",
        compute_type=quant,
        inter_threads=workers,
        intra_threads=max(1, threads // workers),
    )


def torch_engine(name: str, mcfg: ModelConfig) -> tuple:
    """(runner, model) of hf, t2, hf_bf16 or t2_bf16, t2's weights drawn with seed 0 (as
    engines_for draws the model it exports, and as every worker of a Pool does)."""
    torch.manual_seed(0)
    if name.startswith("hf"):
        model = marian(mcfg)
        return run_hf, model.to(torch.bfloat16) if name == "hf_bf16" else model
    model = eos_masked(Transformer(mcfg).eval())
    return run_t2, model.to(torch.bfloat16) if name == "t2_bf16" else model


def _forced_work(name: str, mcfg: ModelConfig):
    """A synthetic Pool worker's engine: tokens emitted for (src_ids, lengths, beam, args)."""
    run, model = torch_engine(name, mcfg)
    return lambda src_ids, lengths, beam, args: run(model, src_ids, lengths, beam, args)


class PoolRunner:
    """A runner (like run_hf and run_t2) that deals the batches out to a Pool."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    def __call__(
        self, _model, src_ids: list[list[int]], lengths: list[int], beam: int, args
    ) -> int:
        shares = self.pool.deal([len(r) for r in src_ids], args.batch_size)
        jobs = [
            ([src_ids[i] for i in rows], [lengths[i] for i in rows], beam, args) for rows in shares
        ]
        return sum(self.pool.map(jobs))


@dataclass
class Engine:
    """What time_engines runs: run(model, src_ids, lengths, beam, args) -> tokens emitted."""

    run: object
    model: object
    workers: int = 1
    pids: list[int] = field(default_factory=list)  # worker processes (their memory counts)


def engines_for(recipe: str, args, tokenizer) -> tuple[ModelConfig, dict[str, Engine]]:
    """The --engines of one recipe, in ENGINES order (then by workers), keyed by their spec."""
    cfg = load_config(recipe, args.set).model
    mcfg = replace(cfg, vocab_size=len(tokenizer), dropout=0.0)
    torch.manual_seed(0)
    exported = Transformer(mcfg).eval()
    runner = ct2_runner(tokenizer)
    engines = {}
    for spec in ordered(args.engines):
        name, workers = engine_spec(spec)
        if name.startswith("ct2_peer_"):
            quant = name.removeprefix("ct2_peer_")
            translator = ct2_peer(mcfg, tokenizer, quant, args.threads, workers)
            engines[spec] = Engine(runner, translator, workers)
        elif name.startswith("ct2_"):
            quant = name.removeprefix("ct2_")
            translator = ct2_translator(exported, mcfg, tokenizer, quant, args.threads, workers)
            engines[spec] = Engine(runner, translator, workers)
        elif workers > 1:
            pool = Pool(_forced_work, (name, mcfg), workers, args.threads)
            engines[spec] = Engine(PoolRunner(pool), None, workers, pool.pids)
        else:
            engines[spec] = Engine(*torch_engine(name, mcfg))
    return mcfg, engines


def time_engines(engines: dict[str, Engine], work: tuple, args) -> dict[str, Runs]:
    runs = {name: Runs() for name in engines}
    for e in engines.values():  # a batch for each worker
        e.run(e.model, *(w[: args.batch_size * e.workers] for w in work), args.beam, args)
    with Progress(args.repeats * len(engines), f"beam {args.beam}", "runs") as progress:
        for _ in range(args.repeats):
            for name, e in engines.items():
                with PeakMemory("cpu", e.pids) as peak:
                    start = time.perf_counter()
                    runs[name].tokens = e.run(e.model, *work, args.beam, args)
                    runs[name].walls.append(time.perf_counter() - start)
                runs[name].peak_mib = max(runs[name].peak_mib, peak.mib)
                progress.update(1)
    for e in engines.values():
        if isinstance(e.run, PoolRunner):
            e.run.pool.close()
    emitted = {name: r.tokens for name, r in runs.items()}
    if len(set(emitted.values())) > 1:  # unequal work would make the ratios meaningless
        sys.exit(f"error: the engines emitted different numbers of tokens: {emitted}")
    return runs


def report(recipe: str, mcfg: ModelConfig, runs: dict[str, Runs]) -> list[dict]:
    records = []
    for name, r in runs.items():
        tok_s = r.tokens / r.median
        ratio, same = ratios(name, runs, lambda x: 1.0 / x.median)
        print(
            f"{recipe:16} {name:13} {r.median:7.2f} {min(r.walls):6.2f}-{max(r.walls):<6.2f} "
            f"{tok_s:9.1f} {fmt_ratio(ratio):>7} {fmt_ratio(same):>9} {r.peak_mib:9.1f}",
            flush=True,
        )
        records.append(
            {
                "recipe": recipe,
                "engine": name,
                "positional": mcfg.positional,
                "norm": mcfg.norm,
                "ffn": mcfg.ffn,
                "d_model": mcfg.d_model,
                "layers": mcfg.n_encoder_layers,
                "median_s": r.median,
                "walls_s": r.walls,
                "tokens": r.tokens,
                "tokens_per_s": tok_s,
                "ratio_to_hf": ratio,
                "ratio_to_hf_same_precision": same,
                "peer": peer_of(name, runs),
                "workers": engine_spec(name)[1],
                "peak_mib": r.peak_mib,
            }
        )
    return records


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.trained:
        from benchmarks.serve_trained import trained  # the --trained mode, beside this file

        records = trained(args)
    else:
        records = synthetic(args)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    return records


def synthetic(args) -> list[dict]:
    """Random full-size models forced to equal output lengths."""
    tokenizer, _, src_ids = newstest_sources(args)
    lengths = [args.max_len] * len(src_ids)
    import ctranslate2

    print(
        f"CPU, {args.threads} threads; ctranslate2 {ctranslate2.__version__}, torch "
        f"{torch.__version__}; {len(src_ids)} newstest2013 sentences, avg "
        f"{sum(map(len, src_ids)) / len(src_ids):.1f} source tokens; {args.max_len} target "
        f"tokens + EOS each; beam {args.beam}, batch {args.batch_size}; {args.repeats} "
        f"interleaved runs per engine"
    )
    print(
        f"{'recipe':16} {'engine':13} {'median':>7} {'range s':13} {'tokens/s':>9} "
        f"{'vs hf':>7} {'same type':>9} {'peak MiB':>9}"
    )
    records = []
    for recipe in args.recipes.split(","):
        mcfg, engines = engines_for(recipe, args, tokenizer)
        records += report(recipe, mcfg, time_engines(engines, (src_ids, lengths), args))
    return records


if __name__ == "__main__":
    main()
