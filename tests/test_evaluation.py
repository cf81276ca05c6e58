"""evaluate_model.py and its package: scores equal sacreBLEU's own command line, outputs,
test-set routes and the one-line errors."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import torch
from sacrebleu.dataset import DATASETS
from toy_task import (
    build_tokenizer,
    tiny_config,
    toy_pairs,
    write_run,
)

from t2.config import DataConfig, DecodeConfig
from t2.errors import CheckpointError, DataError
from t2.evaluation import scoring
from t2.evaluation.evaluate import EvalOptions, evaluate
from t2.evaluation.scoring import load_testset, score_corpus
from t2.formats.run import load_run
from t2.model.transformer import Transformer
from t2.serve.engine import translate

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """An aligned toy test set with a blank line in the middle."""
    pairs = toy_pairs(24, seed=77)
    pairs[5] = ("", "")
    folder = tmp_path_factory.mktemp("files")
    (folder / "test.src").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (folder / "test.tgt").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return folder / "test.src", folder / "test.tgt"


def sacrebleu_cli(ref: Path, hyp: Path) -> list[dict]:
    """sacreBLEU's own JSON output (4 decimals) for BLEU and chrF."""
    cmd = [sys.executable, "-m", "sacrebleu", str(ref), "-i", str(hyp), "-m", "bleu", "chrf"]
    out = subprocess.run([*cmd, "-w", "4"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def assert_same_as_cli(bleu: float, chrf: float, signatures: list[str], cli: list[dict]) -> None:
    assert [round(bleu, 4), round(chrf, 4)] == [m["score"] for m in cli]
    assert signatures == [m["signature"] for m in cli]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(ROOT / "evaluate_model.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env)


def test_scores_equal_the_sacrebleu_command_line(tmp_path):
    hyps = ["The cat sat on the mat.", "A dog barks loudly", "", "Hello , world !"]
    refs = ["The cat is on the mat.", "The dog barks loudly.", "Nothing here.", "Hello, world!"]
    (tmp_path / "hyp").write_text("\n".join(hyps) + "\n")
    (tmp_path / "ref").write_text("\n".join(refs) + "\n")
    scores = score_corpus(hyps, [refs])
    cli = sacrebleu_cli(tmp_path / "ref", tmp_path / "hyp")
    assert_same_as_cli(
        scores.bleu, scores.chrf, [scores.bleu_signature, scores.chrf_signature], cli
    )
    assert 0 < scores.bleu < 100 and 0 < scores.chrf < 100
    assert scores.bleu_signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp")
    assert "nc:6" in scores.chrf_signature


def test_evaluate_writes_hyps_and_scores_that_sacrebleu_confirms(toy, files, tmp_path, capsys):
    run, _, _ = toy
    [report] = evaluate(
        EvalOptions(
            str(run),
            src=str(files[0]),
            ref=str(files[1]),
            decode={"beam_size": 3},
            out=str(tmp_path),
        )
    )
    hyps = (tmp_path / "hyps.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(hyps) == 24 and hyps[5] == ""  # blank line kept, files stay aligned
    saved = json.loads((tmp_path / "scores.json").read_text())
    assert saved == report
    assert saved["decode"]["beam_size"] == 3 and saved["n_sentences"] == 24
    assert saved["precision"] == "as stored" and saved["engine"] == "t2"
    signatures = [saved["bleu_signature"], saved["chrf_signature"]]
    cli = sacrebleu_cli(files[1], tmp_path / "hyps.txt")
    assert_same_as_cli(saved["bleu"], saved["chrf"], signatures, cli)
    assert saved["bleu"] > 50  # the toy model has learned its task
    shown = capsys.readouterr().out
    assert "BLEU nrefs:1" in shown and "chrF nrefs:1" in shown and "hypothesis" in shown


def test_recipe_test_split_is_the_default(toy, files, tmp_path):
    """Without --src/--ref or --testset, the run's data.test is translated."""
    run, model, tokenizer = toy
    prefix = files[0].with_suffix("")
    cfg = load_run(run).config
    data = DataConfig(
        test=f"files:{prefix}", src_lang="src", tgt_lang="tgt", cache_dir=str(tmp_path / "cache")
    )
    other = write_run(tmp_path / "run", model, dataclasses.replace(cfg, data=data), tokenizer)
    opts = EvalOptions(str(other), decode={"beam_size": 1}, out=str(tmp_path / "out"), show=0)
    [report] = evaluate(opts)
    assert report["testset"] == f"data.test=files:{prefix}"
    assert 0 < report["n_sentences"] <= 24  # cleaning may drop the blank pair


def test_several_named_testsets_are_scored_by_one_model_in_one_call(
    toy, files, tmp_path, monkeypatch
):
    """--testset wmt13 wmt14: one model opened, each set written to --out/TAG."""
    run, _, _ = toy
    sources = files[0].read_text(encoding="utf-8").split("\n")[:6]
    targets = files[1].read_text(encoding="utf-8").split("\n")[:6]
    monkeypatch.setattr(scoring, "load_testset", lambda name, pair: (sources, [targets]))
    opts = EvalOptions(
        str(run), testsets=("wmt13", "wmt14"), langpair="de-en", out=str(tmp_path), show=0
    )
    reports = evaluate(opts)
    assert [r["testset"] for r in reports] == ["sacrebleu wmt13", "sacrebleu wmt14"]
    for tag in ("wmt13-de-en", "wmt14-de-en"):
        assert json.loads((tmp_path / tag / "scores.json").read_text())["n_sentences"] == 6
    with pytest.raises(DataError, match="needs --langpair"):
        evaluate(EvalOptions(str(run), testsets=("wmt14",)))


def test_translate_keeps_order_blank_lines_and_matches_one_by_one(toy):
    _, model, tokenizer = toy
    sentences = [s for s, _ in toy_pairs(9, seed=5)]
    sentences.insert(4, "   ")
    cfg = DecodeConfig(beam_size=2, batch_size=3)
    batched = translate(model, tokenizer, sentences, cfg)
    alone = [translate(model, tokenizer, [s], cfg)[0] for s in sentences]
    assert batched == alone and batched[4] == ""
    assert translate(model, tokenizer, [], cfg) == []


def test_misaligned_files_give_one_line_naming_both(toy, tmp_path):
    run, _, _ = toy
    (tmp_path / "a.de").write_text("eins\nzwei\ndrei\n")
    (tmp_path / "b.en").write_text("one\ntwo\n")
    with pytest.raises(DataError, match=r"a\.de has 3 lines but .*b\.en has 2"):
        evaluate(EvalOptions(str(run), src=str(tmp_path / "a.de"), ref=str(tmp_path / "b.en")))
    result = run_cli(
        "--checkpoint",
        str(run),
        "--src",
        str(tmp_path / "a.de"),
        "--ref",
        str(tmp_path / "b.en"),
        "--device",
        "cpu",
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "a.de has 3 lines" in result.stderr


def test_bad_paths_give_clear_errors(toy, tmp_path):
    run, _, _ = toy
    with pytest.raises(CheckpointError, match="not found"):
        evaluate(EvalOptions(str(tmp_path / "nowhere")))
    with pytest.raises(DataError, match="source file .* not found"):
        evaluate(EvalOptions(str(run), src=str(tmp_path / "no.de"), ref=str(tmp_path / "no.en")))
    with pytest.raises(DataError, match="together"):
        evaluate(EvalOptions(str(run), src=str(tmp_path / "no.de")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no complete checkpoint"):
        evaluate(EvalOptions(str(tmp_path / "empty")))


def test_learned_positions_name_the_overlong_line(toy, tmp_path):
    _, _, tokenizer = toy
    cfg = tiny_config(len(tokenizer), positional="learned", max_positions=8)
    torch.manual_seed(0)
    model = Transformer(cfg.model).eval()
    sentences = ["eins", "", "eins zwei drei vier fünf sechs sieben acht neun"]
    with pytest.raises(DataError, match="line 3 has 10 tokens, more than model.max_positions=8"):
        translate(model, tokenizer, sentences, DecodeConfig(beam_size=2))
    out = translate(model, tokenizer, sentences[:2], DecodeConfig(beam_size=2, max_len_b=50))
    assert len(out) == 2  # output length is capped by the position table, no error


def _isolated_dataset(monkeypatch, tmp_path, name="wmt14"):
    """Point a sacreBLEU test set at an empty cache and make every download fail."""
    dataset = DATASETS[name]
    monkeypatch.setattr(dataset, "_outdir", str(tmp_path / name))
    monkeypatch.setattr(dataset, "_rawdir", str(tmp_path / name / "raw"))

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    return dataset


def test_testset_without_cache_or_network_fails_in_one_line(monkeypatch, tmp_path):
    _isolated_dataset(monkeypatch, tmp_path)
    with pytest.raises(DataError) as err:
        load_testset("wmt14", "de-en")
    message = str(err.value)
    assert "\n" not in message and "not in sacreBLEU's cache" in message
    assert "SACREBLEU" in message and "internet" in message and "--src FILE --ref FILE" in message
    with pytest.raises(DataError, match="no language pair 'de-xx'"):
        load_testset("wmt14", "de-xx")
    with pytest.raises(DataError, match="unknown sacreBLEU test set"):
        load_testset("wmt99", "de-en")


def test_testset_from_the_cache_needs_no_network(monkeypatch, tmp_path):
    dataset = _isolated_dataset(monkeypatch, tmp_path)
    texts = {"src": "Hallo Welt\nGut\n", "ref": "Hello world\nGood\n", "docid": "1\n1\n"}
    texts.update({"genre": "news\nnews\n", "origlang": "de\nde\n"})
    for field in dataset.fieldnames("de-en"):
        text = texts[field]
        path = Path(dataset._get_txt_file_path("de-en", field))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert load_testset("wmt14", "de-en") == (["Hallo Welt", "Gut"], [["Hello world", "Good"]])


SHARED = Path(os.environ.get("T2_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.mark.skipif(
    not (SHARED / "newstest" / "newstest2013.de").is_file(),
    reason="shared data (../shared/data or $T2_SHARED_DATA) is absent",
)
def test_real_newstest_lines_round_trip_and_score_like_the_cli(tmp_path):
    """Real German and English (umlauts, quotes, numbers) through a tokenizer trained on
    them and a random model: aligned output, and scores equal to sacreBLEU's CLI."""
    src = (SHARED / "newstest" / "newstest2013.de").read_text(encoding="utf-8").split("\n")[:20]
    ref = (SHARED / "newstest" / "newstest2013.en").read_text(encoding="utf-8").split("\n")[:20]
    tokenizer = build_tokenizer(src + ref, tmp_path / "tok", vocab_size=400)
    assert tokenizer.decode(tokenizer.encode(src[0], add_special_tokens=False)) == src[0]
    cfg = tiny_config(len(tokenizer))
    torch.manual_seed(0)
    run = write_run(tmp_path / "run", Transformer(cfg.model), cfg, tokenizer)
    (tmp_path / "s.de").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "r.en").write_text("\n".join(ref) + "\n", encoding="utf-8")
    opts = EvalOptions(
        str(run),
        str(tmp_path / "s.de"),
        str(tmp_path / "r.en"),
        decode={"beam_size": 2},
        out=str(tmp_path / "out"),
        show=0,
    )
    [report] = evaluate(opts)
    hyps = (tmp_path / "out" / "hyps.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(hyps) == 20 and report["n_sentences"] == 20
    cli = sacrebleu_cli(tmp_path / "r.en", tmp_path / "out" / "hyps.txt")
    signatures = [report["bleu_signature"], report["chrf_signature"]]
    assert_same_as_cli(report["bleu"], report["chrf"], signatures, cli)
