"""bench_serve.py --trained: trained models decoding freely (t2, its CTranslate2 exports and
a trained MarianMTModel peer), each engine as a user runs it, on one process or on a Pool."""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.decode_common import PeakMemory
from benchmarks.engines import Runs, engine_spec, fmt_ratio, ordered, peer_of, ratios
from benchmarks.pool import Pool
from t2.data.encode import encode_source
from t2.evaluation.scoring import score_corpus
from t2.exporting import export
from t2.opener import open_model
from t2.progress import Progress
from t2.serve.engine import length_batches


class PeerEngine:
    """A trained MarianMTModel decoded by generate(), batched and sorted as t2 batches, with
    the BPE it was trained with, which must be the t2 run's (train_peer.py trains the same)."""

    def __init__(self, folder: Path, beam: int, tokenizer, dtype=torch.float32) -> None:  # noqa: ANN001
        from tokenizers import Tokenizer
        from transformers import MarianMTModel

        vocab = Tokenizer.from_file(str(folder / "tokenizer" / "tokenizer.json")).get_vocab()
        if vocab != tokenizer.get_vocab():
            sys.exit(
                f"error: {folder}/tokenizer is not the t2 run's BPE; train the peer with "
                f"benchmarks/train_peer.py on the run's recipe"
            )
        self.model = MarianMTModel.from_pretrained(folder / "model").to(dtype).eval()
        self.tokenizer, self.beam = tokenizer, beam

    @torch.no_grad()
    def translate(self, sentences: list[str], decode) -> list[str]:
        src_ids = encode_source(self.tokenizer, sentences, False)
        out = [""] * len(sentences)
        for batch in length_batches([len(r) for r in src_ids], decode.batch_size):
            rows = [torch.tensor(src_ids[i]) for i in batch]
            src = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=0)
            longest = max(len(r) for r in rows)
            ids = self.model.generate(
                input_ids=src,
                attention_mask=src.ne(0),
                num_beams=self.beam,
                length_penalty=decode.lenpen,
                early_stopping=False,
                do_sample=False,
                max_new_tokens=int(decode.max_len_a * longest) + decode.max_len_b + 1,
            )
            for i, text in zip(
                batch, self.tokenizer.batch_decode(ids, skip_special_tokens=True), strict=True
            ):
                out[i] = text.strip()
        return out


def _trained_engine(name: str, run: str, peer: str, beam: int, tokenizer):  # noqa: ANN001
    """hf, t2, hf_bf16 or t2_bf16 of --trained: an object with translate(sentences, decode)."""
    if name.startswith("t2"):
        return open_model(run, precision="bfloat16" if name == "t2_bf16" else None).engine
    dtype = torch.bfloat16 if name == "hf_bf16" else torch.float32
    return PeerEngine(Path(peer), beam, tokenizer, dtype)


def _trained_work(*build_args):  # noqa: ANN002
    """A --trained Pool worker's engine: its translations of (sentences, decode)."""
    return _trained_engine(*build_args).translate


class PooledEngine:
    """A --trained engine on a Pool: translate() deals the length-sorted batches out."""

    def __init__(self, pool: Pool, tokenizer, workers: int) -> None:  # noqa: ANN001
        self.pool, self.tokenizer, self.workers, self.pids = pool, tokenizer, workers, pool.pids

    def translate(self, sentences: list[str], decode) -> list[str]:  # noqa: ANN001
        lengths = [len(r) for r in encode_source(self.tokenizer, sentences, False)]
        shares = self.pool.deal(lengths, decode.batch_size)
        texts = self.pool.map([([sentences[i] for i in rows], decode) for rows in shares])
        out = [""] * len(sentences)
        for rows, share in zip(shares, texts, strict=True):
            for i, text in zip(rows, share, strict=True):
                out[i] = text
        return out


