"""Sampling completions with their log-probabilities and masks (recomputed in ``logprobs.py``).

Prompts are left-padded so every completion starts at the same column. Sampling uses an explicit
``torch.Generator``: the same seed gives the same tokens. Log-probabilities are always taken from
temperature-scaled logits, during sampling and in training, so the importance ratio is 1 before
the first update: to rounding in fp32; in bf16 the sampler's cached passes drift from a training
forward pass by up to a few 1e-3 per token, which ``old_logprobs`` (``harness.algorithms.old_logprobs``)
removes by recomputing them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import Cache, DynamicCache
from transformers.cache_utils import CacheLayerMixin, get_layer_types_and_kwargs

from harness.engine.models import LoadedModel


@dataclass
class Rollout:
    prompt_ids: torch.Tensor  # [B, P] left-padded
    prompt_mask: torch.Tensor  # [B, P] 1 on real prompt tokens
    completion_ids: torch.Tensor  # [B, T] right-padded with pad
    #: [B, T] float, 1 on the tokens the loss, the KL, the entropy and the length count read: the
    #: generated ones including EOS (in a tool-calling episode, the policy's turns only)
    completion_mask: torch.Tensor
    logprobs: torch.Tensor  # [B, T] sampling log-probs (0 on padding and on tokens the policy did not write)
    #: [B, T] 1 on every real completion token, the ones a tool wrote included; None: the completion mask
    completion_attention: torch.Tensor | None = None
    #: [B, T] 1 on the tokens the policy sampled (``logprobs`` holds theirs); None: the completion mask
    sampled_mask: torch.Tensor | None = None
    #: [B] long: the version of the policy that sampled each row (the optimiser steps it had taken);
    #: None: the policy being trained, as it is now
    policy_version: torch.Tensor | None = None

    @property
    def input_ids(self) -> torch.Tensor:
        return torch.cat([self.prompt_ids, self.completion_ids], dim=1)

    @property
    def attention_mask(self) -> torch.Tensor:
        real = self.completion_mask if self.completion_attention is None else self.completion_attention
        return torch.cat([self.prompt_mask, real.to(self.prompt_mask.dtype)], dim=1)

    @property
    def sampled(self) -> torch.Tensor:
        return self.completion_mask if self.sampled_mask is None else self.sampled_mask

    @property
    def unsampled_in_loss(self) -> bool:
        """Whether the loss reads tokens the policy did not sample (tool tokens left unmasked, an
        ablation): their old log-probs must come from a forward pass."""
        return self.sampled_mask is not None and bool((self.completion_mask > self.sampled_mask).any())

    def rows(self, index: torch.Tensor) -> Rollout:
        return Rollout(*(None if t is None else t[index] for t in vars(self).values()))

    def to(self, device) -> Rollout:
        return Rollout(*(None if t is None else t.to(device) for t in vars(self).values()))

    def cut_off(self, eos_id: int) -> torch.Tensor:
        """[B] bool: rows whose last sampled token is not EOS, so the token budget (or, in an
        episode, the turn limit) ended them."""
        sampled = self.sampled.bool()
        last = (sampled.cumsum(1) == sampled.sum(1, keepdim=True)) & sampled
        return ~(last & (self.completion_ids == eos_id)).any(dim=1)


def join_rollouts(parts: list[Rollout], pad_id: int) -> Rollout:
    """The rows of several rollouts as one: prompts left-padded to the widest prompt (every
    completion still starts at one column), completions right-padded to the widest completion."""
    prompt_width = max(p.prompt_ids.shape[1] for p in parts)
    width = max(p.completion_ids.shape[1] for p in parts)

    def joined(name: str, pad, left: bool) -> torch.Tensor | None:
        tensors = [getattr(p, name) for p in parts]
        if all(t is None for t in tensors):
            return None
        tensors = [p.completion_mask if t is None else t for p, t in zip(parts, tensors)]  # what None means
        target = prompt_width if left else width
        padded = [F.pad(t, (target - t.shape[1], 0) if left else (0, target - t.shape[1]), value=pad) for t in tensors]
        return torch.cat(padded)

    return Rollout(
        prompt_ids=joined("prompt_ids", pad_id, left=True),
        prompt_mask=joined("prompt_mask", 0, left=True),
        completion_ids=joined("completion_ids", pad_id, left=False),
        completion_mask=joined("completion_mask", 0, left=False),
        logprobs=joined("logprobs", 0, left=False),
        completion_attention=joined("completion_attention", 0, left=False),
        sampled_mask=joined("sampled_mask", 0, left=False),
        policy_version=None if parts[0].policy_version is None else torch.cat([p.policy_version for p in parts]),
    )


def pad_rows(
    rows: list[list], pad, *, left: bool, dtype: torch.dtype = torch.long, device=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` of unequal length as one tensor, padded with ``pad`` on the left (prompts: every
    completion starts at the same column) or on the right, and the mask of their real entries."""
    width = max(len(row) for row in rows)
    values = torch.full((len(rows), width), pad, dtype=dtype)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if left else slice(0, len(row))
        values[i, span] = torch.tensor(row, dtype=dtype)
        mask[i, span] = 1
    return values.to(device), mask.to(device)


