"""DeepNorm, Wang et al. 2022, "DeepNet: Scaling Transformers to 1,000 Layers"
(arXiv:2203.00555): x_{l+1} = LN(alpha x_l + f(x_l)), with the weights that write into the
stream (the feed-forward's, attention's values and output projection) initialised smaller
by beta. The constants are the paper's (Figure 2, Table 1) for an encoder-decoder with N
encoder and M decoder layers:

    encoder   alpha = 0.81 (N^4 M)^(1/16)   beta = 0.87 (N^4 M)^(-1/16)
    decoder   alpha = (3M)^(1/4)            beta = (12M)^(-1/4)

and, for an encoder with no decoder layers, the paper's encoder-only (2N)^(1/4) and
(8N)^(-1/4). Figure 2 draws those weights with xavier_normal_(gain=beta) and queries and
keys with gain 1; here beta scales what model.init drew (xavier by default: the same
standard deviation), as the authors' torchscale does. alpha is a constant, not learned.
Defined for post-norm only: before a pre-norm sublayer alpha would compound, alpha^L."""

from __future__ import annotations

import torch
from torch import nn

from t2.facts import Ct2, ResidualFacts
from t2.model.attention import CrossAttention, SelfAttention
from t2.model.residual import Connection, Depth
from t2.registry import RESIDUAL

Tensor = torch.Tensor


def constants(depth: Depth) -> tuple[float, float]:
    """(alpha, beta) of a sublayer at `depth` (the module's table)."""
    n, m = depth.n_encoder_layers, depth.n_decoder_layers
    if depth.decoder:
        return (3 * m) ** (1 / 4), (12 * m) ** (-1 / 4)
    if m == 0:  # an encoder alone
        return (2 * n) ** (1 / 4), (8 * n) ** (-1 / 4)
    return 0.81 * (n**4 * m) ** (1 / 16), 0.87 * (n**4 * m) ** (-1 / 16)


def written(sublayer: nn.Module) -> list[Tensor]:
    """The matrices beta scales: attention's values and output projection (not queries and
    keys, which choose where to read), and every matrix of any other sublayer (the FFN)."""
    if isinstance(sublayer, (SelfAttention, CrossAttention)):
        return sublayer.values_and_output()
    return [m.weight for m in sublayer.modules() if isinstance(m, nn.Linear)]


@RESIDUAL.register(
    "deepnorm",
    ResidualFacts(
        params=lambda d_model: 0,
        normed=True,
        placements=("post",),
        # alpha is folded exactly into the stream's scale (t2.serve.ct2_residual)
        ct2=Ct2(),
    ),
)
class DeepNorm(Connection):
    """alpha x + y, and beta on the sublayer's initial writing weights (the module doc)."""

    def __init__(self, d_model: int, depth: Depth) -> None:
        super().__init__(d_model, depth)
        self.alpha, self.beta = constants(depth)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return self.alpha * x + y

    def coefficients(self) -> tuple[Tensor, Tensor]:
        return torch.tensor(self.alpha), torch.tensor(1.0)

    @torch.no_grad()
    def initialise(self, sublayer: nn.Module) -> None:
        for weight in written(sublayer):
            weight.mul_(self.beta)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha:.4f}, beta={self.beta:.4f}"
