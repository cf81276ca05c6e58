"""Training throughput and peak memory: a t2 training step against the same step on a
Hugging Face MarianMTModel of the same size (the peer), measured in the same run.

python benchmarks/bench_train.py [--device cuda] [--max-tokens 2048] [--steps 6] [--bf16]

Both models see identical token-budget batches of real newstest2013 de->en pairs
(tokenized with a BPE trained on mixed/train), the same label-smoothed loss (0.1) on their
logits, residual dropout 0.1 and fused Adam. A step is forward, loss, backward and the
optimizer update. Prints target tokens/s, seconds per step, peak memory and the ratios.
It is not a timed test.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from bench_decode import DATA, PeakMemory, build_tokenizer, marian_config, t2_config  # noqa: E402

from t2.data import BatchSampler, collate, encode_source  # noqa: E402
from t2.model.loss import smoothed_cross_entropy  # noqa: E402
from t2.model.transformer import Transformer  # noqa: E402
from t2.progress import track  # noqa: E402


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", default="cpu")
    p.add_argument("--max-tokens", type=int, default=2048, help="token budget per batch")
    p.add_argument("--steps", type=int, default=6, help="timed steps per engine")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--n-heads", type=int, default=8)
    p.add_argument("--d-ff", type=int, default=2048)
    p.add_argument("--layers", type=int, default=6, help="encoder and decoder layers each")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast for both")
    return p.parse_args()


def batches(args: argparse.Namespace, tokenizer) -> list[dict[str, torch.Tensor]]:
    lines = {
        lang: (DATA / "newstest" / f"newstest2013.{lang}").read_text("utf-8").splitlines()
        for lang in ("de", "en")
    }
    src = encode_source(tokenizer, lines["de"], False)
    tgt = [[1, *ids, 2] for ids in tokenizer(lines["en"], add_special_tokens=False)["input_ids"]]
    keep = [i for i in range(len(src)) if len(src[i]) <= 64 and len(tgt[i]) <= 65]
    examples = [{"src_ids": src[i], "tgt_ids": tgt[i]} for i in keep]
    src_lens = [len(e["src_ids"]) for e in examples]
    tgt_lens = [len(e["tgt_ids"]) for e in examples]
    sampler = BatchSampler(src_lens, tgt_lens, args.max_tokens, 0, 1, True)
    out = []
    for indices in sampler:
        out.append(collate([examples[i] for i in indices], 0))
        if len(out) == args.warmup + args.steps:
            break
    return out


def t2_step(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(batch["src"], batch["tgt_in"])
    loss, n = smoothed_cross_entropy(logits, batch["tgt_out"], 0, 0.1)
    return loss / n


def hf_step(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(
        input_ids=batch["src"], attention_mask=batch["src"].ne(0),
        decoder_input_ids=batch["tgt_in"],
    ).logits  # fmt: skip
    loss, n = smoothed_cross_entropy(logits, batch["tgt_out"], 0, 0.1)
    return loss / n


def measure(model, step, work: list[dict], args) -> tuple[float, float, float]:
    """(seconds per step, target tokens per second, peak MiB) over the timed steps."""
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    autocast = torch.autocast(args.device.split(":")[0], torch.bfloat16) if args.bf16 else None
    work = [{k: v.to(args.device) for k, v in b.items()} for b in work]

    def run(batch: dict) -> None:
        with autocast or nullcontext():
            loss = step(model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for batch in work[: args.warmup]:
        run(batch)
    timed = work[args.warmup :]
    tokens = sum(int(b["tgt_out"].ne(0).sum()) for b in timed)
    with PeakMemory(args.device) as peak:
        start = time.perf_counter()
        for batch in track(timed, len(timed), "timed steps", "steps"):
            run(batch)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    return seconds / len(timed), tokens / seconds, peak.mib


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    from transformers import MarianMTModel

    tokenizer = build_tokenizer(args.vocab)
    vocab = len(tokenizer)
    work = batches(args, tokenizer)
    torch.manual_seed(0)
    engines = {
        "t2": (Transformer(t2_config(args, vocab, dropout=0.1)).to(args.device), t2_step),
        "hf": (MarianMTModel(marian_config(args, vocab, dropout=0.1)).to(args.device), hf_step),
    }
    precision = "bf16 autocast" if args.bf16 else "fp32"
    print(f"device {args.device}, {args.threads} threads, {precision}; d_model {args.d_model}, "
          f"{args.layers}+{args.layers} layers, vocab {vocab}; {args.steps} timed steps of "
          f"<= {args.max_tokens} tokens")  # fmt: skip
    results = {}
    for name, (model, step) in engines.items():
        n_params = sum(p.numel() for p in model.parameters())
        results[name] = measure(model, step, work, args)
        s, tok, mib = results[name]
        print(f"{name}: {n_params:,} parameters, {s:.3f} s/step, {tok:,.0f} target tokens/s, "
              f"peak {mib:,.0f} MiB")  # fmt: skip
    (_, tok1, mib1), (_, tok2, mib2) = results["t2"], results["hf"]
    print(f"t2 / hf: throughput {tok1 / tok2:.2f}x, peak memory {mib1 / max(mib2, 1e-9):.2f}x")


if __name__ == "__main__":
    main()
