"""Greedy and beam search: equivalences, the length penalty, limits, exhaustive optimality."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from toy_task import one_thread, tiny_config, toy_pairs, toy_run

from t2.config import DecodeConfig
from t2.data.encode import encode_source
from t2.decoding.common import Scratch, length_penalty, max_lengths, pad_source
from t2.decoding.search import search
from t2.errors import ConfigError
from t2.model.transformer import Transformer
from t2.serve.engine import pad_batch

EOS = 2


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():
        yield


def random_model(vocab: int = 40, seed: int = 0, **model) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(tiny_config(vocab, **model).model).eval()


def random_src(batch: int, vocab: int, seed: int = 1) -> torch.Tensor:
    """(B, S) sources of different lengths, EOS-terminated and right-padded."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(batch):
        n = 2 + (i * 3) % 7
        rows.append(torch.randint(4, vocab, (n,), generator=g).tolist() + [EOS])
    return pad_batch(rows, "cpu")


def teacher_forced_logprob(model: Transformer, src: torch.Tensor, tokens: list[int]) -> float:
    """Sum of log p(token) over tokens + EOS, without any cache (the reference)."""
    tgt = torch.tensor([[1, *tokens, EOS]])
    with torch.no_grad():
        lprobs = F.log_softmax(model(src[None], tgt[:, :-1]).float(), dim=-1)
    return lprobs[0].gather(1, tgt[0, 1:, None]).sum().item()


def uncached_greedy(model: Transformer, src: torch.Tensor, max_len: int) -> list[int]:
    """Greedy decoding that re-reads the whole prefix at every step (no DecoderState)."""
    out = [1]
    with torch.no_grad():
        for t in range(max_len + 1):
            logits = model(src[None], torch.tensor([out]))[0, -1].float()
            logits[:2] = float("-inf")  # never PAD or BOS
            tok = EOS if t == max_len else int(logits.argmax())
            if tok == EOS:
                break
            out.append(tok)
    return out[1:]


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rope", "alibi"])
def test_cached_greedy_equals_uncached(positional):
    model = random_model(positional=positional, norm_position="pre")
    src = random_src(6, 40)
    hyps = search(model, src, DecodeConfig(search="greedy", max_len_b=4))
    for row, h in zip(src, hyps, strict=True):
        row = row[row.ne(0)]
        assert h[0].tokens == uncached_greedy(model, row, len(row) + 4)
        assert h[0].log_prob == pytest.approx(
            teacher_forced_logprob(model, row, h[0].tokens), abs=1e-4
        )


def test_greedy_has_one_name():
    """search beam with beam_size 1 is recorded as search greedy (and decodes as it); a beam
    size given to a greedy section asks for beam search again."""
    cfg = DecodeConfig(beam_size=1, max_len_b=6)
    assert cfg.search == "greedy"
    assert cfg.recorded() == DecodeConfig(search="greedy", max_len_b=6).recorded()
    assert "beam_size" not in cfg.recorded() and cfg.recorded()["search"] == "greedy"
    assert cfg.updated(beam_size=3).search == "beam" and cfg.updated(lenpen=1.0).search == "greedy"
    assert cfg.updated(beam_size=3, search="greedy").search == "greedy"
    model, src = random_model(), random_src(7, 40)
    assert search(model, src, cfg) == search(model, src, replace(cfg, search="greedy"))


def test_batched_beam_equals_one_sentence_at_a_time():
    """Padding, pruning of finished sentences and cache reordering change nothing."""
    model, src = random_model(seed=3), random_src(5, 40, seed=4)
    cfg = DecodeConfig(beam_size=3, max_len_b=5, nbest=3)
    batched = search(model, src, cfg)
    for row, hyps in zip(src, batched, strict=True):
        alone = search(model, row[row.ne(0)][None], cfg)[0]
        assert [h.tokens for h in hyps] == [h.tokens for h in alone]
        assert [h.score for h in hyps] == pytest.approx([h.score for h in alone], abs=1e-4)


