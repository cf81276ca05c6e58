"""Export a t2 model to CTranslate2 (https://github.com/OpenNMT/CTranslate2), built through
`ctranslate2.specs` so that every registered component maps onto the engine's own layers:

    t2                          CTranslate2 TransformerSpec
    sinusoidal positions        the table as `position_encodings` (CTranslate2's built-in
                                sinusoids count from 1 with another frequency step)
    learned positions           `position_encodings`, the same table
    rope                        `rotary_dim=0`, `rotary_interleave=False` (t2 rotates halves),
                                `rotary_base`, self-attention only, as t2 does
    none                        relative positions (Shaw et al. 2018) whose tables are zero:
                                attention gets no positional term, and no length limit
    layernorm / rmsnorm         `rms_norm`, with `layer_norm_epsilon` = model.norm_eps
    relu / gelu / swiglu / geglu  Activation.RELU / GELU (erf, as F.gelu) / SWISH / GELU with
                                `ffn_glu` (linear_0 = gate, linear_0_noact = up)
    pre / post norm             `pre_norm`; a pre-norm stack's final norm is `layer_norm`
    tie_embeddings all/decoder/none  separate encoder and decoder embeddings and projection;
                                the spec stores equal matrices once
    embeddings x sqrt(d_model)  `scale_embeddings`
    decoder starts from BOS     `decoder_start_token` <s>; `add_source_bos` = data.src_bos

A component without an entry here fails at once with one line naming it. The format
(detection, reader, writer, files) is t2.formats.ct2.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import torch

from t2.config import Config, ModelConfig
from t2.errors import CheckpointError, ExportError
from t2.model.positional import sinusoid_table
from t2.model.transformer import Transformer
from t2.serve import QUANTIZATIONS

POSITIONS = ("sinusoidal", "learned", "rope", "none")
# why a registered component has no mapping, where the reason is CTranslate2's
UNEXPRESSED = {"alibi": "CTranslate2 has ALiBi in decoder-only models, not in encoders"}
NORMS = {"layernorm": False, "rmsnorm": True}  # name -> rms_norm
FFNS = {
    "relu": ("RELU", False),
    "gelu": ("GELU", False),
    "swiglu": ("SWISH", True),
    "geglu": ("GELU", True),
}  # name -> (Activation member, ffn_glu); GELU is erf's
TABLE_POSITIONS = ("sinusoidal", "learned")  # exported as a table of model.max_positions rows
EXPORT_META = "t2_export.json"  # beside CTranslate2's files: what translation needs of the run
EXPORT_FORMAT = 1


def require_ctranslate2() -> None:
    if importlib.util.find_spec("ctranslate2") is None:
        raise ExportError(
            "ctranslate2 is not installed; install the serving extra: pip install -e '.[serve]'"
        )


def check_exportable(cfg: ModelConfig) -> None:
    """Fail in one line, naming the component, if CTranslate2 cannot express the model."""
    for key, value, known in (
        ("positional", cfg.positional, POSITIONS),
        ("norm", cfg.norm, NORMS),
        ("ffn", cfg.ffn, FFNS),
    ):
        if value not in known:
            why = f"{UNEXPRESSED[value]}; " if value in UNEXPRESSED else ""
            raise ExportError(
                f"model.{key}={value!r} has no CTranslate2 equivalent ({why}exportable: "
                f"{', '.join(known)}); export a run with another model.{key}"
            )
    for key in ("n_encoder_layers", "n_decoder_layers"):
        if getattr(cfg, key) < 1:
            raise ExportError(
                f"model.{key}=0: CTranslate2 needs at least one layer in each stack; "
                f"export a run that has one"
            )


def position_table(model: Transformer) -> torch.Tensor | None:
    """The additive position table CTranslate2 adds after the scaled embeddings, (T, D)."""
    cfg = model.cfg
    if cfg.positional == "learned":
        return model.positional.weight.detach()
    if cfg.positional == "sinusoidal":  # t2's layout: sin at even, cos at odd dimensions
        return sinusoid_table(cfg.max_positions, cfg.d_model, cfg.rope_base)
    return None


def _linear(spec: Any, layer: torch.nn.Linear) -> None:
    spec.weight = layer.weight.detach()
    if layer.bias is not None:
        spec.bias = layer.bias.detach()


def _norm(spec: Any, norm: torch.nn.Module) -> None:
    spec.gamma = norm.weight.detach()
    if getattr(norm, "bias", None) is not None:  # LayerNorm's beta; RMSNorm has none
        spec.beta = norm.bias.detach()


def _ffn(spec: Any, ffn: torch.nn.Module, norm: torch.nn.Module) -> None:
    _norm(spec.layer_norm, norm)
    if ffn.gated:  # act(x W_gate) * (x W_up), then W2
        _linear(spec.linear_0, ffn.w_gate)
        _linear(spec.linear_0_noact, ffn.w_up)
    else:
        _linear(spec.linear_0, ffn.w1)
    _linear(spec.linear_1, ffn.w2)


def _self_attention(spec: Any, layer: Any, norm: torch.nn.Module, cfg: ModelConfig) -> None:
    _norm(spec.layer_norm, norm)
    _linear(spec.linear[0], layer.qkv)  # fused [q; k; v], heads contiguous, as CTranslate2
    _linear(spec.linear[1], layer.out_proj)
    if cfg.positional == "none":  # zero relative keys and values, max distance 1: no term
        zeros = torch.zeros(3, cfg.d_head)
        spec.relative_position_keys, spec.relative_position_values = zeros, zeros


def _stack_options(cfg: ModelConfig) -> dict[str, Any]:
    from ctranslate2.specs import common_spec  # optional dependency: the serve extra

    activation, glu = FFNS[cfg.ffn]
    options: dict[str, Any] = dict(
        pre_norm=cfg.norm_position == "pre",
        activation=getattr(common_spec.Activation, activation),
        ffn_glu=glu,
        rms_norm=NORMS[cfg.norm],
        relative_position=cfg.positional == "none",
    )
    if cfg.positional == "rope":
        options.update(rotary_dim=0, rotary_interleave=False, rotary_base=cfg.rope_base)
    return options


def build_spec(model: Transformer, tokens: list[str], src_bos: bool) -> Any:
    """A CTranslate2 TransformerSpec holding the model's weights and its vocabulary."""
    from ctranslate2.specs import transformer_spec  # optional dependency: the serve extra

    cfg = model.cfg
    check_exportable(cfg)
    options = _stack_options(cfg)
    enc = transformer_spec.TransformerEncoderSpec(cfg.n_encoder_layers, cfg.n_heads, **options)
    dec = transformer_spec.TransformerDecoderSpec(cfg.n_decoder_layers, cfg.n_heads, **options)
    enc.embeddings[0].weight = model.src_embed.weight.detach()
    dec.embeddings.weight = model.tgt_embed.weight.detach()
    out = model.output if model.output is not None else model.tgt_embed
    dec.projection.weight = out.weight.detach()
    table = position_table(model)
    if table is not None:
        enc.position_encodings.encodings = dec.position_encodings.encodings = table
    for layer_spec, layer in zip(enc.layer, model.encoder, strict=True):
        _self_attention(layer_spec.self_attention, layer.self_attn, layer.res_attn.norm, cfg)
        _ffn(layer_spec.ffn, layer.ffn, layer.res_ffn.norm)
    for layer_spec, layer in zip(dec.layer, model.decoder, strict=True):
        _self_attention(layer_spec.self_attention, layer.self_attn, layer.res_self.norm, cfg)
        cross = layer_spec.attention
        _norm(cross.layer_norm, layer.res_cross.norm)
        _linear(cross.linear[0], layer.cross_attn.q)
        _linear(cross.linear[1], layer.cross_attn.kv)  # fused [k; v]
        _linear(cross.linear[2], layer.cross_attn.out_proj)
        _ffn(layer_spec.ffn, layer.ffn, layer.res_ffn.norm)
    if cfg.norm_position == "pre":
        _norm(enc.layer_norm, model.encoder_norm)
        _norm(dec.layer_norm, model.decoder_norm)
    spec = transformer_spec.TransformerSpec(enc, dec)
    spec.config.layer_norm_epsilon = cfg.norm_eps
    spec.config.add_source_bos, spec.config.add_source_eos = src_bos, True
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    return spec


