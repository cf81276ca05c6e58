"""Train the peer, a Hugging Face MarianMTModel of a recipe's size, on the recipe's own data,
tokenizer and batches, and score it on the recipe's validation set with sacreBLEU.

python -m benchmarks.train_peer --recipe multi30k_peer --out runs/multi30k_peer_hf
python train.py --recipe multi30k_peer --out runs/multi30k_peer      # t2, the same setting

Everything but the model is t2's, so the comparison isolates the model: the same joint BPE
(trained with the same seed, so the same vocabulary), the same token-budget batches in the
same order, the same label-smoothed loss normalised by target tokens, Adam with the same
betas, eps, weight-decay groups, warm-up and inverse-square-root schedule, and the same
gradient clipping. The Marian model matches t2's base architecture (post-norm, sinusoidal
positions, ReLU, embeddings scaled by sqrt(d_model), all three matrices tied).

The trained peer is decoded with its own `generate()` (beam search with transformers'
length penalty, sum log p / length^alpha, and greedy), with t2's maximum length rule
(source length + 50), and scored with the same sacreBLEU settings as `t2 evaluate`.
Writes OUT/results.json, OUT/metrics.jsonl, OUT/hyps.*.txt and the model (safetensors).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from benchmarks.bench_decode import marian_config
from t2.data.encode import encode_pairs, encode_source
from t2.data.loader import Batches
from t2.data.pipeline import load_pairs
from t2.data.tokenizer import prepare_tokenizer
from t2.evaluation.scoring import score_corpus
from t2.model.loss import smoothed_cross_entropy
from t2.progress import Progress, track
from t2.recipes import load_config
from t2.train.optim import build_optimizer, build_scheduler
from t2.train.plan import planned
from t2.train.setup import split_loader


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", default="multi30k_peer", help="t2 recipe giving the setting")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--lenpen", type=float, default=0.6, help="transformers' length_penalty")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per decoding batch")
    p.add_argument("--limit", type=int, default=0, help="score the first N valid pairs (0: all)")
    return p.parse_args()


class Peer(torch.nn.Module):
    """MarianMTModel behind t2's forward(src, tgt_in) -> logits."""

    def __init__(self, cfg, vocab: int, pad_id: int) -> None:
        super().__init__()
        from transformers import MarianMTModel

        shape = SimpleNamespace(
            d_model=cfg.model.d_model,
            n_heads=cfg.model.n_heads,
            d_ff=cfg.model.d_ff,
            layers=cfg.model.n_encoder_layers,
        )
        if cfg.model.n_decoder_layers != shape.layers:
            raise SystemExit("the peer script expects as many decoder as encoder layers")
        self.marian = MarianMTModel(marian_config(shape, vocab, dropout=cfg.model.dropout))
        self.pad_id = pad_id

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        mask = src.ne(self.pad_id)
        return self.marian(input_ids=src, attention_mask=mask, decoder_input_ids=tgt_in).logits


