"""t2 export --format ct2: every registered component, in a pairwise covering of the
combinations, exported to CTranslate2 gives t2's greedy token ids and log-probabilities;
beam search agrees on the 1-best; the CLI translates and evaluates with the export; what
cannot be exported fails in one line."""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from covering import unmet, with_residuals
from toy_task import build_tokenizer, toy_pairs, write_run

from t2.cli import main, run_script
from t2.config import Config, DataConfig, DecodeConfig, ModelConfig
from t2.data.encode import encode_source
from t2.decoding.search import search
from t2.errors import CheckpointError, ConfigError, DataError
from t2.exporting import export
from t2.model.transformer import Transformer
from t2.opener import open_model
from t2.registry import FFN, NORM, POSITIONAL
from t2.serve.ct2 import EXPORT_META, MAPPED, ExportError, check_exportable
from t2.serve.engine import pad_batch

pytest.importorskip("ctranslate2")

pytestmark = pytest.mark.usefixtures("single_thread")

GREEDY = DecodeConfig(beam_size=1, max_len_a=1.0, max_len_b=6, batch_size=16)
TIES = ("all", "decoder", "none")


def exportable(registry) -> list[str]:
    """The names CTranslate2 expresses, by their facts; refused ones are tested below."""
    return [n for n in registry.names() if not registry.facts(n).ct2.unexpressed]


EXPORTABLE = exportable(POSITIONAL)  # a refused scheme (alibi) is tested below
PLACES = ("post", "pre")


