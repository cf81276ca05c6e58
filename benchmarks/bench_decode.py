"""Decoding throughput and peak memory: t2's cached greedy and beam search against Hugging
Face `generate()` on a MarianMTModel of the same size, vocabulary and maximum length.

python -m benchmarks.bench_decode [--device cuda] [--sentences 200] [--lengths reference]

Both models have random weights, so left alone their outputs would differ in length. To
compare equal work, both are forced to emit exactly the same number of tokens for every
sentence: EOS is suppressed (t2: -inf on the EOS logit; HF: a logits processor) until the
sentence's length is reached, then forced. --lengths picks that length:
- reference: the token count of the sentence's reference translation (newstest2013.en),
  as a trained model would roughly produce; sentences of a batch end at different steps;
- fixed: --max-len tokens for every sentence (no sentence ends early).
t2 emits the tokens then EOS; HF the same (its processor forces EOS at that step). The
sentences (real newstest2013 German) are batched identically for both, longest first.
Prints figures and ratios; it is not a timed test.

With --kv-heads 0,2,1 it compares t2's decoding cache and speed across key/value head counts
instead (grouped-query and multi-query attention; benchmarks/decode_cache.py):
python -m benchmarks.bench_decode --kv-heads 0,2,1 --beams 1,4

With --checkpoint RUN_DIR it times t2's beam search rules against each other instead, on a
trained model left free to end its sentences (no forcing): decode.stopping "first_k"
(fairseq's rule, t2's before 0.2), "heuristic" (t2's default) and "exact" on --src
(default: the Multi30k validation German), interleaved, with wall-time ratios to first_k:
python -m benchmarks.bench_decode --checkpoint runs/multi30k_peer --beams 4
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from benchmarks.decode_common import (
    Timing,
    compare,
    eos_masked,
    run_t2,
    t2_config,
)
from t2.data.encode import encode_source
from t2.data.tokenizer import train_tokenizer
from t2.decoding.options import DecodeConfig
from t2.decoding.search import search
from t2.model.transformer import Transformer
from t2.serve.engine import length_batches, pad_batch
from t2.specials import EOS, PAD

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("T2_SHARED_DATA", ROOT.parent / "shared" / "data"))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--sentences", type=int, default=200, help="first N lines of newstest2013.de")
    p.add_argument("--lengths", choices=("reference", "fixed"), default="reference")
    p.add_argument("--max-len", type=int, default=48, help="tokens per sentence (fixed)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--beams", default="1,4", help="comma-separated beam sizes")
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--n-heads", type=int, default=8)
    p.add_argument("--d-ff", type=int, default=2048)
    p.add_argument("--layers", type=int, default=6, help="encoder and decoder layers each")
    p.add_argument("--vocab", type=int, default=8000, help="BPE trained on mixed/train")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast for both")
    p.add_argument("--repeats", type=int, default=2, help="timed runs per setting (best kept)")
    p.add_argument(
        "--kv-heads",
        help="comma-separated model.n_kv_heads: t2's cache and speed across them instead "
        "(the first is the reference)",
    )
    p.add_argument("--checkpoint", help="a trained run: compare stopping rules on it instead")
    p.add_argument("--src", help="source file for --checkpoint (default: Multi30k val.de)")
    p.add_argument("--lenpen", type=float, default=0.6, help="alpha for --checkpoint")
    return p.parse_args()


def build_tokenizer(vocab: int):
    lines = []
    for lang in ("de", "en"):
        with open(DATA / "mixed" / f"train.{lang}", encoding="utf-8") as f:
            lines += [next(f).rstrip("\n") for _ in range(50000)]
    folder = Path(tempfile.mkdtemp()) / "tokenizer"
    return train_tokenizer(lines, vocab, 2, False, folder)


def newstest_sources(args: argparse.Namespace):
    """(tokenizer, lines, source ids) of the first --sentences lines of newstest2013.de, with
    a BPE of --vocab trained on mixed/train; exits in one line if the shared data is absent."""
    src_file = DATA / "newstest" / "newstest2013.de"
    if not src_file.is_file():
        sys.exit(f"error: {src_file} not found; set T2_SHARED_DATA to the shared data folder")
    tokenizer = build_tokenizer(args.vocab)
    lines = src_file.read_text(encoding="utf-8").split("\n")[: args.sentences]
    return tokenizer, lines, encode_source(tokenizer, lines, False)


def marian_config(args: argparse.Namespace, vocab: int, dropout: float = 0.0):
    """The Hugging Face peer: a MarianMTModel config with t2's dimensions, ReLU, sinusoidal
    positions, embeddings scaled by sqrt(d_model) and all three matrices tied."""
    from transformers import MarianConfig

    return MarianConfig(
        vocab_size=vocab,
        decoder_vocab_size=vocab,
        d_model=args.d_model,
        encoder_layers=args.layers,
        decoder_layers=args.layers,
        encoder_attention_heads=args.n_heads,
        decoder_attention_heads=args.n_heads,
        encoder_ffn_dim=args.d_ff,
        decoder_ffn_dim=args.d_ff,
        activation_function="relu",
        max_position_embeddings=1024,
        scale_embedding=True,
        dropout=dropout,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=1,
        forced_eos_token_id=None,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )


def build_models(args: argparse.Namespace, vocab: int):
    from transformers import MarianMTModel

    torch.manual_seed(0)
    t2_model = eos_masked(Transformer(t2_config(args, vocab)).to(args.device).eval())
    hf_model = MarianMTModel(marian_config(args, vocab)).to(args.device).eval()
    return t2_model, hf_model


class ForceLength(LogitsProcessor):
    """EOS impossible before a row's length, certain at it (rows: sentence-major beams)."""

    def __init__(self, lengths: torch.Tensor) -> None:
        self.lengths = lengths

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        generated = input_ids.shape[1] - 1  # minus the decoder start token
        scores[generated < self.lengths, EOS] = float("-inf")
        at = generated == self.lengths
        scores[at] = float("-inf")
        scores[at, EOS] = 0.0
        return scores


