"""Export a t2 model to CTranslate2 (https://github.com/OpenNMT/CTranslate2), built through
`ctranslate2.specs` so that every component maps onto the engine's own layers. How
CTranslate2 expresses a component, or the one line that says it cannot, is the component's
own fact (t2.facts.Ct2, beside its code): the options each gives the TransformerSpec, the
attributes it sets on each self-attention, and the table an additive positional scheme
adds (Positional.added_table, as `position_encodings`). What is t2's and not a component's
is here:

    t2                          CTranslate2 TransformerSpec
    norm weight and bias        each norm's `gamma` and `beta`
    a gated feed-forward        `ffn_glu` (linear_0 = gate, linear_0_noact = up)
    pre / post norm             `pre_norm`; a pre-norm stack's final norm is `layer_norm`
    model.n_kv_heads            `num_heads_kv` of both stacks (self- and cross-attention)
    model.qk_norm               `qk_norm`: each self-attention's `q_norm` and `k_norm`, of
                                the model's norm (a LayerNorm's with its beta)
    residual a x + b f(x)       folded into the weights (t2.serve.ct2_residual)
    tie_embeddings all/decoder/none  separate encoder and decoder embeddings and projection;
                                the spec stores equal matrices once
    embeddings x sqrt(d_model)  `scale_embeddings`
    decoder starts from BOS     `decoder_start_token` <s>; `add_source_bos` = data.src_bos
    model.attention             any kernel: they compute the same function

A component CTranslate2 cannot express fails at once in its own line. The format
(detection, reader, writer, files) is t2.formats.export.ct2.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import torch

from t2.config import Config, ModelConfig
from t2.errors import CheckpointError, ExportError
from t2.model.transformer import Transformer
from t2.registry import FFN, NORM, POSITIONAL, RESIDUAL, Registry
from t2.serve import QUANTIZATIONS
from t2.serve.ct2_residual import SublayerSpec, fold_stack

MAPPED: tuple[tuple[str, Registry], ...] = (  # the ModelConfig keys whose components map
    ("positional", POSITIONAL),
    ("norm", NORM),
    ("ffn", FFN),
    ("residual", RESIDUAL),
)
EXPORT_META = "t2_export.json"  # beside CTranslate2's files: what translation needs of the run
EXPORT_FORMAT = 1


def require_ctranslate2() -> None:
    if importlib.util.find_spec("ctranslate2") is None:
        raise ExportError(
            "ctranslate2 is not installed; install the serving extra: pip install -e '.[serve]'"
        )


def check_exportable(cfg: ModelConfig) -> None:
    """Fail in one line, naming the component, if CTranslate2 cannot express the model."""
    for key, registry in MAPPED:
        value = getattr(cfg, key)
        why = registry.facts(value).ct2.unexpressed
        if why:
            known = [n for n in registry.names() if not registry.facts(n).ct2.unexpressed]
            raise ExportError(
                f"model.{key}={value!r} has no CTranslate2 equivalent ({why}; exportable: "
                f"{', '.join(known)}); export a run with another model.{key}"
            )
    for key in ("n_encoder_layers", "n_decoder_layers"):
        if getattr(cfg, key) < 1:
            raise ExportError(
                f"model.{key}=0: CTranslate2 needs at least one layer in each stack; "
                f"export a run that has one"
            )


def position_table(model: Transformer) -> torch.Tensor | None:
    """The additive position table CTranslate2 adds after the scaled embeddings, (T, D) of
    model.max_positions rows; None where the scheme adds none."""
    table = model.positional.added_table(model.cfg.max_positions)
    return None if table is None else table.detach()


def _linear(spec: Any, layer: torch.nn.Linear) -> None:
    spec.weight = layer.weight.detach()
    if layer.bias is not None:
        spec.bias = layer.bias.detach()


def _norm(spec: Any, norm: torch.nn.Module) -> None:
    spec.gamma = norm.weight.detach()
    if getattr(norm, "bias", None) is not None:  # LayerNorm's beta; RMSNorm has none
        spec.beta = norm.bias.detach()


def _ffn(spec: Any, ffn: torch.nn.Module, norm: torch.nn.Module, gated: bool) -> None:
    _norm(spec.layer_norm, norm)
    if gated:  # act(x W_gate) * (x W_up), then W2
        _linear(spec.linear_0, ffn.w_gate)
        _linear(spec.linear_0_noact, ffn.w_up)
    else:
        _linear(spec.linear_0, ffn.w1)
    _linear(spec.linear_1, ffn.w2)


def _qk_norms(spec: Any, layer: Any, cfg: ModelConfig) -> None:
    """QK-norm's norms of an attention layer: RMSNorms in the spec unless the model's norm
    is not (then with its beta too); removed from the spec where the layer has none (a
    cross-attention, t2.model.attention)."""
    from ctranslate2.specs import common_spec  # optional dependency: the serve extra

    if layer.q_norm is None:
        for name in ("q_norm", "k_norm"):
            if hasattr(spec, name):
                delattr(spec, name)
        return
    rms = NORM.facts(cfg.norm).ct2.options.get("rms_norm", False)
    for name, norm in (("q_norm", layer.q_norm), ("k_norm", layer.k_norm)):
        setattr(spec, name, common_spec.LayerNormSpec(rms_norm=rms))
        _norm(getattr(spec, name), norm)


def _self_attention(spec: Any, layer: Any, norm: torch.nn.Module, cfg: ModelConfig) -> None:
    _norm(spec.layer_norm, norm)
    _linear(spec.linear[0], layer.qkv)  # fused [q; k; v], heads contiguous, as CTranslate2
    _linear(spec.linear[1], layer.out_proj)
    _qk_norms(spec, layer, cfg)
    for name, make in POSITIONAL.facts(cfg.positional).ct2.attention.items():
        setattr(spec, name, make(cfg, layer.positions))


def _stack_options(cfg: ModelConfig) -> dict[str, Any]:
    """Both stacks' TransformerSpec options: the placement of the norms, the key/value heads
    and QK-norm, then each
    component's own (a callable one made from the config)."""
    from ctranslate2.specs import common_spec  # optional dependency: the serve extra

    options: dict[str, Any] = {"pre_norm": cfg.norm_position == "pre", "qk_norm": cfg.qk_norm}
    if cfg.kv_heads != cfg.n_heads:
        options["num_heads_kv"] = cfg.kv_heads
    for key, registry in MAPPED:
        for name, value in registry.facts(getattr(cfg, key)).ct2.options.items():
            options[name] = value(cfg) if callable(value) else value
    if "activation" not in options:  # the spec's default would be ReLU, whatever the model's
        raise ExportError(
            f"model.ffn={cfg.ffn!r} names no CTranslate2 activation in its facts; give its "
            f"Ct2 options an `activation` or an `unexpressed` reason"
        )
    options["activation"] = getattr(common_spec.Activation, options["activation"])
    return options