def prompt_token_ids(lm: LoadedModel, prompts: list[str]) -> list[list[int]]:
    """Each prompt's token ids as the model reads them: through the chat template when it uses
    one, else with BOS when the tokenizer defines one. Every backend's prompts are these."""
    tok = lm.tokenizer
    texts = [lm.format_prompt(p) for p in prompts]
    encoded = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    if tok.bos_token_id is not None and not lm.use_chat_template:
        encoded = [[tok.bos_token_id] + ids for ids in encoded]
    return encoded


def encode_prompts(lm: LoadedModel, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded token ids (``prompt_token_ids``) and attention mask."""
    return pad_rows(prompt_token_ids(lm, prompts), lm.tokenizer.pad_token_id, left=True, device=lm.device)


def position_ids_of(mask: torch.Tensor) -> torch.Tensor:
    """Each token's position among its row's real tokens (left padding at 0): what the model is given."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


#: tokens between two host reads of how many rows are done (the decode loop's own only syncs)
CHECK_EVERY = 8
#: at a check, the finished rows leave the decode batch once they are this share of it
DROP_SHARE = 0.25


class InPlaceLayer(CacheLayerMixin):
    """One attention layer's keys and values, preallocated for ``max_cache_len`` positions and
    written in place. Unlike ``StaticLayer``, whose attention reads the whole buffer at every token
    (on CPU that costs more than the copies it saves, at long budgets), ``update`` returns the
    positions written so far, as a view: nothing is copied and attention reads what it needs."""

    is_sliding = False

    def __init__(self, max_cache_len: int):
        super().__init__()
        self.max_cache_len, self.cumulative_length = max_cache_len, 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        rows_heads = key_states.shape[:2]
        self.keys = key_states.new_zeros((*rows_heads, self.max_cache_len, key_states.shape[-1]))
        self.values = value_states.new_zeros((*rows_heads, self.max_cache_len, value_states.shape[-1]))
        self.device, self.is_initialized = key_states.device, True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start, end = self.cumulative_length, self.cumulative_length + key_states.shape[-2]
        self.keys[:, :, start:end] = key_states
        self.values[:, :, start:end] = value_states
        self.cumulative_length = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.cumulative_length + query_length, 0

    def get_seq_length(self) -> int:
        return self.cumulative_length

    def get_max_length(self) -> int:
        return self.max_cache_len


def kv_cache(model, max_len: int, preallocate: bool = True) -> Cache:
    """A cache of ``InPlaceLayer``s for ``max_len`` positions when ``preallocate`` and every layer
    of the model is full attention; else transformers' ``DynamicCache`` (it grows by concatenation),
    which also knows the other layer kinds (sliding windows, recurrent states)."""
    config = model.config.get_text_config(decoder=True)
    layer_types, _ = get_layer_types_and_kwargs(config)
    if preallocate and all(kind == "full_attention" for kind in layer_types):
        return Cache(layers=[InPlaceLayer(max_len) for _ in layer_types])
    return DynamicCache(config=config)


def _draw(logp_all: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sampling: per row the first token whose cumulative probability passes ``uniform``
    (one draw per row instead of ``multinomial``'s one per vocabulary entry; zero-probability
    tokens are never drawn, as a token's interval is empty)."""
    cdf = logp_all.exp().cumsum(-1)
    token = torch.searchsorted(cdf, (uniform * cdf[:, -1])[:, None], right=True).squeeze(-1)
    return token.clamp_(max=cdf.shape[-1] - 1)  # uniform * total rounded up to the total


def _prefill(
    model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, max_new_tokens: int, group_size: int, preallocate: bool
) -> tuple[Cache, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each prompt's pass, once, its cache and last logits then copied to its ``group_size`` rows:
    the cache, the logits of each row's next token, the attention mask over the prompt and the
    whole budget, and each row's next position."""
    n = len(prompt_ids)
    cache = kv_cache(model, prompt_ids.shape[1] + max_new_tokens, preallocate)
    attention = torch.cat([prompt_mask, prompt_mask.new_ones(n, max_new_tokens)], dim=1)
    positions = position_ids_of(prompt_mask)
    # logits of the last prompt position only: a real vocabulary over every prompt position is GBs
    out = model(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        position_ids=positions,
        cache=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    logits, next_pos = out.logits[:, -1, :], positions[:, -1:] + 1
    if group_size > 1:
        index = torch.arange(n, device=prompt_ids.device).repeat_interleave(group_size)
        cache.reorder_cache(index)
        logits, attention, next_pos = logits[index], attention[index], next_pos[index]
    return cache, logits, attention, next_pos


@torch.no_grad()
def sample(
    lm: LoadedModel,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    *,
    max_new_tokens: int,
    temperature: float,
    generator: torch.Generator | None,  # on the model's device
    greedy: bool = False,
    group_size: int = 1,
    preallocate: bool = True,
    stop: torch.Tensor | None = None,
) -> Rollout:
    """Generate up to ``max_new_tokens`` per row, ``group_size`` rows per prompt (prompt i: rows
    i*G..i*G+G-1); rows stop at EOS.

    Each prompt is prefilled once, then its cache and last logits are copied to its G rows. The
    cache is preallocated for the prompt width plus the budget and written in place (``kv_cache``);
    the attention mask is built once at that width, 1 on every completion column, and each step
    passes a view of its first columns (a finished row's later columns are never read back).

    A row also stops once its last tokens are ``stop`` (token ids, e.g. a tool call's closing tag),
    which it keeps, as it keeps EOS.

    Finished rows stay in the decode batch until a check, every ``CHECK_EVERY`` tokens (the loop's
    own only reads from the device), finds them ``DROP_SHARE`` of it or more; then they leave it,
    cache included. A compaction copies the live rows' cache once, about what the attention of a
    decode step reads anyway, and there are few: at most one per check, each shrinking the batch
    by a quarter or more. Sampling draws one uniform per row and token for every row, dropped or
    not, so which rows are still in the batch never changes a row's draw.
    """
    model, eos, pad = lm.model, lm.tokenizer.eos_token_id, lm.tokenizer.pad_token_id
    width, rows, device = prompt_ids.shape[1], len(prompt_ids) * group_size, prompt_ids.device
    prefilled = _prefill(model, prompt_ids, prompt_mask, max_new_tokens, group_size, preallocate)
    cache, logits, attention, next_pos = prefilled
    live = torch.arange(rows, device=device)  # the output row of each row of the decode batch
    done = torch.zeros(rows, dtype=torch.bool, device=device)
    tokens = torch.full((rows, max_new_tokens), pad, dtype=torch.long, device=device)
    logps = torch.zeros((rows, max_new_tokens), device=device)
    masks = torch.zeros((rows, max_new_tokens), device=device)
    for step in range(max_new_tokens):
        logp_all = F.log_softmax(logits.float() / temperature, dim=-1)
        if greedy:
            token = logp_all.argmax(-1)
        else:
            token = _draw(logp_all, torch.rand(rows, generator=generator, device=device)[live])
        alive = ~done
        tokens[live, step] = torch.where(alive, token, pad)
        logps[live, step] = torch.where(alive, logp_all.gather(-1, token[:, None]).squeeze(-1), 0.0)
        masks[live, step] = alive.float()
        done = done | (token == eos)
        if stop is not None and step + 1 >= stop.numel():
            done = done | (tokens[live, step + 1 - stop.numel() : step + 1] == stop).all(-1)
        if step + 1 == max_new_tokens:
            break
        if (step + 1) % CHECK_EVERY == 0:
            finished = int(done.sum())
            if finished == live.numel():
                break
            if finished >= DROP_SHARE * live.numel():
                keep = (~done).nonzero().squeeze(-1)
                cache.reorder_cache(keep)
                live, done, token, attention, next_pos = (t[keep] for t in (live, done, token, attention, next_pos))
        out = model(
            input_ids=token[:, None],
            attention_mask=attention[:, : width + step + 1],
            position_ids=next_pos,
            cache=cache,
            use_cache=True,
        )
        logits, next_pos = out.logits[:, -1, :], next_pos + 1
    used = int(masks.sum(1).max())  # the columns up to the longest completion, as if stopped there
    ids = prompt_ids.repeat_interleave(group_size, 0), prompt_mask.repeat_interleave(group_size, 0)
    return Rollout(*ids, tokens[:, :used], masks[:, :used], logps[:, :used])


def sample_groups(lm: LoadedModel, prompts: list[str], group_size: int, **sampling) -> Rollout:
    """``group_size`` completions per prompt, rows grouped by prompt (prompt i: rows i*G..i*G+G-1)."""
    ids, mask = encode_prompts(lm, prompts)
    return sample(lm, ids, mask, group_size=group_size, **sampling)


def decode_completions(lm: LoadedModel, rollout: Rollout) -> list[str]:
    return lm.tokenizer.batch_decode(rollout.completion_ids, skip_special_tokens=True)