@torch.inference_mode()
def run_hf(model, src_ids: list[list[int]], lengths: list[int], beam: int, args) -> int:
    tokens = 0
    for batch in length_batches([len(r) for r in src_ids], args.batch_size):
        src = pad_batch([src_ids[i] for i in batch], args.device)
        limit = torch.tensor([lengths[i] for i in batch], device=args.device)
        force = LogitsProcessorList([ForceLength(limit.repeat_interleave(beam))])
        out = model.generate(
            input_ids=src,
            attention_mask=src.ne(PAD),
            num_beams=beam,
            do_sample=False,
            max_new_tokens=int(limit.max()) + 1,
            logits_processor=force,
            use_cache=True,
            **({"length_penalty": 0.6, "early_stopping": True} if beam > 1 else {}),
        )
        before_eos = out[:, 1:].eq(EOS).cumsum(dim=1).eq(0)  # HF pads with EOS or PAD
        tokens += int(before_eos.sum()) + out.shape[0]  # + each row's EOS
    return tokens


def report(label: str, timings: dict[str, Timing], n_sentences: int) -> None:
    for name, t in timings.items():
        print(
            f"{label:8} {name:9} {t.wall:8.2f} {t.tokens / t.wall:9.1f} "
            f"{n_sentences / t.wall:7.2f} {t.cpu:8.2f} {t.tokens / t.cpu:9.1f} "
            f"{t.peak_mib:9.1f}",
            flush=True,
        )
    if "hf" not in timings:  # stopping rules of one model, against fairseq's first_k
        first = timings["first_k"]
        for name, t in timings.items():
            if name != "first_k":
                print(
                    f"{'':8} {name}/first_k time: {t.wall / first.wall:.2f}x wall, "
                    f"{t.cpu / first.cpu:.2f}x CPU time",
                    flush=True,
                )
        if "n^alpha" in timings:  # the same rule under the other normalisation
            t, h = timings["n^alpha"], timings["heuristic"]
            print(
                f"{'':8} n^alpha/heuristic time: {t.wall / h.wall:.2f}x wall, "
                f"{t.cpu / h.cpu:.2f}x CPU time",
                flush=True,
            )
        return
    t2, hf = timings["t2"], timings["hf"]
    print(
        f"{'':8} t2/hf throughput: {(t2.tokens / t2.wall) / (hf.tokens / hf.wall):.2f}x wall, "
        f"{(t2.tokens / t2.cpu) / (hf.tokens / hf.cpu):.2f}x CPU time",
        flush=True,
    )


def target_lengths(args, tokenizer, src_ids: list[list[int]]) -> list[int]:
    """Tokens each sentence must get: its reference's, within 1 .. source length + 50."""
    if args.lengths == "fixed":
        return [args.max_len] * len(src_ids)
    refs = (DATA / "newstest" / "newstest2013.en").read_text(encoding="utf-8").split("\n")
    ref_ids = tokenizer(refs[: len(src_ids)], add_special_tokens=False)["input_ids"]
    return [min(max(len(r), 1), len(s) + 50) for r, s in zip(ref_ids, src_ids, strict=True)]