def trained(args) -> list[dict]:
    """Free decoding of trained models: t2, its CTranslate2 exports and the trained peer."""
    sources = Path(args.src).read_text(encoding="utf-8").splitlines()[: args.sentences or None]
    refs = Path(args.ref).read_text(encoding="utf-8").splitlines()[: len(sources)]
    t2 = open_model(args.trained)
    decode = replace(
        t2.cfg.decode,
        beam_size=args.beam,
        lenpen=0.6,
        length_norm="length",
        batch_size=args.batch_size,
        nbest=1,
    )
    engines = {}
    for spec in ordered(args.engines):
        name, workers = engine_spec(spec)
        if name.startswith("ct2_"):
            quant = name.removeprefix("ct2_")
            folder = Path(tempfile.mkdtemp(prefix=f"t2-ct2-{quant}-")) / "export"
            folder = export(args.trained, "ct2", folder, quantization=quant)
            engines[spec] = open_model(folder, workers=workers).engine
            continue
        build = (name, args.trained, args.peer, args.beam, t2.tokenizer)
        if workers > 1:
            pool = Pool(_trained_work, build, workers, args.threads)
            engines[spec] = PooledEngine(pool, t2.tokenizer, workers)
        else:
            engines[spec] = t2.engine if name == "t2" else _trained_engine(*build)
    print(
        f"CPU, {args.threads} threads; torch {torch.__version__}; {len(sources)} sentences of "
        f"{args.src}; beam {args.beam}, length penalty 0.6, batch {args.batch_size}; "
        f"{args.repeats} interleaved runs per engine after a warm-up"
    )
    for engine in engines.values():
        engine.translate(sources[: args.batch_size * getattr(engine, "workers", 1)], decode)
    runs, outputs = {name: Runs() for name in engines}, {}
    with Progress(args.repeats * len(engines), f"beam {args.beam}", "runs") as progress:
        for _ in range(args.repeats):
            for name, engine in engines.items():
                with PeakMemory("cpu", getattr(engine, "pids", [])) as peak:
                    start = time.perf_counter()
                    outputs[name] = engine.translate(sources, decode)
                    runs[name].walls.append(time.perf_counter() - start)
                runs[name].peak_mib = max(runs[name].peak_mib, peak.mib)
                progress.update(1)
    for engine in engines.values():
        if isinstance(engine, PooledEngine):
            engine.pool.close()
    print(
        f"{'engine':12} {'median':>7} {'range s':13} {'tokens':>7} {'tokens/s':>9} "
        f"{'vs hf':>7} {'same type':>9} {'BLEU':>6} {'chrF':>6} {'peak MiB':>9}"
    )
    records = []
    for name, r in runs.items():
        encoded = t2.tokenizer(outputs[name], add_special_tokens=False)["input_ids"]
        r.tokens = sum(map(len, encoded))
    for name, r in runs.items():
        tok_s = r.tokens / r.median
        ratio, same = ratios(name, runs, lambda x: x.tokens / x.median)
        scores = score_corpus(outputs[name], [refs]).to_dict()
        print(
            f"{name:12} {r.median:7.2f} {min(r.walls):6.2f}-{max(r.walls):<6.2f} "
            f"{r.tokens:7d} {tok_s:9.1f} {fmt_ratio(ratio):>7} {fmt_ratio(same):>9} "
            f"{scores['bleu']:6.2f} {scores['chrf']:6.2f} {r.peak_mib:9.1f}",
            flush=True,
        )
        records.append(
            {
                "engine": name,
                "median_s": r.median,
                "walls_s": r.walls,
                "tokens": r.tokens,
                "tokens_per_s": tok_s,
                "ratio_to_hf": ratio,
                "ratio_to_hf_same_precision": same,
                "peer": peer_of(name, runs),
                "bleu": scores["bleu"],
                "chrf": scores["chrf"],
                "bleu_signature": scores["bleu_signature"],
                "workers": engine_spec(name)[1],
                "peak_mib": r.peak_mib,
            }
        )
    return records
