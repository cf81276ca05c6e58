"""Shared builders for the decoding and evaluation tests (no tests here): a toy word-by-word
translation task, its tokenizer, a tiny model trained on it, and a run directory."""

from __future__ import annotations

import contextlib
import gc
import io
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerFast

from t2.config import Config, ModelConfig
from t2.data.tokenizer import train_tokenizer
from t2.model.loss import smoothed_cross_entropy
from t2.model.transformer import Transformer
from t2.rundir import RunDir, save_checkpoint

SOURCE_WORDS = "eins zwei drei vier fünf sechs sieben acht neun zehn haus baum hund katze"
TARGET_WORDS = "one two three four five six seven eight nine ten house tree dog cat"
LEXICON = dict(zip(SOURCE_WORDS.split(" "), TARGET_WORDS.split(" "), strict=True))


def toy_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """Word-by-word translations of 2..7 random words."""
    rng = random.Random(seed)
    words = sorted(LEXICON)
    pairs = []
    for _ in range(n):
        src = rng.choices(words, k=rng.randint(2, 7))
        pairs.append((" ".join(src), " ".join(LEXICON[w] for w in src)))
    return pairs


def build_tokenizer(texts: list[str], out_dir: Path, vocab_size: int = 120):
    """The project's joint BPE (special ids pad 0, bos 1, eos 2, unk 3)."""
    return train_tokenizer(texts, vocab_size, 1, False, out_dir)


def tiny_config(vocab_size: int, **model) -> Config:
    fields = dict(d_model=64, n_heads=4, d_ff=128, n_encoder_layers=2, n_decoder_layers=2)
    fields.update(model)
    return Config(model=ModelConfig(vocab_size=vocab_size, dropout=0.0, **fields))


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread, and the test machine's cores are shared: with
    several threads per process, OpenMP's spinning makes a 5 ms decode take a second."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def forkserver_workers() -> Iterator[None]:
    """Loader workers started by a fork server, not forked from this test process: a
    pytest-xdist worker runs threads of its own, and a child forked while one of them
    holds a lock can hang (once in three runs of the suite under -n 2). The server imports
    the loader's modules once, so that a worker after the first starts in milliseconds."""
    import multiprocessing

    before = multiprocessing.get_start_method(allow_none=True)
    multiprocessing.set_forkserver_preload(["t2.data.loader"])
    multiprocessing.set_start_method("forkserver", force=True)
    try:
        yield
    finally:
        multiprocessing.set_start_method(before, force=True)


@contextlib.contextmanager
def like_a_subprocess() -> Iterator[None]:
    """A t2 command run in this process as the tests' subprocesses run it (one thread, as
    OMP_NUM_THREADS=1; TOKENIZERS_PARALLELISM=false), with loader workers from a fork
    server, a fresh Accelerate state before and after, and the run's folder lock released
    at the end, as at a process's end."""
    from unittest import mock

    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    env = mock.patch.dict(os.environ, {"TOKENIZERS_PARALLELISM": "false"})
    try:
        with one_thread(), forkserver_workers(), env:
            yield
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
        gc.collect()  # the run's objects, its lock file among them, are closed


def t2_here(verb: str, *args: str) -> subprocess.CompletedProcess:
    """`python -m t2 VERB ARGS` in this process (like_a_subprocess), without a subprocess's
    ~4 s of imports: its exit status and what Python writes to stdout and stderr (C-level
    output and warnings are not captured: a test of a whole output starts a process)."""
    from t2.cli import run_script

    out, err, code = io.StringIO(), io.StringIO(), 0
    with like_a_subprocess(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            run_script(verb, list(args))
        except SystemExit as done:  # run_main always ends with sys.exit
            code = done.code
    return subprocess.CompletedProcess([verb, *args], code, out.getvalue(), err.getvalue())


def train_toy(
    model: Transformer, tokenizer, steps: int = 200, seed: int = 0, lr: float = 3e-3
) -> Transformer:
    """Fit the toy task with Adam and the project's loss (a few seconds on a CPU)."""
    torch.manual_seed(seed)
    pairs = toy_pairs(2000, seed)
    src = [tokenizer.encode(s, add_special_tokens=False) + [2] for s, _ in pairs]
    tgt = [[1] + tokenizer.encode(t, add_special_tokens=False) + [2] for _, t in pairs]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    with one_thread():
        _fit(model, opt, src, tgt, steps, random.Random(seed))
    return model.eval()


def _fit(model, opt, src, tgt, steps, rng) -> None:
    for _ in range(steps):
        idx = rng.sample(range(len(src)), 64)
        s_batch, t_batch = _pad([src[i] for i in idx]), _pad([tgt[i] for i in idx])
        logits = model(s_batch, t_batch[:, :-1])
        loss, count = smoothed_cross_entropy(logits, t_batch[:, 1:], 0, 0.1)
        opt.zero_grad()
        (loss / count).backward()
        opt.step()


def _pad(rows: list[list[int]]) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence([torch.tensor(r) for r in rows], batch_first=True)


def write_run(run: Path, model: Transformer, cfg: Config, tokenizer, steps=(100,)) -> Path:
    """A run directory as the training loop writes it: tokenizer/ and complete checkpoints."""
    tokenizer.save_pretrained(str(run / "tokenizer"))
    (run / "config.yaml").write_text(cfg.to_yaml())
    for step in steps:
        save_checkpoint(RunDir(run), step, model, cfg, {"step": step}, keep_last=100)
    return run


_CACHE: dict[str, object] = {}


def toy_run(root: Path) -> tuple[Path, Transformer, PreTrainedTokenizerFast]:
    """The trained toy model in a run directory, built once per test session."""
    if "run" not in _CACHE:
        texts = [t for pair in toy_pairs(500, 99) for t in pair]
        tokenizer = build_tokenizer(texts, root / "tok")
        cfg = tiny_config(len(tokenizer))
        torch.manual_seed(0)
        model = train_toy(Transformer(cfg.model), tokenizer)
        _CACHE["run"] = (write_run(root / "run", model, cfg, tokenizer), model, tokenizer)
    return _CACHE["run"]  # type: ignore[return-value]
