"""Which tokens the policy loss reads, as a 0/1 weight per token.

``top_entropy`` keeps the ``entropy_top_share`` of tokens with the highest entropy of the current
policy at their position (Wang et al. 2025, "Beyond the 80/20 Rule: High-Entropy Minority Tokens
Drive Effective RL for LLM Reasoning", arXiv:2506.01939, which keeps 20%): a token is kept where
its entropy is at least the ``1 - share`` quantile (linear interpolation, ``torch.quantile``) of
the entropies of the real tokens of the rows the loss is given, as TRL's ``get_high_entropy_mask``
(its ``top_entropy_quantile``). Those rows are a micro-batch where ``train.micro_batch_size`` splits
a minibatch, as TRL's per-device batch. The others get weight 0 and keep their place in the
denominator, as TRL's (the aggregation's normaliser is unchanged, so the policy term is about
``share`` times smaller; AdamW's step is nearly scale-free). The KL and entropy terms read every
token.

Every filter is ``fn(entropy, mask, cfg) -> (weights [B, T], metrics)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from harness.algorithms.config import RLConfig
from harness.algorithms.losses import masked_share
from harness.algorithms.parts import TOKEN_FILTERS


def token_filter_weights(entropy: Tensor, mask: Tensor, cfg: RLConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """The weight of every token's policy term under ``cfg.token_filter``, and its metrics."""
    return TOKEN_FILTERS.get(cfg.token_filter)(entropy, mask, cfg)


@TOKEN_FILTERS.implements("all", cites="every token")
def all_tokens(entropy: Tensor, mask: Tensor, cfg: RLConfig) -> tuple[Tensor, dict[str, Tensor]]:
    return torch.ones_like(mask), {}


@TOKEN_FILTERS.implements(
    "top_entropy", cites="Wang et al. 2025, Beyond the 80/20 Rule (arXiv:2506.01939); TRL top_entropy_quantile"
)
def top_entropy(entropy: Tensor, mask: Tensor, cfg: RLConfig) -> tuple[Tensor, dict[str, Tensor]]:
    """1 where the entropy is at least the ``1 - entropy_top_share`` quantile of the real tokens'."""
    on = mask.bool()
    entropy = entropy.detach()
    real = entropy[on]
    if real.numel() == 0:
        kept = torch.zeros_like(on)
    else:
        kept = on & (entropy >= torch.quantile(real, 1 - cfg.entropy_top_share))
    return kept.to(mask.dtype), {"token_filter_kept": masked_share(kept, mask)}
