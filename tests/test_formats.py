"""The model formats (t2.formats): each writer's folder is detected as its own format only,
holds only the files the format names (what a Hub download fetches), and its reader gives
back the run's config, decode defaults, tokenizer and translations (the round trip); every
reader gives one Bundle type; a folder is of the one format that claims it, else an error;
the opener asks a format what it does; a CTranslate2 export opens by its repo id through
the hub's cache (a local folder standing in for the hub)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hub_cache import cache_repo
from toy_task import toy_pairs

from t2.errors import CheckpointError
from t2.exporting import export
from t2.formats.base import ModelFormat
from t2.formats.choose import format_of, hub_files
from t2.formats.run import RunFormat, load_run
from t2.hub import Bundle, from_pretrained
from t2.hub.pretrained import load_folder
from t2.opener import open_model
from t2.registry import EXPORT
from t2.rundir import resolve

pytestmark = pytest.mark.usefixtures("single_thread")
SENTENCES = [s for s, _ in toy_pairs(5, seed=3)]


def _needs(name: str) -> None:
    if name == "ct2":
        pytest.importorskip("ctranslate2")


@pytest.mark.parametrize("name", EXPORT.names())
def test_each_format_writes_what_its_reader_reads_back(name, toy, tmp_path):
    _needs(name)
    run = toy[0]
    by_run = open_model(run)
    out = export(run, name, tmp_path / name)
    fmt = format_of(out)
    assert fmt.name == name
    assert [n for n in EXPORT.names() if EXPORT.get(n).detect(out)] == [name]
    assert {p.name for p in out.iterdir()} <= set(fmt.files) <= set(hub_files())
    opened = fmt.load(out, "cpu", None, 1, 0)
    assert (opened.kind, opened.path) == (name, out)
    assert type(opened.bundle) is type(by_run.bundle) is Bundle
    assert opened.cfg == by_run.cfg and opened.decode == by_run.decode
    assert opened.tokenizer.get_vocab() == by_run.tokenizer.get_vocab()
    greedy = by_run.decode.updated(search="greedy")
    assert opened.engine.translate(SENTENCES, greedy) == by_run.engine.translate(SENTENCES, greedy)


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_every_reader_gives_one_bundle_with_the_same_fields(toy, tmp_path):
    """A run's reader (load_run), a saved folder's (load_folder, from_pretrained) and the
    opener give the same type: model, config (cfg), tokenizer, path, decode defaults; a
    run's bundle writes itself as a saved folder that reads back the same."""
    run = toy[0]
    by_run = load_run(run)
    folder = by_run.save_pretrained(tmp_path / "saved")
    by_folder, by_name = load_folder(folder), from_pretrained(folder)
    assert type(by_run) is type(by_folder) is type(by_name) is Bundle
    names = [f.name for f in dataclasses.fields(Bundle)]
    assert names == ["model", "config", "tokenizer", "path"]
    assert (by_run.path, by_folder.path) == (resolve(run), folder)
    assert by_folder.config == by_run.config == by_run.cfg and by_folder.decode == by_run.decode
    assert by_folder.tokenizer.get_vocab() == by_run.tokenizer.get_vocab()
    assert _same_weights(by_folder.model, by_run.model)
    greedy = by_run.decode.updated(search="greedy")
    assert by_folder.translate(SENTENCES, greedy) == by_run.translate(SENTENCES, greedy)
    for target, reader in ((run, by_run), (folder, by_folder)):
        opened = open_model(target)
        assert type(opened.bundle) is Bundle and opened.path == reader.path
        assert opened.model is opened.bundle.model and _same_weights(opened.model, reader.model)
        assert (opened.cfg, opened.decode) == (reader.config, reader.decode)


def test_a_ctranslate2_bundle_has_no_t2_model_and_says_so(toy, tmp_path):
    _needs("ct2")
    out = export(toy[0], "ct2", tmp_path / "ct2")
    bundle = open_model(out).bundle
    assert type(bundle) is Bundle and bundle.model is None and bundle.path == out
    with pytest.raises(CheckpointError, match="holds no t2 model"):
        bundle.translate(SENTENCES)
    with pytest.raises(CheckpointError, match="holds no t2 model"):
        bundle.save_pretrained(tmp_path / "saved")


