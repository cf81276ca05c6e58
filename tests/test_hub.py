"""t2/hub: save_pretrained / from_pretrained round trips with identical logits, the format
checks of a saved folder, repo ids through the hub's cache (offline), the model card
generated from a run's files, t2 push through an injected HfApi; and t2/progress."""

from __future__ import annotations

import inspect
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hub_cache import cache_repo
from huggingface_hub import HfApi, constants
from safetensors.torch import load_file, save_file

from t2.cli import main
from t2.config import Config, DecodeConfig, ModelConfig
from t2.data.tokenizer import load_tokenizer
from t2.errors import CheckpointError
from t2.exporting import push, save_run
from t2.hub import from_pretrained, is_pretrained
from t2.model.summary import count_parameters
from t2.model.transformer import Transformer
from t2.opener import open_model
from t2.progress import Progress
from t2.rundir import RunDir, new_meta, read_config, save_checkpoint, write_json
from t2.rundir.layout import WEIGHTS, eval_folder

pytestmark = pytest.mark.usefixtures("single_thread")

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = Path(__file__).parent / "fixtures" / "run_format1" / "tokenizer"  # 59 entries
TINY = dict(vocab_size=59, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1)
MODERN = dict(
    positional="rope", norm="rmsnorm", ffn="swiglu", norm_position="pre", tie_embeddings="none"
)
BLEU_SIG = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
CHRF_SIG = "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0"
SRC = torch.tensor([[5, 9, 14, 22, 2], [7, 30, 2, 0, 0]])  # padded batch, EOS = 2
TGT = torch.tensor([[1, 11, 12, 40], [1, 8, 3, 0]])


def make_run(
    root: Path, step: int = 3, results: bool = True, moved: bool = False, **model
) -> tuple[Path, Path]:
    """A run directory with one checkpoint of a random tiny model, the fixture's tokenizer
    and the metrics and results a training run writes: (run, checkpoint). `moved`: every
    parameter off its initial value (ReZero's 0 too), so that one not loaded shows."""
    run = RunDir(root / "run")
    run.path.mkdir(parents=True)
    shutil.copytree(TOKENIZER, run.tokenizer)
    cfg = Config(model=ModelConfig(**{**TINY, **model}))
    run.config.write_text(cfg.to_yaml())
    write_json(run.meta, new_meta(1, recipe="tiny_recipe"))
    torch.manual_seed(step)
    state = {"step": step, "optimizer": {}, "scheduler": {}, "rng": {}, "data": {}}
    net = Transformer(cfg.model)
    with torch.no_grad():
        for p in net.parameters() if moved else ():
            p.add_(0.1 * torch.randn_like(p))
    ckpt = save_checkpoint(run, step, net, cfg, state, keep_last=2, best=True)
    records = [
        {"step": step, "loss": 2.5, "train_tokens": 123456, "elapsed_s": 90.0},
        {
            "step": step,
            "valid_loss": 1.875,
            "valid_ppl": 6.52,
            "valid_accuracy": 0.4,
            "valid_bleu": 17.25,
            "valid_chrf": 41.5,
            "valid_exact_match": 0.125,
        },
    ]
    run.metrics.write_text("".join(json.dumps(r) + "\n" for r in records))
    if results:
        write_json(
            run.results,
            {
                "recipe": "tiny_recipe",
                "checkpoint": str(ckpt),
                "test_loss": 1.9,
                "bleu": 23.4567,
                "chrf": 48.123,
                "bleu_signature": BLEU_SIG,
                "chrf_signature": CHRF_SIG,
                "bleu_detail": "BLEU = 23.46 60.0/30.0/20.0/10.0 (BP = 1.000 ratio = 1.000)",
                "exact_match": 0.25,
                "n_sentences": 40,
                "beam_size": 4,
            },
        )
    return run.path, ckpt


def logits(model: Transformer) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(SRC, TGT)


def original(ckpt: Path) -> Transformer:
    from t2.rundir import load_model

    return load_model(ckpt)[0]