@pytest.mark.parametrize("norm", ["gnmt", "length"])
def test_beam_is_exact_when_wide_enough(norm):
    """With more beams than possible outputs, the n-best list is the exhaustive ranking."""
    vocab, alpha = 6, 0.6  # generable tokens: EOS, UNK, 4, 5 (PAD and BOS never)
    model, src = random_model(vocab, seed=5), torch.tensor([[4, 5, 4, EOS]])
    cfg = DecodeConfig(
        beam_size=16, lenpen=alpha, max_len_a=0.0, max_len_b=2, nbest=13, length_norm=norm
    )
    hyps = search(model, src, cfg)[0]
    outputs = [list(p) for n in range(3) for p in itertools.product([3, 4, 5], repeat=n)]
    ranked = sorted(
        (
            (teacher_forced_logprob(model, src[0], o) / length_penalty(len(o) + 1, alpha, norm), o)
            for o in outputs
        ),
        reverse=True,
    )
    assert [h.tokens for h in hyps] == [o for _, o in ranked]
    assert [h.score for h in hyps] == pytest.approx([s for s, _ in ranked], abs=1e-4)


@pytest.mark.parametrize("norm", ["length", "gnmt"])
def test_score_is_length_normalised_and_lengths_are_bounded(norm):
    model, src = random_model(seed=7), random_src(6, 40, seed=8)
    src_len = src.ne(0).sum(1).tolist()
    for alpha in (0.0, 0.6, 1.0):
        cfg = DecodeConfig(lenpen=alpha, max_len_a=0.5, max_len_b=3, length_norm=norm)
        for hyps in (
            search(model, src, replace(cfg, search="greedy")),
            search(model, src, replace(cfg, beam_size=4)),
        ):
            for n, h in zip(src_len, hyps, strict=True):
                assert len(h[0].tokens) <= int(0.5 * n + 3)
                length = len(h[0].tokens) + 1  # EOS included
                lp = length**alpha if norm == "length" else ((5 + length) / 6) ** alpha
                assert h[0].score == pytest.approx(h[0].log_prob / lp, rel=1e-5)
                assert EOS not in h[0].tokens and 0 not in h[0].tokens and 1 not in h[0].tokens


def test_nbest_is_sorted_and_distinct():
    model, src = random_model(seed=9), random_src(4, 40, seed=10)
    for hyps in search(model, src, DecodeConfig(beam_size=5, max_len_b=4, nbest=5)):
        assert len(hyps) == 5
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 5


def test_search_dispatch_and_bad_settings():
    model, src = random_model(), random_src(3, 40)
    greedy = search(model, src, DecodeConfig(search="greedy", max_len_b=4))
    assert search(model, src, DecodeConfig(beam_size=1, max_len_b=4)) == greedy
    with pytest.raises(ConfigError, match="nbest"):  # checked once, by DecodeConfig
        search(model, src, DecodeConfig(beam_size=2, nbest=3))
    with pytest.raises(ConfigError, match="beam_size"):
        search(model, src, DecodeConfig(beam_size=0))


def test_beam_finds_a_score_at_least_as_high_as_greedy(tmp_path_factory):
    _, model, tokenizer = toy_run(tmp_path_factory.mktemp("toy"))
    sources = [s for s, _ in toy_pairs(40, seed=123)]
    src = pad_batch(encode_source(tokenizer, sources, False), "cpu")
    greedy = search(model, src, DecodeConfig(search="greedy", max_len_b=10))
    beam = search(model, src, DecodeConfig(beam_size=4, max_len_b=10))
    for g, b in zip(greedy, beam, strict=True):
        assert b[0].score >= g[0].score - 1e-5


def test_a_model_that_never_ends_still_gets_max_length_hypotheses():
    model, src = random_model(seed=11), random_src(4, 40, seed=12)
    project = model.project
    model.project = lambda h: project(h).index_fill(-1, torch.tensor([EOS]), float("-inf"))
    limits = DecodeConfig(search="greedy", max_len_a=0.0, max_len_b=6)
    for hyps in (
        search(model, src, limits),
        search(model, src, limits.updated(beam_size=3, nbest=3)),
    ):
        for nbest in hyps:
            assert nbest and all(len(h.tokens) == 6 and 0 not in h.tokens for h in nbest)
            assert all(h.log_prob < -1e3 for h in nbest)  # the floored forced EOS
    lengths = torch.tensor([2, 5, 0, 3])  # per-sentence limits override max_len_a and b
    greedy = search(model, src, DecodeConfig(search="greedy"), lengths=lengths)
    beam = search(model, src, DecodeConfig(beam_size=2), lengths=lengths)
    assert [len(h[0].tokens) for h in greedy] == [len(h[0].tokens) for h in beam] == [2, 5, 0, 3]