def _sublayer_specs(layer_spec: Any, gated: bool) -> list[SublayerSpec]:
    """A layer's residual sublayers in the stream's order (as Layer.sublayers): what reads
    the stream, what writes the output, the norm. Cross-attention's keys and values read
    the encoder's memory, not the stream."""
    ffn = layer_spec.ffn
    ffn_reads = [ffn.linear_0, ffn.linear_0_noact] if gated else [ffn.linear_0]
    attention = layer_spec.self_attention
    out = [SublayerSpec([attention.linear[0]], attention.linear[1], attention.layer_norm)]
    cross = getattr(layer_spec, "attention", None)  # the decoder's
    if cross is not None:
        out.append(SublayerSpec([cross.linear[0]], cross.linear[2], cross.layer_norm))
    return [*out, SublayerSpec(ffn_reads, ffn.linear_1, ffn.layer_norm)]


def _fold_residuals(enc: Any, dec: Any, model: Transformer) -> None:
    """The connections of model.residual folded into each stack's weights."""
    cfg = model.cfg
    gated, pre = FFN.facts(cfg.ffn).gated, cfg.norm_position == "pre"
    for spec, embeddings, layers in (
        (enc, enc.embeddings[0], model.encoder),
        (dec, dec.embeddings, model.decoder),
    ):
        entry = [(embeddings, "weight"), (getattr(spec, "position_encodings", None), "encodings")]
        sublayers = [s for layer_spec in spec.layer for s in _sublayer_specs(layer_spec, gated)]
        connections = [wrapper.connection for layer in layers for wrapper, _ in layer.sublayers()]
        fold_stack(entry, sublayers, connections, pre, cfg.residual)


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
    gated = FFN.facts(cfg.ffn).gated
    for layer_spec, layer in zip(enc.layer, model.encoder, strict=True):
        _self_attention(layer_spec.self_attention, layer.self_attn, layer.res_attn.norm, cfg)
        _ffn(layer_spec.ffn, layer.ffn, layer.res_ffn.norm, gated)
    for layer_spec, layer in zip(dec.layer, model.decoder, strict=True):
        _self_attention(layer_spec.self_attention, layer.self_attn, layer.res_self.norm, cfg)
        cross = layer_spec.attention
        _norm(cross.layer_norm, layer.res_cross.norm)
        _linear(cross.linear[0], layer.cross_attn.q)
        _linear(cross.linear[1], layer.cross_attn.kv)  # fused [k; v]
        _linear(cross.linear[2], layer.cross_attn.out_proj)
        _qk_norms(cross, layer.cross_attn, cfg)
        _ffn(layer_spec.ffn, layer.ffn, layer.res_ffn.norm, gated)
    if cfg.norm_position == "pre":
        _norm(enc.layer_norm, model.encoder_norm)
        _norm(dec.layer_norm, model.decoder_norm)
    _fold_residuals(enc, dec, model)
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


def table_rows(model: Transformer) -> int | None:
    """Positions the export encodes (a table's rows), None where it has no limit."""
    return None if position_table(model) is None else model.cfg.max_positions


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
