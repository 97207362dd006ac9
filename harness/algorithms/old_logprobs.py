"""Where the importance ratio's old log-probs come from: the sampler's, or a training forward pass.

The sampler scores each token as it draws it, one position at a time against a KV cache; an
update scores the whole completion in one forward pass. In fp32 the two agree to about 5e-7 per
token; in bf16 they differ by up to a few 1e-3, so pi/pi_old is not 1 before the first update and
a narrow clip band (GSPO's 3e-4) clips sequences that no update has moved. A part of this slot
answers, from the dtypes of the policy's weights, whether the step recomputes the old log-probs:
one forward pass of the policy over the rollout before the updates, without gradient and in eval
mode, as the actors of verl and OpenRLHF recompute theirs. The step then logs the gap between
the sampler's log-probs and the recomputed ones (``train/old_logprob_gap``). A mismatch correction
(``mismatch.py``) weighs the two against each other, so with one the step always recomputes.
"""

from __future__ import annotations

from collections.abc import Collection

import torch

from harness.algorithms.config import RLConfig
from harness.algorithms.parts import MISMATCH, OLD_LOGPROBS

#: weight dtypes in which the sampler's log-probs drift from a training forward pass
LOW_PRECISION = frozenset({torch.bfloat16, torch.float16})


@OLD_LOGPROBS.implements("sampler", cites="the sampler's own log-probs (TRL without vLLM)")
def from_sampler(weight_dtypes: Collection[torch.dtype]) -> bool:
    """Keep the sampler's log-probs: no extra forward pass."""
    return False


@OLD_LOGPROBS.implements("recompute", cites="a training forward pass, as the actors of verl and OpenRLHF")
def recompute(weight_dtypes: Collection[torch.dtype]) -> bool:
    """Recompute them with the training forward pass, whatever the precision."""
    return True


@OLD_LOGPROBS.implements("auto", cites="recompute where the weights are bf16/fp16")
def by_precision(weight_dtypes: Collection[torch.dtype]) -> bool:
    """Recompute where any weight is bf16 or fp16 (a real model on CUDA with ``dtype: auto``);
    keep the sampler's in fp32, where they already match (the CPU testbed)."""
    return bool(LOW_PRECISION.intersection(weight_dtypes))


def recomputes_old_logprobs(cfg: RLConfig, weight_dtypes: Collection[torch.dtype]) -> bool:
    """Whether ``cfg``'s source recomputes the old log-probs for a policy with these weight dtypes,
    or its mismatch correction needs them."""
    return OLD_LOGPROBS.get(cfg.old_logprobs)(weight_dtypes) or MISMATCH.meta(cfg.mismatch)["compares"]