def covering() -> list[tuple[str, str, str, str, str]]:
    """Every exportable positional scheme with every feed-forward, the norm and the
    placement varying so that each pair of values of any two axes meets (a pairwise
    covering: CTranslate2 maps each component on its own, so an error shows in a pair), and
    each row with an exportable residual connection such that every one meets every other
    component's values (tests/covering.py)."""
    norms, rows = exportable(NORM), []
    for (p, positional), (f, ffn) in itertools.product(
        enumerate(EXPORTABLE), enumerate(FFN.names())
    ):
        norm, place = norms[(p + f) % len(norms)], PLACES[(p + f // 2) % 2]
        rows.append((positional, norm, ffn, place))
    return with_residuals(rows, ct2=True)


COMBINATIONS = covering()


def export_run(run: Path, out: Path, quant: str = "float32") -> Path:
    return export(run, "ct2", out, quantization=quant)


def open_engine(path: Path, engine: str | None = None, **options):
    return open_model(path, engine=engine, **options).engine


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    """A real t2 BPE of ~60 tokens and 12 source sentences of 1 to 9 tokens, as ids."""
    texts = [t for pair in toy_pairs(300, 3) for t in pair]
    tokenizer = build_tokenizer(texts, tmp_path_factory.mktemp("tok") / "tok", vocab_size=60)
    sentences = [s for s, _ in toy_pairs(12, 7)]
    return tokenizer, sentences


def randomise(model: Transformer, seed: int, gain: float = 4.0) -> None:
    """Every parameter random (biases, norm gains and betas too, so a misplaced one shows);
    sublayer matrices `gain` times Glorot's scale so that outputs depend on the source."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                tables = ("embed", "output", "positional")
                scale = 1.0 if any(t in name for t in tables) else gain
                p.copy_(torch.randn(p.shape, generator=gen) * scale / p.shape[1] ** 0.5)
            elif name.endswith("weight"):  # norm gains; QK-norm's x2 (its scores x4, as gain)
                sharp = 2.0 if "q_norm" in name or "k_norm" in name else 1.0
                p.copy_(sharp * (1 + 0.3 * torch.randn(p.shape, generator=gen)))
            else:
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))


def plant_eos(model: Transformer, seed: int, share: float = 0.2) -> None:
    """Point EOS's output row along the decoder's mean final state, scaled so that EOS is the
    argmax at about `share` of teacher-forced positions: random models end sentences."""
    gen = torch.Generator().manual_seed(seed)
    vocab = model.cfg.vocab_size
    src = torch.randint(4, vocab, (16, 8), generator=gen)
    tgt = torch.randint(4, vocab, (16, 12), generator=gen)
    src[:, -1], tgt[:, 0] = 2, 1
    states = []
    hook = model.decoder_norm.register_forward_hook(lambda m, i, o: states.append(o))
    with torch.no_grad():
        model(src, tgt)
        hook.remove()
        h = states[0].reshape(-1, model.cfg.d_model)
        weight = (model.output if model.output is not None else model.tgt_embed).weight
        direction = h.mean(0) / h.mean(0).norm()
        others = (h @ weight.T).index_fill(1, torch.tensor([2]), -1e9).max(-1).values
        along = h @ direction
        needed = torch.where(along > 0, others / along, torch.full_like(along, 1e9))
        weight[2] = torch.quantile(needed, share) * direction


def decisive(model: Transformer, ids: list[list[int]], margin: float = 5e-4) -> bool:
    """Whether at every greedy step t2's chosen token leads the next best by `margin` in
    log-probability: two engines' float32 roundings (1e-4 apart at 18 positions with
    relative positions, 2e-4 at 30) then cannot swap them."""
    for source, tokens in zip(_SOURCES, ids, strict=True):
        tgt_in = torch.tensor([[1, *tokens]])
        with torch.no_grad():
            logp = F.log_softmax(model(pad_batch([source], "cpu"), tgt_in).double(), -1)[0]
        top = logp.topk(2).values  # (steps, 2): the last step chose EOS or hit the limit
        if (top[:, 0] - top[:, 1]).min() < margin:
            return False
    return True


def tiny_model(vocab_size: int, seed: int, **model) -> tuple[Transformer, list[list[int]]]:
    """The first of eight random models whose greedy outputs on the test sources (returned
    too) are non-degenerate and decisive: at least 2 of 12 end by EOS before the length
    limit, at least 4 differ, and no step is a near-tie (`decisive`)."""
    cfg = ModelConfig(
        vocab_size=vocab_size,
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
        **model,
    )
    limits = [min(len(s) + GREEDY.max_len_b, cfg.max_positions - 1) for s in _SOURCES]
    for attempt in range(8):
        net = Transformer(cfg).eval()
        randomise(net, 1000 * attempt + seed)
        plant_eos(net, 1000 * attempt + seed)
        ids = [h[0].tokens for h in search(net, pad_batch(_SOURCES, "cpu"), GREEDY)]
        ended = sum(len(h) < n for h, n in zip(ids, limits, strict=True))
        if ended >= 2 and len({tuple(h) for h in ids}) >= 4 and decisive(net, ids):
            return net, ids
    raise AssertionError(f"no non-degenerate random model for {model}")


_SOURCES: list[list[int]] = []  # the sweep's source ids, with or without BOS


def export_model(model: Transformer, tokenizer, root: Path, src_bos: bool, quant="float32"):
    cfg = Config(model=model.cfg, data=DataConfig(src_bos=src_bos))
    run = write_run(root / "run", model, cfg, tokenizer)
    return open_engine(export_run(run, root / "ct2", quant))


@pytest.mark.parametrize(("positional", "norm", "ffn", "place", "residual"), COMBINATIONS)
def test_every_combination_exports_with_identical_greedy_ids(
    vocab, tmp_path, positional, norm, ffn, place, residual
):
    """Tie options, bias, BOS in the source, norm epsilon, the sinusoid / RoPE base, the
    learned table's size (3 rows past the longest source, so long outputs stop at the table),
    the key/value heads and QK-norm vary along the sweep, so each meets every positional
    scheme; log-probabilities are checked on random targets at every position."""
    tokenizer, sentences = vocab
    i = COMBINATIONS.index((positional, norm, ffn, place, residual))
    src_bos = (i // 2) % 2 == 0
    _SOURCES[:] = encode_source(tokenizer, sentences, src_bos)
    short_table = max(13, max(map(len, _SOURCES)) + 3)
    options = dict(
        tie_embeddings=TIES[i % 3],
        bias=i % 2 == 0,
        norm_eps=(1e-5, 0.1)[i % 4 // 3],
        rope_base=(1e4, 500.0)[i % 5 // 4],
        max_positions=short_table if positional == "learned" and i % 2 else 1024,
        n_kv_heads=(0, 1, 2)[i % 3],  # of 4 heads: one each, multi-query, grouped
        qk_norm=(i // 3) % 2 == 1,
    )
    components = dict(positional=positional, norm=norm, ffn=ffn, residual=residual)
    model, ours = tiny_model(len(tokenizer), i, norm_position=place, **components, **options)
    engine = export_model(model, tokenizer, tmp_path, src_bos)
    assert [h[0].tokens for h in engine.search(_SOURCES, GREEDY)] == ours
    gen = torch.Generator().manual_seed(i)
    targets = torch.randint(3, len(tokenizer), (len(_SOURCES), 9), generator=gen)
    _same_log_probs(model, engine, targets)


def _log_probs(model: Transformer, targets: torch.Tensor) -> torch.Tensor:
    """t2's teacher-forced log-probabilities of `targets` then EOS, (B, T+1), in float64."""
    tgt_in = torch.cat([torch.ones(len(targets), 1, dtype=torch.long), targets], 1)
    gold = torch.cat([targets, torch.full((len(targets), 1), 2)], 1)
    with torch.no_grad():
        logp = F.log_softmax(model(pad_batch(_SOURCES, "cpu"), tgt_in).double(), -1)
    return logp.gather(2, gold[..., None])[..., 0]


def _same_log_probs(model: Transformer, engine, targets: torch.Tensor) -> None:
    """CTranslate2's teacher-forced log-probabilities (every position, random targets) are
    as close to t2's in float64 as t2's own float32 ones: a wrong component is not (GELU's
    tanh form instead of erf is 30x further, a swapped bias or norm far more). Over the 64
    combinations of the full product (when it was measured) CTranslate2's distance was
    0.1-5.8x t2's float32 one: rounding alone, which moves with the EOS row that plant_eos
    sets from a float32 forward pass: hence 8."""
    tok = engine.tokenizer
    head = 1 if engine.src_bos else 0
    source = [tok.convert_ids_to_tokens(s[head:-1]) for s in _SOURCES]
    scored = engine.translator.score_batch(
        source, [tok.convert_ids_to_tokens(t) for t in targets.tolist()]
    )
    theirs = torch.tensor([s.log_probs for s in scored], dtype=torch.float64)
    ours = _log_probs(model, targets)
    exact = _log_probs(copy.deepcopy(model).double(), targets)
    assert (theirs - exact).abs().max() <= 8 * (ours - exact).abs().max() + 1e-5


@pytest.fixture(scope="module")
def exported(toy, tmp_path_factory):
    """The shared toy run (a model trained for seconds) and its float32 export."""
    run = toy[0]
    return run, export_run(run, tmp_path_factory.mktemp("export") / "ct2")


def test_the_export_folder_holds_what_translation_needs(exported):
    run, out = exported
    names = {p.name for p in out.iterdir()}
    assert {
        "model.bin",
        "config.json",
        "shared_vocabulary.json",
        "tokenizer.json",
        EXPORT_META,
    } <= names
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp left
    meta = json.loads((out / EXPORT_META).read_text())
    cfg = Config.from_yaml((run / "config.yaml").read_text())
    assert meta["quantization"] == "float32" and meta["src_bos"] is False
    assert meta["decode"] == cfg.to_dict()["decode"] and meta["max_positions"] == 1024
    assert Path(meta["checkpoint"]).name == "step-0000100"
    ct2_config = json.loads((out / "config.json").read_text())
    assert ct2_config["decoder_start_token"] == "<s>" and ct2_config["add_source_eos"] is True
    assert ct2_config["layer_norm_epsilon"] == cfg.model.norm_eps


def test_beam_search_agrees_with_t2_on_the_1best(toy, exported):
    """Measured on 200 sentences of the toy task: greedy ids identical, beam 4 the same 1-best
    under fairseq's stopping rule (CTranslate2's) and under t2's defaults."""
    run, out = exported
    ct2, t2 = open_engine(out, "ct2"), open_engine(run, "t2")
    sentences = [s for s, _ in toy_pairs(200, 77)]
    greedy = DecodeConfig(beam_size=1, batch_size=64)
    ours, theirs = t2.translate_nbest(sentences, greedy), ct2.translate_nbest(sentences, greedy)
    assert [h[0][0] for h in theirs] == [h[0][0] for h in ours]
    # scores differ by the mass the model puts on PAD and BOS: CTranslate2 removes them
    # before normalising, t2 after (label smoothing gives each ~1e-3 per step)
    assert max(abs(a[0][1] - b[0][1]) for a, b in zip(ours, theirs, strict=True)) < 0.05
    for norm, stopping in (("length", "first_k"), ("gnmt", "first_k"), ("gnmt", "heuristic")):
        beam = DecodeConfig(beam_size=4, lenpen=0.6, length_norm=norm, stopping=stopping)
        a, b = t2.translate(sentences, beam), ct2.translate(sentences, beam)
        agree = sum(x == y for x, y in zip(a, b, strict=True)) / len(sentences)
        assert agree >= 0.97, (norm, stopping, agree)


def test_translate_and_evaluate_commands_use_the_export(toy, exported, tmp_path, capsys):
    run, out = exported
    pairs = toy_pairs(9, 21)
    pairs.insert(4, ("", ""))  # a blank line stays blank
    src, ref = tmp_path / "test.de", tmp_path / "test.en"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    ref.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    for engine, checkpoint in (("ct2", out), ("t2", run)):
        args = [
            "--checkpoint",
            str(checkpoint),
            "--engine",
            engine,
            "--device",
            "cpu",
            "--beam-size",
            "1",
        ]
        with pytest.raises(SystemExit) as done:
            main(["translate", *args, "--input", str(src), "--output", str(tmp_path / engine)])
        assert done.value.code == 0
        with pytest.raises(SystemExit) as done:
            run_script(
                "evaluate",
                [
                    *args,
                    "--src",
                    str(src),
                    "--ref",
                    str(ref),
                    "--show",
                    "0",
                    "--out",
                    str(tmp_path / f"eval-{engine}"),
                ],
            )
        assert done.value.code == 0
    assert (tmp_path / "ct2").read_text() == (tmp_path / "t2").read_text()
    assert (tmp_path / "ct2").read_text().split("\n")[4] == ""
    ct2, t2 = (
        json.loads((tmp_path / f"eval-{e}" / "scores.json").read_text()) for e in ("ct2", "t2")
    )
    assert ct2["engine"] == "ct2" and ct2["checkpoint"] == str(out)
    for key in ("bleu", "chrf", "bleu_signature", "chrf_signature", "n_sentences"):
        assert ct2[key] == t2[key], key
    assert t2["bleu"] > 50  # the toy model translates: equal scores are not two zeros


@pytest.mark.parametrize("quant", ["int8", "float16"])
def test_a_quantized_export_loads_and_translates(toy, exported, tmp_path, quant):
    run, full = exported
    out = export_run(run, tmp_path / quant, quant)
    assert json.loads((out / EXPORT_META).read_text())["quantization"] == quant
    assert (out / "model.bin").stat().st_size < 0.6 * (full / "model.bin").stat().st_size
    sentences = [s for s, _ in toy_pairs(100, 5)]
    greedy = DecodeConfig(beam_size=1)
    a = open_engine(full, "ct2").translate(sentences, greedy)
    b = open_engine(out, "ct2").translate(sentences, greedy)
    assert sum(x == y for x, y in zip(a, b, strict=True)) >= 90  # the toy task, nearly all
    computed = open_engine(out, "ct2", precision="float32").translator.compute_type
    assert computed == "float32"  # --precision: CTranslate2's compute type at load


def test_the_sweep_meets_every_exportable_residual_connection_with_every_component():
    assert unmet(COMBINATIONS, ct2=True) == []


def test_deepnorm_exports_exactly_at_a_large_epsilon(vocab, tmp_path):
    """DeepNorm's alpha is folded into the scale of CTranslate2's stream, not into the
    sublayer with the norm's epsilon rescaled (t2.serve.ct2_residual): exact at any
    epsilon, where the other fold, LN(x + f / alpha) for LN(alpha x + f), is not."""
    tokenizer, sentences = vocab
    _SOURCES[:] = encode_source(tokenizer, sentences, False)
    model, ours = tiny_model(len(tokenizer), 5, residual="deepnorm", norm_eps=0.5, bias=False)
    alpha = model.decoder[0].res_self.connection.alpha  # (3 M)^(1/4), 1.57 for M = 2
    x, f = torch.randn(4, 32), torch.randn(4, 32)
    folded = F.layer_norm(x + f / alpha, (32,), eps=0.5)
    assert (F.layer_norm(alpha * x + f, (32,), eps=0.5) - folded).abs().max() > 1e-2
    engine = export_model(model, tokenizer, tmp_path, False)
    assert [h[0].tokens for h in engine.search(_SOURCES, GREEDY)] == ours
    targets = torch.randint(3, len(tokenizer), (len(_SOURCES), 9), generator=torch.Generator())
    _same_log_probs(model, engine, targets)


def test_a_connection_that_cannot_be_folded_is_refused_in_one_line():
    """A scaled stream before pre-norm sublayers does not cancel; a connection that is not
    a x + b f(x) has nothing to fold (t2.serve.ct2_residual)."""
    from t2.model.residual import Connection, Depth, build_residual
    from t2.serve.ct2_residual import fold_stack

    deepnorm = build_residual("deepnorm", 8, Depth(2, 2, False), "post")
    with pytest.raises(ExportError, match="scales the stream before pre-norm sublayers"):
        fold_stack([], [None], [deepnorm], True, "deepnorm")
    with pytest.raises(ExportError, match="'gate' is not a x \\+ b f\\(x\\)"):
        fold_stack([], [None], [Connection(8, Depth(2, 2, False))], False, "gate")


@pytest.mark.parametrize(
    "key, name",
    [(k, n) for k, reg in MAPPED for n in reg.names() if reg.facts(n).ct2.unexpressed],
)
def test_every_component_ctranslate2_cannot_express_is_refused_in_one_line(key, name):
    with pytest.raises(ExportError) as err:
        check_exportable(ModelConfig(**{key: name}))
    message = str(err.value)
    assert message.startswith(f"model.{key}={name!r} has no CTranslate2 equivalent (")
    assert message.endswith(f"; export a run with another model.{key}") and "\n" not in message


def test_a_component_ctranslate2_cannot_express_fails_in_one_line(vocab, tmp_path, capsys):
    tokenizer, _ = vocab
    cfg = Config(
        model=ModelConfig(
            vocab_size=len(tokenizer), d_model=16, n_heads=2, d_ff=32, positional="alibi"
        )
    )
    run = write_run(tmp_path / "run", Transformer(cfg.model), cfg, tokenizer)
    with pytest.raises(ExportError, match=r"model.positional='alibi' has no CTranslate2 equiv"):
        export_run(run, tmp_path / "out")
    with pytest.raises(SystemExit) as done:
        main(["export", str(run), "--format", "ct2", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1 and "decoder-only" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # nothing half-written
    no_encoder = replace(cfg.model, positional="rope", n_encoder_layers=0)
    with pytest.raises(ExportError, match="model.n_encoder_layers=0"):
        check_exportable(no_encoder)


def test_engine_and_folder_mismatches_fail_in_one_line(exported):
    run, out = exported
    with pytest.raises(CheckpointError, match="is a ct2 folder, not one --engine t2 reads"):
        open_engine(out, "t2")
    with pytest.raises(CheckpointError, match="is a run folder, not one --engine ct2 reads"):
        open_engine(run, "ct2")
    with pytest.raises(ConfigError, match="drop --average-last, or export an average"):
        open_engine(out, "ct2", average_last=2)
    assert open_engine(out).translate(["eins"], DecodeConfig()) == open_engine(
        out, "ct2"
    ).translate(["eins"], DecodeConfig())  # the folder says what it is: --engine optional
    with pytest.raises(ExportError, match="--search sample runs on t2's own engine"):
        open_engine(out).translate(["eins"], DecodeConfig(search="sample"))
    with pytest.raises(ExportError, match="exists and is not a t2 export"):
        export_run(run, run)
    engine = open_engine(out, "ct2")
    with pytest.raises(DataError, match="line 2 has 1[0-9]{3} tokens"):
        engine.translate(["eins", "zwei " * 1100], DecodeConfig(beam_size=1))


def test_workers_decode_batches_at_once_with_the_same_output(toy, exported, tmp_path, capsys):
    """--workers N: CTranslate2's inter_threads, the batches queued at once; every batch is
    the one a single worker decodes, so the outputs are the same."""
    run, out = exported
    one, two = open_engine(out, "ct2"), open_engine(out, "ct2", workers=2)
    assert (one.translator.num_translators, two.translator.num_translators) == (1, 2)
    sentences = [s for s, _ in toy_pairs(120, 31)]
    for decode in (
        DecodeConfig(beam_size=1, batch_size=16),
        DecodeConfig(beam_size=4, lenpen=0.6, batch_size=16, nbest=2),
    ):
        assert two.translate_nbest(sentences, decode) == one.translate_nbest(sentences, decode)
    src = tmp_path / "test.de"
    src.write_text("".join(s + "\n" for s in sentences[:20]), encoding="utf-8")
    written = {}
    for workers in ("1", "2"):
        args = [
            "translate",
            "--checkpoint",
            str(out),
            "--engine",
            "ct2",
            "--device",
            "cpu",
            "--batch-size",
            "4",
            "--workers",
            workers,
            "--input",
            str(src),
        ]
        with pytest.raises(SystemExit) as done:
            main([*args, "--output", str(tmp_path / workers)])
        assert done.value.code == 0
        written[workers] = (tmp_path / workers).read_text(encoding="utf-8").splitlines()
    assert len(written["2"]) == 20 and written["2"] == written["1"]
    with pytest.raises(ConfigError, match="--workers 0: pass a number of workers of at least 1"):
        open_engine(out, "ct2", workers=0)
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(["translate", "--checkpoint", str(run), "--workers", "2", "--input", str(src)])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1 and "--workers is for CTranslate2" in err


def test_a_batch_decodes_as_its_sentences_do_alone_at_their_own_limits(exported):
    """A batch goes to CTranslate2 in one call up to its longest limit; a sentence whose
    output reached its own limit is decoded again at that limit, so each sentence gets what
    it gets alone (t2 ends an output at its limit): the same tokens and the same scores."""
    _, out = exported
    engine = open_engine(out, "ct2")
    src_ids = encode_source(engine.tokenizer, [s for s, _ in toy_pairs(24, 8)], False)
    short = {"max_len_a": 0.5, "max_len_b": 1}
    for decode in (
        DecodeConfig(beam_size=1, **short),
        DecodeConfig(beam_size=4, nbest=4, lenpen=0.6, **short),
        DecodeConfig(beam_size=4, nbest=2, lenpen=0.0, **short),
    ):
        limits = engine.limits(src_ids, decode)
        assert len(set(limits)) > 2  # the batch mixes limits
        batch = engine.search(src_ids, decode)
        reached = 0
        for row, hyps in zip(src_ids, batch, strict=True):
            alone = engine.search([row], decode)[0]
            assert [h.tokens for h in hyps] == [h.tokens for h in alone]
            assert [h.score for h in hyps] == pytest.approx([h.score for h in alone], abs=1e-4)
            reached += len(hyps[0].tokens) == engine.limits([row], decode)[0]
        assert reached >= 3  # outputs cut at their limit are among them


def test_beam_search_without_a_length_penalty_keeps_each_sentences_own_limit(vocab, tmp_path):
    """With lenpen 0 CTranslate2 ends a sentence once its best beam has ended, so a batch
    decoded to its longest limit may return a short hypothesis where, alone at its own
    limit, beams ended there by force would rank higher: such sentences go again."""
    tokenizer, _ = vocab
    cfg = ModelConfig(
        vocab_size=len(tokenizer),
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
    )
    net = Transformer(cfg).eval()
    randomise(net, 3, 1.0)
    plant_eos(net, 3, share=0.3)
    engine = export_model(net, tokenizer, tmp_path, False)
    gen = torch.Generator().manual_seed(5)
    sources = [
        torch.randint(4, len(tokenizer), (int(n),), generator=gen).tolist() + [2]
        for n in torch.randint(1, 16, (96,), generator=gen)
    ]
    decode = DecodeConfig(beam_size=4, nbest=2, lenpen=0.0, max_len_a=0.5, max_len_b=0)
    for start in range(0, len(sources), 32):
        rows = sources[start : start + 32]
        for row, hyps in zip(rows, engine.search(rows, decode), strict=True):
            assert [h.tokens for h in hyps] == [h.tokens for h in engine.search([row], decode)[0]]


class _NoTranslator:
    def translate_batch(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        raise AssertionError("decoded a search the engine does not know")


def test_a_search_the_engine_does_not_know_is_refused_not_run_as_beam(vocab):
    """CTranslate2's engine reads each search strategy's own CTranslate2 expression; a name
    it has none for is an error, never beam search."""
    from t2.serve.ct2_engine import Ct2Engine

    engine = Ct2Engine(_NoTranslator(), vocab[0], False, None)
    decode = DecodeConfig()
    object.__setattr__(decode, "search", "diverse")  # a name no registry holds
    with pytest.raises(ConfigError, match="unknown search strategy .*'diverse'"):
        engine.decode_ids([[5, 6, 2]], decode)


def test_a_feed_forward_whose_facts_name_no_activation_is_refused(monkeypatch):
    """CTranslate2's spec would take ReLU by default; facts without an activation fail."""
    from t2.facts import Ct2, FfnFacts
    from t2.model.ffn.gelu import GELUFeedForward
    from t2.registry import FFN
    from t2.serve.ct2 import _stack_options

    monkeypatch.setattr(FFN, "_entries", dict(FFN._entries))
    facts = FfnFacts(gated=False, ct2=Ct2({"ffn_glu": False}))
    FFN.register("silent_probe", facts)(type("Probe", (GELUFeedForward,), {}))
    with pytest.raises(ExportError, match="model.ffn='silent_probe' names no CTranslate2 act"):
        _stack_options(ModelConfig(ffn="silent_probe"))