ATTENTION_VARIANTS = (  # Shaw's tables per layer, T5's shared per stack, fewer kv heads
    dict(positional="relative", n_kv_heads=1, qk_norm=True),
    dict(positional="t5", n_kv_heads=1, n_encoder_layers=2, n_decoder_layers=2),
)
# the norm and residual variants: each connection, ScaleNorm, ReZero's norm-free sublayers
VARIANTS = (
    dict(norm="scalenorm", residual="layerscale"),
    dict(residual="deepnorm"),
    dict(residual="rezero", norm_position="pre"),
)


@pytest.mark.parametrize(
    "model",
    [{}, MODERN, *ATTENTION_VARIANTS, *VARIANTS],
    ids=[
        *("paper", "rope-rmsnorm-swiglu-pre-untied", "relative-mqa-qknorm", "t5-mqa"),
        *("scalenorm-layerscale", "deepnorm", "rezero"),
    ],
)
def test_the_round_trip_gives_identical_logits_config_and_tokenizer(tmp_path, model):
    run, ckpt = make_run(tmp_path, moved=True, **model)
    folder = save_run(run, tmp_path / "saved")
    assert is_pretrained(folder) and (folder / "README.md").is_file()
    loaded = from_pretrained(folder)
    assert torch.equal(logits(loaded.model), logits(original(ckpt)))
    assert loaded.config == read_config(ckpt) and loaded.decode == read_config(ckpt).decode
    text = "march 3 1999 monday"
    assert loaded.tokenizer(text)["input_ids"] == load_tokenizer(TOKENIZER)(text)["input_ids"]
    again = from_pretrained(loaded.save_pretrained(tmp_path / "again"))  # a second trip
    assert torch.equal(logits(again.model), logits(loaded.model))
    raw = json.loads((folder / "config.json").read_text())
    assert raw["t2_format"] == 1 and raw["model"]["positional"] == loaded.config.model.positional


def test_a_saved_folder_works_as_a_checkpoint_of_translate(tmp_path):
    run, _ = make_run(tmp_path, **MODERN)
    folder = save_run(run, tmp_path / "saved")
    lines = ["march 3 1999 monday", "", "june 12 2001"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "translate",
                "--checkpoint",
                str(folder),
                "--input",
                str(tmp_path / "in.txt"),
                "--output",
                str(tmp_path / "out.txt"),
                "--beam-size",
                "2",
            ]
        )
    assert exit_.value.code == 0
    expected = from_pretrained(folder).translate(lines, DecodeConfig(beam_size=2))
    assert (tmp_path / "out.txt").read_text().split("\n")[:3] == expected and expected[1] == ""


def _tamper_shape(folder: Path) -> None:
    state = load_file(str(folder / WEIGHTS))
    state["src_embed.weight"] = torch.zeros(60, 16)
    save_file(state, str(folder / WEIGHTS))


def _edit_config(folder: Path, change) -> None:  # noqa: ANN001
    raw = json.loads((folder / "config.json").read_text())
    change(raw)
    (folder / "config.json").write_text(json.dumps(raw))


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (
            _tamper_shape,
            r"src_embed\.weight: \(60, 16\) in the checkpoint, \(59, 16\) in the model",
        ),
        (
            lambda f: _edit_config(f, lambda c: c["model"].update(d_modle=8)),
            r"unknown key in section 'model' 'd_modle'; valid keys: .*d_model",
        ),
        (lambda f: _edit_config(f, lambda c: c.update(extra=1)), r"unknown keys extra; valid keys"),
        (
            lambda f: _edit_config(f, lambda c: c.update(t2_format=2)),
            r"format 2 \(t2 0\.2\.0\); this t2 .* reads format 1 to 1",
        ),
        (
            lambda f: (f / "tokenizer.json").unlink(),
            r"lacks tokenizer\.json; pass a folder written",
        ),
        (
            lambda f: (f / WEIGHTS).write_bytes(b"not safetensors"),
            r"cannot read .*model\.safetensors",
        ),
    ],
)
def test_a_tampered_or_incompatible_folder_fails_in_one_line(tmp_path, tamper, message):
    run, _ = make_run(tmp_path)
    folder = save_run(run, tmp_path / "saved")
    tamper(folder)
    with pytest.raises(CheckpointError, match=message) as err:
        from_pretrained(folder)
    assert "\n" not in str(err.value)


