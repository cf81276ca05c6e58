"""The attention probabilities of a trained model on one batch, by kind, layer and head."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from t2.model.attention import record_attention
from t2.model.transformer import Transformer

Tensor = torch.Tensor


@dataclass(frozen=True)
class AttentionMaps:
    """Softmax weights of every layer and head, (B, L, H, queries, keys): the encoder's
    self-attention (source x source), the decoder's causal self-attention (target x target)
    and its cross-attention (target x source)."""

    encoder_self: Tensor
    decoder_self: Tensor
    cross: Tensor

    def kinds(self) -> dict[str, Tensor]:
        return {
            "encoder_self": self.encoder_self,
            "decoder_self": self.decoder_self,
            "cross": self.cross,
        }


@torch.no_grad()
def capture_attention(model: Transformer, src: Tensor, tgt_in: Tensor) -> AttentionMaps:
    """One teacher-forced pass over padded ids src (B, S) and tgt_in (B, T) (BOS + target),
    in eval mode, recording what each attention layer attends to; the model's output is
    the same as without recording (the explicit kernel, equal to the fused ones)."""
    was_training = model.training
    model.eval()
    try:
        with record_attention(model) as records:
            model(src, tgt_in)
    finally:
        model.train(was_training)

    def stack(stack_name: str, sublayer: str, n_layers: int) -> Tensor:
        names = [f"{stack_name}.{i}.{sublayer}" for i in range(n_layers)]
        return torch.stack([records[n][0] for n in names], dim=1).float().cpu()

    n_enc, n_dec = len(model.encoder), len(model.decoder)
    return AttentionMaps(
        encoder_self=stack("encoder", "self_attn", n_enc),
        decoder_self=stack("decoder", "self_attn", n_dec),
        cross=stack("decoder", "cross_attn", n_dec),
    )