def train(args: argparse.Namespace, cfg, tokenizer, out: Path) -> tuple[Peer, float]:
    cfg = planned(cfg, 1)[0]  # the batch plan t2 makes on this machine for one process
    pairs = load_pairs(cfg.data, "train", cfg.train.seed)
    train_ds = encode_pairs(pairs, tokenizer, cfg.data, "train")
    torch.manual_seed(cfg.train.seed)
    model = Peer(cfg, len(tokenizer), tokenizer.pad_token_id)
    optimizer = build_optimizer(model, cfg.train, cfg.model.d_model)
    scheduler = build_scheduler(optimizer, cfg.train, cfg.model.d_model)
    _, loader = split_loader(train_ds, cfg, tokenizer.pad_token_id, True, 0, 1)
    batches = Batches(loader)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"peer: MarianMTModel, {n_params:,} parameters, {cfg.train.max_steps} steps", flush=True)
    model.train()
    start, loss_sum, tokens = time.perf_counter(), 0.0, 0
    # a bar on a terminal; the JSON record of each logged step is the log file's line
    steps = track(
        range(1, cfg.train.max_steps + 1),
        cfg.train.max_steps,
        "peer",
        "steps",
        every_s=float("inf"),
    )
    with (out / "metrics.jsonl").open("w", encoding="utf-8") as log:
        for step in steps:
            micro = [next(batches) for _ in range(cfg.train.accumulate)]
            n = sum(int(b["tgt_out"].ne(tokenizer.pad_token_id).sum()) for b in micro)
            for b in micro:
                logits = model(b["src"], b["tgt_in"])
                loss, _ = smoothed_cross_entropy(
                    logits, b["tgt_out"], tokenizer.pad_token_id, cfg.train.label_smoothing
                )
                (loss / n).backward()
                loss_sum += float(loss.detach())
            if cfg.train.clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            tokens += n
            if step % cfg.train.log_every == 0 or step == cfg.train.max_steps:
                record = {
                    "step": step,
                    "loss": loss_sum / tokens,
                    "seconds": time.perf_counter() - start,
                }
                print(json.dumps(record), flush=True)
                log.write(json.dumps(record) + "\n")
                loss_sum, tokens = 0.0, 0
    return model, time.perf_counter() - start


@torch.no_grad()
def generate(
    model: Peer, tokenizer, sources: list[str], cfg, beam: int, alpha: float, batch_size: int
) -> list[str]:
    """Translations by MarianMTModel.generate(), batched by length, in input order."""
    model.eval()
    src_ids = encode_source(tokenizer, sources, cfg.data.src_bos)
    order = sorted(range(len(src_ids)), key=lambda i: -len(src_ids[i]))
    out: list[str] = [""] * len(src_ids)
    pad = tokenizer.pad_token_id
    progress = Progress(len(order), f"peer beam {beam}", "sentences")
    for s in range(0, len(order), batch_size):
        idx = order[s : s + batch_size]
        rows = [torch.tensor(src_ids[i]) for i in idx]
        src = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=pad)
        max_new = int(cfg.decode.max_len_a * max(len(r) for r in rows)) + cfg.decode.max_len_b
        ids = model.marian.generate(
            input_ids=src,
            attention_mask=src.ne(pad),
            num_beams=beam,
            length_penalty=alpha,
            max_new_tokens=max_new + 1,
            early_stopping=False,
            do_sample=False,
        )
        texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
        for i, text in zip(idx, texts, strict=True):
            out[i] = text.strip()
        progress.update(len(idx))
    progress.close()
    return out


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_config(args.recipe, args.set)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = prepare_tokenizer(cfg.data, out / "tokenizer", cfg.train.seed, reuse=False)
    model, train_seconds = train(args, cfg, tokenizer, out)
    model.marian.save_pretrained(out / "model", safe_serialization=True)
    valid = load_pairs(cfg.data, "valid", cfg.train.seed)
    n = args.limit or len(valid)
    sources, refs = list(valid["src"])[:n], [list(valid["tgt"])[:n]]
    results = {
        "recipe": args.recipe,
        "overrides": args.set,
        "threads": args.threads,
        "train_seconds": train_seconds,
        "valid": {},
    }
    for name, beam in (("greedy", 1), (f"beam{args.beam_size}", args.beam_size)):
        start = time.perf_counter()
        hyps = generate(model, tokenizer, sources, cfg, beam, args.lenpen, args.batch_size)
        seconds = time.perf_counter() - start
        (out / f"hyps.{name}.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
        scores = score_corpus(hyps, refs).to_dict()
        results["valid"][name] = {
            **scores,
            "decode_seconds": seconds,
            "beam_size": beam,
            "length_penalty": args.lenpen,
        }
        print(
            f"peer {name}: {scores['bleu_detail']}  chrF {scores['chrf']:.2f}  ({seconds:.0f} s)",
            flush=True,
        )
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