def test_a_cached_repo_id_loads_offline_and_an_uncached_one_fails_in_one_line(
    tmp_path, offline_cache
):
    run, ckpt = make_run(tmp_path, **MODERN)
    snapshot = cache_repo(save_run(run, tmp_path / "saved", "me/tiny"), "me/tiny", offline_cache)
    loaded = from_pretrained("me/tiny")
    assert loaded.path == snapshot
    assert torch.equal(logits(loaded.model), logits(original(ckpt)))
    # the one opener takes the repo id too (t2 translate / evaluate --checkpoint me/tiny)
    opened = open_model("me/tiny")
    assert (opened.kind, opened.path) == ("hf", snapshot)
    assert torch.equal(logits(opened.model), logits(original(ckpt)))
    assert opened.provenance == {"checkpoint": ckpt.name}
    by_run = open_model(run)
    assert (by_run.kind, by_run.path, by_run.provenance["step"]) == ("run", ckpt, 3)
    assert by_run.engine.translate(["a b"], by_run.cfg.decode) == opened.engine.translate(
        ["a b"], opened.cfg.decode
    )
    with pytest.raises(CheckpointError) as err:
        from_pretrained("me/absent")
    text = str(err.value)
    assert "\n" not in text and "me/absent" in text and str(offline_cache) in text
    assert "HF_HUB_OFFLINE=1 forbids downloading it" in text and "pass a local folder" in text
    with pytest.raises(CheckpointError, match="neither a folder nor a Hugging Face repo id"):
        from_pretrained("not/a/repo id")


def test_the_hub_environment_variables_reach_the_loader(tmp_path):
    """The same through HF_HUB_OFFLINE and HF_HUB_CACHE themselves, in a fresh process."""
    run, _ = make_run(tmp_path)
    cache_repo(save_run(run, tmp_path / "saved"), "me/tiny", tmp_path / "cache")
    code = (
        "from t2.cli import run_main; from t2.hub import from_pretrained as f; "
        "print(f('me/tiny').model.cfg.d_model, flush=True); "
        "run_main(lambda: f('me/absent'))"
    )
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "cache"),
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )
    assert done.returncode == 2 and done.stdout == "16\n"
    assert done.stderr.count("\n") == 1 and "me/absent" in done.stderr, done.stderr
    assert str(tmp_path / "cache") in done.stderr