def test_the_run_format_is_no_export_target(toy):
    run = toy[0]
    assert isinstance(format_of(run), RunFormat) and "run" not in EXPORT.names()
    opened = open_model(run)
    assert opened.kind == "run" and opened.provenance["checkpoint"] == str(opened.path)
    with pytest.raises(CheckpointError, match="written by training"):
        RunFormat().save(opened, run)


def test_a_ctranslate2_export_opens_by_its_repo_id(toy, tmp_path, offline_cache):
    _needs("ct2")
    run = toy[0]
    out = export(run, "ct2", tmp_path / "ct2")
    snapshot = cache_repo(out, "me/tiny-ct2", offline_cache)
    opened = open_model("me/tiny-ct2")
    assert (opened.kind, opened.path) == ("ct2", snapshot)
    local = open_model(out)
    assert opened.engine.translate(SENTENCES, opened.decode) == local.engine.translate(
        SENTENCES, local.decode
    )


def test_a_repo_id_download_fetches_every_formats_files(monkeypatch, tmp_path):
    """The hub download asks for the files of hf and ct2 folders alike (was: hf's only)."""
    import huggingface_hub

    from t2.opener import _local_or_hub

    asked = {}

    def snapshot_download(repo_id, **kwargs):  # noqa: ANN001, ANN003, ANN202
        asked.update(kwargs, repo_id=repo_id)
        return str(tmp_path)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    assert _local_or_hub("me/any", None, None) == tmp_path
    assert asked["repo_id"] == "me/any" and sorted(asked["allow_patterns"]) == hub_files()
    assert {"model.bin", "t2_export.json", "model.safetensors"} <= set(hub_files())


def test_the_export_verbs_flags_are_the_formats_options():
    from t2.cli import build_parser
    from t2.formats.choose import all_formats
    from t2.formats.options import ENGINES, EXPORT_OPTIONS, export_options

    taken = {option for name in EXPORT.names() for option in EXPORT.get(name).options}
    assert taken == {option.name for option in EXPORT_OPTIONS}  # each flag some format's
    assert {f.engine for f in all_formats()} == set(ENGINES)
    args = build_parser().parse_args(["export", "RUN", "--out", "x", "--quantization", "int8"])
    assert export_options(args) == {"name": None, "quantization": "int8"}


def test_the_run_format_claims_only_runs_and_checkpoints(toy, tmp_path):
    """A folder of no format is refused in one line naming what each format looks for; the
    run format does not claim it (it used to claim every folder)."""
    run = toy[0]
    assert RunFormat.detect(run) and RunFormat.detect(resolve(run))
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("not a model\n")
    assert not RunFormat.detect(stray)
    with pytest.raises(CheckpointError) as err:
        format_of(stray)
    message = str(err.value)
    assert "\n" not in message and "no complete checkpoint" in message
    assert all(name in message for name in ("run directory", *EXPORT.names()))


class _Several(ModelFormat):
    """A format of folders that hold several checkpoints, read by an engine that decodes
    batches in parallel: the opener must ask it, not test for the run format's class or
    for CTranslate2's engine by name."""

    name, engine, averages, parallel = "several", "t2", True, True
    opened: dict = {}

    @staticmethod
    def detect(folder):  # noqa: ANN001, ANN205
        return True

    def load(self, folder, device, precision, workers, average_last=0):  # noqa: ANN001, ANN201
        self.opened.update(workers=workers, average_last=average_last)
        return "opened"

    def save(self, opened, out, **options):  # noqa: ANN001, ANN003, ANN201
        raise CheckpointError("not written here")


def test_the_opener_asks_the_format_what_it_does(tmp_path, monkeypatch):
    import t2.opener

    monkeypatch.setattr(t2.opener, "format_of", lambda folder: _Several())
    assert open_model(tmp_path, average_last=3, workers=2) == "opened"
    assert _Several.opened == {"workers": 2, "average_last": 3}