def test_decoding_with_learned_positions_stops_at_the_table():
    """max_lengths asks the model's positional scheme for its length (no name test)."""
    from t2.config import ModelConfig

    src = torch.ones(2, 5, dtype=torch.long)
    tiny = dict(
        vocab_size=50,
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_encoder_layers=1,
        n_decoder_layers=1,
        max_positions=20,
    )
    learned = Transformer(ModelConfig(**tiny, positional="learned"))
    sinusoidal = Transformer(ModelConfig(**tiny, positional="sinusoidal"))
    assert max_lengths(learned, src, 1.0, 50).tolist() == [19, 19]
    assert max_lengths(sinusoidal, src, 1.0, 50).tolist() == [55, 55]


def test_beam_search_keeps_one_source_row_per_sentence(tiny_model_config):
    """The beams of a sentence share its memory and cross-attention keys and values
    (CrossAttention groups them): neither is expanded K times, also after sentences end."""
    from t2.model.transformer import Transformer

    torch.manual_seed(0)
    model = Transformer(tiny_model_config()).eval()
    seen: list[tuple[int, int, int]] = []
    decode = model.decode

    def spy(tgt, memory, src_pad, state):  # noqa: ANN001, ANN202
        out = decode(tgt, memory, src_pad, state)
        seen.append((tgt.shape[0], memory.shape[0], state.cross_caches[0].k.shape[0]))
        return out

    model.decode = spy
    src = torch.randint(3, 50, (3, 6), generator=torch.Generator().manual_seed(1))
    src[1, 2:] = 0
    search(model, src, DecodeConfig(beam_size=4), lengths=torch.tensor([2, 5, 9]))
    assert seen[0] == (3, 3, 3)
    assert all(rows == 4 * sources and sources == cached for rows, sources, cached in seen[1:])
    assert [s for _, s, _ in seen][-1] == 1  # the sentences with shorter limits have left


def test_search_scratch_reuses_one_log_probability_buffer():
    """Every step's float32 log-probabilities go to one buffer, a prefix of it once sentences
    have left; a wider vocabulary or more rows get a new one."""
    scratch = Scratch(8)
    first = scratch.take(torch.zeros(8, 5, dtype=torch.bfloat16))
    assert first.dtype == torch.float32 and first.shape == (8, 5)
    later = scratch.take(torch.zeros(3, 5))
    assert later.data_ptr() == first.data_ptr() and later.shape == (3, 5)
    assert scratch.take(torch.zeros(9, 5)).shape == (9, 5) and scratch.rows == 9
    assert scratch.take(torch.zeros(2, 7)).shape == (2, 7)


def test_a_16_bit_model_decodes_sources_padded_to_a_multiple_of_8_with_the_same_output(
    monkeypatch,
):
    """On a CPU a bf16 model's source batch is padded to a length multiple of 8 (fewer
    kernel shapes, docs/serving.md); the padding is masked, so the hypotheses are those of
    the unpadded batch; a float32 model's batch is left as it is."""
    import t2.model.attention as attention

    model = random_model(seed=5).to(torch.bfloat16)
    src = random_src(5, 40, seed=6)  # 9 positions
    seen = []
    encode = model.encode
    monkeypatch.setattr(model, "encode", lambda s, p=None: seen.append(s.shape[1]) or encode(s, p))
    results = {}
    for multiple in (8, 1):
        monkeypatch.setattr(attention, "SHAPE_MULTIPLE", multiple)
        beam = search(model, src, DecodeConfig(beam_size=3, max_len_b=5, nbest=2))
        greedy = search(model, src, DecodeConfig(search="greedy", max_len_b=5))
        results[multiple] = [[(h.tokens, h.score) for h in hs] for hs in beam + greedy]
    assert seen == [16, 16, 9, 9]
    assert results[8] == results[1]
    assert pad_source(random_model(), src) is src  # float32: as it is