def test_the_model_card_holds_the_runs_own_numbers_and_signatures(tmp_path):
    run, ckpt = make_run(tmp_path)
    scores = {
        "bleu": 30.125,
        "chrf": 55.5,
        "bleu_signature": BLEU_SIG + "|x",
        "chrf_signature": CHRF_SIG + "|y",
        "testset": "a.de -> a.en",
        "n_sentences": 7,
        "decode": {"beam_size": 5, "lenpen": 1.5, "stopping": "exact"},
    }
    eval_folder(ckpt, "a").mkdir()
    (eval_folder(ckpt, "a") / "scores.json").write_text(json.dumps(scores))
    card = (save_run(run, tmp_path / "saved", "me/tiny") / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: t2\npipeline_tag: translation\nlanguage:\n- de\n")
    assert "- translation\n" in card and "metrics:\n- bleu\n- chrf\n---" in card
    total = count_parameters(original(ckpt))["total"]
    assert f"**{total:,} parameters**" in card and "# tiny_recipe: de→en" in card
    for text in (
        "BLEU **23.46**, chrF **48.12**",
        f"BLEU signature: `{BLEU_SIG}`",
        f"chrF signature: `{CHRF_SIG}`",
        "40 sentences), decoded with search=beam, "
        "beam_size=4, stopping=heuristic, lenpen=0.6, length_norm=length",
        "BLEU **30.12**, chrF **55.50**",
        f"`{BLEU_SIG}|x`",
        "beam_size=5, stopping=exact, lenpen=1.5",
        "| bleu | 17.25 |",
        "- Steps: 3.",
        "- Target tokens trained on: 123,456.",
        'from_pretrained("me/tiny")',
        "| exact_match | 0.25 |",
        "- Training time: 1.5 minutes.",
    ):
        assert text in card, text


def test_the_card_shows_every_decode_setting_a_results_record_holds(tmp_path):
    """A results.json that records its decode (DecodeConfig.recorded) is shown as it is,
    not as the run's section with its beam size."""
    run, ckpt = make_run(tmp_path, results=False)
    decode = DecodeConfig(search="sample", top_k=5, top_p=0.9, seed=3).recorded()
    scores = {"bleu": 12.5, "chrf": 40.0, "bleu_signature": BLEU_SIG, "chrf_signature": CHRF_SIG}
    write_json(RunDir(run).results, {"checkpoint": str(ckpt), **scores, "decode": decode})
    card = (save_run(ckpt, tmp_path / "saved") / "README.md").read_text()
    assert "decoded with search=sample, temperature=1.0, top_k=5, top_p=0.9, seed=3" in card


def test_a_card_claims_no_number_the_run_does_not_hold(tmp_path):
    run, ckpt = make_run(tmp_path, results=False)
    write_json(RunDir(run).results, {"checkpoint": "elsewhere/step-0000099", "bleu": 99.0})
    RunDir(run).metrics.write_text(json.dumps({"step": 1, "loss": 3.0}) + "\n")
    card = (save_run(ckpt, tmp_path / "saved") / "README.md").read_text()
    card = card.replace(str(tmp_path), "TMP")  # pytest's folder may be numbered ...99
    assert "99" not in card and "signature" not in card and "metrics:" not in card
    assert "Target tokens trained on: not recorded in metrics.jsonl" in card
    assert "No validation record at this checkpoint's step" in card
    assert "None: the run has no results.json for this checkpoint" in card


class RecordingApi(HfApi):
    """HfApi whose two calls are checked against the real signatures and copy the folder
    to a local 'remote' instead of the network."""

    def __init__(self, remote: Path) -> None:
        super().__init__(token="hf_unused")
        self.remote, self.calls = remote, []

    def create_repo(self, repo_id, **kwargs):  # noqa: ANN001, ANN003, ANN201
        inspect.signature(HfApi.create_repo).bind(self, repo_id, **kwargs)
        self.calls.append(("create_repo", repo_id, kwargs))

    def upload_folder(self, **kwargs):  # noqa: ANN003, ANN201
        from huggingface_hub.utils import filter_repo_objects

        inspect.signature(HfApi.upload_folder).bind(self, **kwargs)
        self.calls.append(("upload_folder", kwargs["repo_id"], kwargs))
        folder = Path(kwargs["folder_path"])
        names = [p.name for p in folder.iterdir()]
        for name in filter_repo_objects(names, allow_patterns=kwargs["allow_patterns"]):
            shutil.copy(folder / name, self.remote / name)
        return type("CommitInfo", (), {"commit_url": "https://hub.local/me/tiny/commit/1"})()


def test_push_saves_with_a_card_and_uploads_through_the_hub_api(tmp_path):
    run, ckpt = make_run(tmp_path, **MODERN)
    eval_folder(ckpt, "x").mkdir()  # a folder to push must not carry evaluations along
    api = RecordingApi(tmp_path / "remote")
    (tmp_path / "remote").mkdir()
    url = push(run, "me/tiny", private=True, api=api)
    assert url == "https://hub.local/me/tiny/commit/1"
    assert [c[0] for c in api.calls] == ["create_repo", "upload_folder"]
    assert api.calls[0][2]["private"] is True and api.calls[0][2]["exist_ok"] is True
    assert api.calls[1][2]["commit_message"] == "t2 0.2.0: run"
    assert sorted(p.name for p in (tmp_path / "remote").iterdir()) == [
        "README.md",
        "config.json",
        WEIGHTS,
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert BLEU_SIG in (tmp_path / "remote" / "README.md").read_text()
    assert torch.equal(logits(from_pretrained(tmp_path / "remote").model), logits(original(ckpt)))
    api.remote = tmp_path / "remote2"
    api.remote.mkdir()
    push(tmp_path / "remote", "me/again", api=api)  # a saved folder goes up as it is
    assert api.calls[-1][2]["folder_path"] == str(tmp_path / "remote")
    assert (api.remote / WEIGHTS).read_bytes() == (tmp_path / "remote" / WEIGHTS).read_bytes()


def test_push_without_a_token_or_with_a_bad_repo_id_fails_in_one_line(
    tmp_path, monkeypatch, capsys
):
    run, _ = make_run(tmp_path)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    for repo, message in (
        ("me/tiny", "t2 push needs a Hugging Face token with write access"),
        ("tiny", "'tiny' has no owner; pass owner/name"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["push", str(run), repo])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and err.count("\n") == 1 and message in err, err


def test_progress_writes_plain_lines_to_a_log_file_and_a_bar_to_a_terminal():
    log = io.StringIO()
    with Progress(10, "translate", "sentences", every_s=0, tty=False, stream=log) as progress:
        for _ in range(5):
            progress.update(2)
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("translate: 2/10 sentences (20%) ") and "left=" in lines[0]
    assert lines[4].startswith("translate: 10/10 sentences (100%)")
    assert lines[5].startswith("translate: 10/10 sentences in ") and len(lines) == 6
    quiet = io.StringIO()
    with Progress(10, "short", every_s=60, tty=False, stream=quiet) as progress:
        progress.update(10)
    assert quiet.getvalue() == ""  # work shorter than the interval leaves no line
    term = io.StringIO()
    with Progress(4, "bar", every_s=0, tty=True, stream=term) as progress:
        progress.update(4)
    drawn = term.getvalue()  # tqdm's bar, redrawn in place and cleared at the end
    assert drawn.startswith("\rbar:") and "/4 [" in drawn and "\n" not in drawn


def test_long_work_reports_progress_in_a_log_file(tmp_path, monkeypatch, capsys):
    """Tokenizer training, encoding and a test set's decoding, with a line per update."""
    import datasets

    from t2.config import DataConfig
    from t2.data.encode import encode_pairs
    from t2.data.tokenizer import train_tokenizer
    from t2.serve.engine import TorchEngine

    monkeypatch.setenv("T2_PROGRESS_EVERY", "0")
    texts = ["march 3 1999 monday", "june 12 2001", "", "may 5 2020"] * 25
    train_tokenizer(iter(texts), 120, 1, False, tmp_path / "tok", total=len(texts))
    err = capsys.readouterr().err
    assert "tokenizer: reading: 100/100 texts in " in err and "computing the merges" in err
    pairs = datasets.Dataset.from_dict({"src": texts[:6], "tgt": texts[1:7]})
    encode_pairs(pairs, load_tokenizer(TOKENIZER), DataConfig(cache_dir=str(tmp_path)), "test")
    err = capsys.readouterr().err
    assert "data test: encode: 6/6 pairs (100%)" in err and "Map" not in err  # datasets' bar off
    run, _ = make_run(tmp_path)
    loaded = from_pretrained(save_run(run, tmp_path / "saved"))
    with Progress(3, "translate", "sentences") as progress:
        TorchEngine(loaded.model, loaded.tokenizer).translate(
            ["a", "", "b", "c"], loaded.decode, progress
        )
    assert progress.n == 3 and "translate: 3/3 sentences in " in capsys.readouterr().err