def searcher(stopping: str, norm: str = "gnmt"):
    """A t2 search of a trained model, free to end its sentences, with this stopping rule and
    length normalisation."""

    def run(model: Transformer, src_ids: list[list[int]], beam: int, args) -> int:
        tokens = 0
        for batch in length_batches([len(r) for r in src_ids], args.batch_size):
            src = pad_batch([src_ids[i] for i in batch], args.device)
            cfg = DecodeConfig(
                beam_size=beam, lenpen=args.lenpen, stopping=stopping, length_norm=norm
            )
            hyps = search(model, src, cfg)
            tokens += sum(len(h[0].tokens) + 1 for h in hyps)
        return tokens

    return run


def stopping_rules(args: argparse.Namespace) -> None:
    """Time the beam search rules (GNMT penalty) and the heuristic rule under n^alpha on a
    trained run (--checkpoint)."""
    from t2.formats.run import load_run

    bundle = load_run(args.checkpoint, device=args.device)
    model, cfg, tokenizer = bundle.t2_model(), bundle.config, bundle.tokenizer
    src_file = Path(args.src) if args.src else DATA / "multi30k" / "val.de"
    lines = [s for s in src_file.read_text(encoding="utf-8").split("\n") if s.strip()]
    src_ids = encode_source(tokenizer, lines[: args.sentences], cfg.data.src_bos)
    model.eval()
    engines = {rule: (searcher(rule), model) for rule in ("first_k", "heuristic", "exact")}
    engines["n^alpha"] = (searcher("heuristic", "length"), model)  # decode.length_norm=length
    print(
        f"{args.checkpoint}: {len(src_ids)} sentences of {src_file}; CPU, {args.threads} "
        f"threads; alpha {args.lenpen}; batch {args.batch_size}; best of {args.repeats}"
    )
    print(
        f"{'search':8} {'rule':9} {'wall s':>8} {'tokens/s':>9} {'sent/s':>7} "
        f"{'CPU s':>8} {'tok/CPU s':>9} {'peak MiB':>9}"
    )
    for beam in [int(b) for b in args.beams.split(",") if int(b) > 1]:
        report(f"beam {beam}", compare(engines, (src_ids,), beam, args), len(src_ids))


def main() -> None:
    args = parse_args()
    if args.checkpoint:
        torch.set_num_threads(args.threads)
        return stopping_rules(args)
    torch.set_num_threads(args.threads)
    tokenizer, lines, src_ids = newstest_sources(args)
    lengths = target_lengths(args, tokenizer, src_ids)
    cuda = args.device.startswith("cuda")
    device = torch.cuda.get_device_name() if cuda else f"CPU, {args.threads} threads"
    if args.kv_heads:
        from benchmarks.decode_cache import kv_heads

        print(
            f"device: {device}; {'bf16 autocast' if args.bf16 else 'fp32'}; d_model "
            f"{args.d_model}, {args.n_heads} heads, {args.layers}+{args.layers} layers; "
            f"{len(src_ids)} sentences ({args.lengths} lengths); batch {args.batch_size}; "
            f"best of {args.repeats}"
        )
        kv_heads(args, len(tokenizer), (src_ids, lengths))
        return None
    t2_model, hf_model = build_models(args, len(tokenizer))
    print(
        f"device: {device}; {'bf16 autocast' if args.bf16 else 'fp32'}; vocab {len(tokenizer)}; "
        f"d_model {args.d_model}, {args.layers}+{args.layers} layers, d_ff {args.d_ff}; "
        f"{len(lines)} sentences, avg {sum(map(len, src_ids)) / len(src_ids):.1f} source tokens; "
        f"{sum(lengths) / len(lengths):.1f} target tokens + EOS each ({args.lengths} "
        f"lengths); batch {args.batch_size}; "
        f"best of {args.repeats}"
    )
    print(
        f"{'search':8} {'engine':9} {'wall s':>8} {'tokens/s':>9} {'sent/s':>7} "
        f"{'CPU s':>8} {'tok/CPU s':>9} {'peak MiB':>9}"
    )
    engines = {"t2": (run_t2, t2_model), "hf": (run_hf, hf_model)}
    for beam in [int(b) for b in args.beams.split(",")]:
        timings = compare(engines, (src_ids, lengths), beam, args)
        report("greedy" if beam == 1 else f"beam {beam}", timings, len(src_ids))


if __name__ == "__main__":
    main()