def test_source_padding_stops_at_a_learned_position_table():
    model = random_model(positional="learned", max_positions=12).to(torch.bfloat16)
    src = random_src(3, 40, seed=2)[:, :9]
    assert pad_source(model, src).shape[1] == 12
    assert pad_source(model, src)[:, 9:].eq(0).all()


def test_sampling_with_a_seed_is_reproducible_and_its_limits_are_greedy():
    """decode.search=sample: one seed, one output; another seed, other outputs; top_k=1,
    a tiny top_p or a tiny temperature leave only the most probable token, greedy's."""
    model, src = random_model(seed=3), random_src(6, 40, seed=4)
    sample = DecodeConfig(search="sample", max_len_b=8, seed=7)
    first = search(model, src, sample)
    assert search(model, src, sample) == first
    others = search(model, src, replace(sample, seed=8))
    assert [h[0].tokens for h in others] != [h[0].tokens for h in first]
    greedy = [h[0].tokens for h in search(model, src, DecodeConfig(search="greedy", max_len_b=8))]
    for limit in ({"top_k": 1}, {"top_p": 1e-6}, {"temperature": 1e-4}):
        assert [h[0].tokens for h in search(model, src, replace(sample, **limit))] == greedy
    nbest = search(model, src, replace(sample, nbest=3))
    assert all(len(h) == 3 and h[0].score >= h[1].score >= h[2].score for h in nbest)


def test_sampled_log_probabilities_are_the_models():
    """A sampled hypothesis reports the model's own log-probability of its tokens (not the
    tempered or truncated one), as teacher forcing computes it."""
    model, src = random_model(seed=5), random_src(3, 40, seed=6)
    cfg = DecodeConfig(search="sample", max_len_b=6, seed=1, temperature=2.0, top_k=10)
    for row, hyps in zip(src, search(model, src, cfg), strict=True):
        h = hyps[0]
        want = teacher_forced_logprob(model, row[row.ne(0)], h.tokens)
        assert h.log_prob == pytest.approx(want, abs=1e-4)


def test_the_decode_section_checks_search_options():
    for bad, match in (
        ({"search": "nucleus"}, "valid choices: beam, greedy, sample"),
        ({"search": "greedy", "nbest": 2}, "greedy search, which finds one hypothesis"),
        ({"temperature": 0.0}, "decode.temperature must be > 0"),
        ({"top_p": 0.0}, r"top_p in \(0, 1\]"),
        ({"top_k": -1}, "decode.top_k must be at least 0"),
    ):
        with pytest.raises(ConfigError, match=match):
            DecodeConfig(**bad)
    assert DecodeConfig(search="sample", nbest=5, beam_size=1).nbest == 5


def test_a_decode_records_the_keys_its_strategy_reads_by_the_strategys_facts(monkeypatch):
    """What shapes a search's output is each strategy's fact, so a strategy registered
    later records its own keys (they were named by strategy in the decode section)."""
    from t2.decoding.search.beam import beam
    from t2.facts import Ct2, SearchFacts
    from t2.registry import SEARCH

    monkeypatch.setattr(SEARCH, "_entries", dict(SEARCH._entries))
    facts = SearchFacts(Ct2(), reads=("beam_size", "stopping"))
    SEARCH.register("wide_probe", facts)(lambda cfg, generator: beam(cfg, generator))
    recorded = DecodeConfig(search="wide_probe", beam_size=7).recorded()
    assert list(recorded)[:3] == ["search", "beam_size", "stopping"] and recorded["beam_size"] == 7
    assert "temperature" not in recorded and "lenpen" in recorded
    sampled = DecodeConfig(search="sample", temperature=0.5).recorded()
    assert sampled["temperature"] == 0.5 and "beam_size" not in sampled
    assert "beam_size" not in DecodeConfig(search="greedy").recorded()
