"""Log-probabilities of completion tokens, without the full-vocabulary logits of the batch.

The trunk (``model.get_decoder()``, through a peft wrapper too) runs once over prompt and
completion and gives its last, normed hidden states. The LM head (``get_output_embeddings()``)
then runs only at the positions that predict a real completion token (padding is skipped), in
chunks of at most ``LOGIT_CHUNK_ELEMENTS`` logits, each temperature-scaled, log-softmaxed in fp32
and gathered at its token. With gradients on, each chunk is checkpointed, so the backward pass
recomputes one chunk's logits at a time instead of keeping every chunk's: at a 151,936-token
vocabulary, 64 rows of 1,024 tokens are ~40 GB of fp32 logits, one chunk 64 MiB.

A causal LM's own ``forward`` may change the logits after its head. Where its config names the
change (``logit_scale``: Cohere, ``logits_scaling``: Granite, ``final_logit_softcapping``: Gemma
2/3) it is applied here too; anything else is caught by the first pass over each model, which
checks the head's logits against the model's own on a few tokens and refuses (``ConfigError``)
a model they disagree for.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from harness.engine.rollout import Rollout, position_ids_of
from harness.errors import ConfigError

#: logits (tokens x vocabulary) computed at once: 2**24 fp32 logits are 64 MiB, so a chunk and
#: its log-softmax stay well under 1 GB at any vocabulary; the testbed's fits in one chunk
LOGIT_CHUNK_ELEMENTS = 2**24
#: tokens of a rollout's first row on which each model's own logits are compared with the head's
CHECK_TOKENS = 8
#: the head's logits may differ from the model's own by this many eps of its dtype (times the
#: largest logit): rounding, not a missing rescale (Cohere's 1/16) or softcap
CHECK_EPS = 8

_CHECKED: weakref.WeakSet = weakref.WeakSet()  # models whose head passed ``_check_head``


@dataclass
class Forward:
    logprobs: Tensor  # [B, T] log-prob of each completion token (temperature-scaled), 0 on padding
    entropy: Tensor | None  # [B, T] entropy of each position's distribution, 0 on padding; when asked
    hidden: Tensor | None  # [B, T, H] last hidden state at the position predicting each token; when asked
    # [B, T] sum over the vocabulary of each position's squared probabilities, 0 on padding; when asked
    sum_pi_squared: Tensor | None = None


def completion_hidden(model, rollout: Rollout) -> Tensor:
    """The trunk's last (normed) hidden states [B, T, H] at the positions that predict each
    completion token: what the LM head (or a value head) reads."""
    attention = rollout.attention_mask
    out = model.get_decoder()(
        input_ids=rollout.input_ids,
        attention_mask=attention,
        position_ids=position_ids_of(attention),
        use_cache=False,
    )
    start = rollout.prompt_ids.shape[1] - 1
    return out.last_hidden_state[:, start : start + rollout.completion_ids.shape[1]]


def completion_forward(
    model,
    rollout: Rollout,
    *,
    temperature: float,
    want_entropy: bool = False,
    entropy_grad: bool = False,
    want_hidden: bool = False,
    want_sum_pi_squared: bool = False,
) -> Forward:
    """Log-probs (with grad if enabled) of the completion tokens under ``model``, and the
    entropy of each position, the hidden states and the sum of squared probabilities over the
    vocabulary (verl's ``sum_pi_squared``, what the optimal token baseline reads) when asked for.

    The entropy carries a gradient only with ``entropy_grad`` (a loss with an entropy term):
    a checkpointed chunk's output that the backward pass never reaches would keep that chunk's
    recomputed logits alive until the backward pass ends, every chunk's at once."""
    _check_head(model, rollout)
    hidden = completion_hidden(model, rollout)
    real = rollout.completion_mask.bool()
    head = model.get_output_embeddings()
    per_chunk = max(1, LOGIT_CHUNK_ELEMENTS // head.weight.shape[0])
    terms = _token_terms_checkpointed if torch.is_grad_enabled() else _token_terms
    chunks = [
        terms(model, states, tokens, temperature, want_entropy, entropy_grad, want_sum_pi_squared)
        for states, tokens in zip(hidden[real].split(per_chunk), rollout.completion_ids[real].split(per_chunk))
    ]
    logprobs, *rest = (_placed(real, list(values)) for values in zip(*chunks))
    entropy = rest.pop(0) if want_entropy else None
    sum_pi_squared = rest.pop(0) if want_sum_pi_squared else None
    return Forward(logprobs, entropy, hidden if want_hidden else None, sum_pi_squared)


def _placed(real: Tensor, values: list[Tensor]) -> Tensor:
    """Per-token values [N] of the real tokens back in their [B, T] places, 0 on padding."""
    return torch.zeros(real.shape, device=real.device).masked_scatter(real, torch.cat(values))


def _logits(model, hidden: Tensor) -> Tensor:
    """The logits the causal LM's own forward makes of these hidden states, in fp32."""
    config = model.config
    logits = model.get_output_embeddings()(hidden).float()
    if getattr(config, "logit_scale", None):
        logits = logits * config.logit_scale
    if getattr(config, "logits_scaling", None):
        logits = logits / config.logits_scaling
    cap = getattr(config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def _token_terms(
    model,
    hidden: Tensor,
    tokens: Tensor,
    temperature: float,
    want_entropy: bool,
    entropy_grad: bool,
    want_sum_pi_squared: bool = False,
) -> tuple[Tensor, ...]:
    """Log-prob of each token [N] (then the entropy [N], the sum of squared probabilities [N],
    each when asked) from hidden states [N, H]."""
    logp_all = F.log_softmax(_logits(model, hidden) / temperature, dim=-1)
    logprobs = logp_all.gather(-1, tokens[:, None]).squeeze(-1)
    terms = [logprobs]
    if want_entropy:
        source = logp_all if entropy_grad else logp_all.detach()
        terms.append(-(source.exp() * source).sum(-1))
    if want_sum_pi_squared:
        terms.append((2 * logp_all.detach()).exp().sum(-1))
    return tuple(terms)


def _token_terms_checkpointed(
    model, hidden, tokens, temperature, want_entropy, entropy_grad, want_sum_pi_squared=False
) -> tuple[Tensor, ...]:
    """``_token_terms`` keeping nothing of the chunk's logits for the backward pass, which
    recomputes them."""
    return checkpoint(
        _token_terms,
        model,
        hidden,
        tokens,
        temperature,
        want_entropy,
        entropy_grad,
        want_sum_pi_squared,
        use_reentrant=False,
    )


def _check_head(model, rollout: Rollout) -> None:
    """Refuse, on its first pass, a model whose own logits ``_logits`` does not reproduce: one
    that changes them after its head in a way its config does not name. Run in eval mode, so
    dropout neither differs between the two passes nor draws random numbers."""
    if model in _CHECKED:
        return
    ids = rollout.input_ids[:1, rollout.attention_mask[0].bool()][:, :CHECK_TOKENS]
    ones = torch.ones_like(ids)
    training = model.training
    model.eval()
    try:
        with torch.no_grad():
            theirs = model(input_ids=ids, attention_mask=ones, use_cache=False).logits.float()
            hidden = model.get_decoder()(input_ids=ids, attention_mask=ones, use_cache=False).last_hidden_state
            ours = _logits(model, hidden)
    finally:
        model.train(training)
    tolerance = CHECK_EPS * torch.finfo(hidden.dtype).eps
    if not torch.allclose(ours, theirs, rtol=tolerance, atol=tolerance * float(theirs.abs().max())):
        gap = float((ours - theirs).abs().max())
        raise ConfigError(
            f"{type(model).__name__}: its forward changes the logits after the LM head in a way the "
            f"chunked log-probs do not reproduce (they differ by up to {gap:.3g}); only logit_scale, "
            "logits_scaling and final_logit_softcapping in the config are known"
        )
    _CHECKED.add(model)