def vocabulary(tokenizer: Any, size: int) -> list[str]:
    """The token of each id, 0 .. size-1 (the spec's vocabulary, shared by both sides)."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(size)))
    if len(set(tokens)) != size or None in tokens:
        raise ExportError(f"the tokenizer does not name {size} distinct tokens; retrain it")
    return tokens


def save_spec(model: Transformer, cfg: Config, tokenizer: Any, folder: str, quant: str) -> None:
    """model.bin, config.json and shared_vocabulary.json of CTranslate2 into `folder`."""
    require_ctranslate2()
    if quant not in QUANTIZATIONS:
        raise ExportError(f"unknown quantization {quant!r}; valid: {', '.join(QUANTIZATIONS)}")
    tokens = vocabulary(tokenizer, cfg.model.vocab_size)
    spec = build_spec(model, tokens, cfg.data.src_bos)
    spec.validate()
    spec.optimize(quantization=quant)
    spec.save(folder)


def table_rows(cfg: ModelConfig) -> int | None:
    """Positions the export encodes (a table's rows), None where it has no limit."""
    return cfg.max_positions if cfg.positional in TABLE_POSITIONS else None


def is_export(path: str | Path) -> bool:
    return (Path(path) / EXPORT_META).is_file()


def read_export(path: str | Path) -> tuple[dict[str, Any], Config]:
    """An export's EXPORT_META and the run's config it holds."""
    meta_path = Path(path) / EXPORT_META
    if not meta_path.is_file():
        raise CheckpointError(
            f"{path} is not a CTranslate2 export (no {EXPORT_META}); write one with "
            f"t2 export RUN --format ct2 --out DIR"
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise CheckpointError(f"{meta_path} is not valid JSON; export the run again") from None
    if not isinstance(meta, dict) or meta.get("format") != EXPORT_FORMAT:
        raise CheckpointError(
            f"{meta_path} is not export format {EXPORT_FORMAT}; export the run again with this t2"
        )
    return meta, Config.from_dict(meta["config"])
