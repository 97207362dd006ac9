"""Sampling completions with their log-probabilities and masks, and recomputing log-probs.

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

from harness.engine.models import LoadedModel


@dataclass
class Rollout:
    prompt_ids: torch.Tensor  # [B, P] left-padded
    prompt_mask: torch.Tensor  # [B, P] 1 on real prompt tokens
    completion_ids: torch.Tensor  # [B, T] right-padded with pad
    completion_mask: torch.Tensor  # [B, T] float, 1 on generated tokens including EOS
    logprobs: torch.Tensor  # [B, T] sampling log-probs (0 on padding)

    @property
    def input_ids(self) -> torch.Tensor:
        return torch.cat([self.prompt_ids, self.completion_ids], dim=1)

    @property
    def attention_mask(self) -> torch.Tensor:
        return torch.cat([self.prompt_mask, self.completion_mask.to(self.prompt_mask.dtype)], dim=1)

    def rows(self, index: torch.Tensor) -> "Rollout":
        return Rollout(*(t[index] for t in vars(self).values()))


def encode_prompts(lm: LoadedModel, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded token ids and attention mask, with BOS when the tokenizer defines one."""
    tok = lm.tokenizer
    texts = [lm.format_prompt(p) for p in prompts]
    encoded = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    if tok.bos_token_id is not None and not lm.use_chat_template:
        encoded = [[tok.bos_token_id] + ids for ids in encoded]
    width = max(len(ids) for ids in encoded)
    ids = torch.full((len(encoded), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, seq in enumerate(encoded):
        ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
        mask[row, width - len(seq) :] = 1
    return ids.to(lm.device), mask.to(lm.device)


def _cache_of(output) -> dict:
    """The KV cache of a forward pass as the keyword the next call takes (``cache`` in
    transformers 5, ``past_key_values`` before)."""
    if getattr(output, "cache", None) is not None:
        return {"cache": output.cache}
    return {"past_key_values": output.past_key_values}


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


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
) -> Rollout:
    """Generate up to ``max_new_tokens`` per row with a KV cache; stop rows at EOS."""
    model, eos, pad = lm.model, lm.tokenizer.eos_token_id, lm.tokenizer.pad_token_id
    batch = prompt_ids.shape[0]
    attention = prompt_mask.clone()
    positions = _positions(attention)
    out = model(input_ids=prompt_ids, attention_mask=attention, position_ids=positions, use_cache=True)
    next_pos = positions[:, -1:] + 1
    done = torch.zeros(batch, dtype=torch.bool, device=prompt_ids.device)
    tokens, logps, masks = [], [], []
    for _ in range(max_new_tokens):
        logp_all = F.log_softmax(out.logits[:, -1, :].float() / temperature, dim=-1)
        if greedy:
            token = logp_all.argmax(-1)
        else:
            token = torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(-1)
        alive = ~done
        tokens.append(torch.where(alive, token, torch.full_like(token, pad)))
        logps.append(torch.where(alive, logp_all.gather(-1, token[:, None]).squeeze(-1), 0.0))
        masks.append(alive.float())
        done = done | (token == eos)
        if bool(done.all()):
            break
        attention = torch.cat([attention, alive.long()[:, None]], dim=1)
        out = model(
            input_ids=tokens[-1][:, None],
            attention_mask=attention,
            position_ids=next_pos,
            use_cache=True,
            **_cache_of(out),
        )
        next_pos = next_pos + 1
    return Rollout(
        prompt_ids, prompt_mask, torch.stack(tokens, 1), torch.stack(masks, 1), torch.stack(logps, 1)
    )


def sample_groups(lm: LoadedModel, prompts: list[str], group_size: int, **sampling) -> Rollout:
    """``group_size`` completions per prompt, rows grouped by prompt (prompt i: rows i*G..i*G+G-1)."""
    ids, mask = encode_prompts(lm, prompts)
    return sample(lm, ids.repeat_interleave(group_size, 0), mask.repeat_interleave(group_size, 0), **sampling)


@dataclass
class Forward:
    logprobs: torch.Tensor  # [B, T] log-prob of each completion token (temperature-scaled)
    entropy: torch.Tensor  # [B, T]
    hidden: torch.Tensor | None  # [B, T, H] last hidden state at the position predicting each token


def completion_forward(model, rollout: Rollout, *, temperature: float, want_hidden: bool = False) -> Forward:
    """Log-probs (with grad if enabled) of the completion tokens under ``model``."""
    attention = rollout.attention_mask
    out = model(
        input_ids=rollout.input_ids,
        attention_mask=attention,
        position_ids=_positions(attention),
        output_hidden_states=want_hidden,
    )
    width = rollout.completion_ids.shape[1]
    start = rollout.prompt_ids.shape[1] - 1
    logits = out.logits[:, start : start + width, :].float() / temperature
    logp_all = F.log_softmax(logits, dim=-1)
    logprobs = logp_all.gather(-1, rollout.completion_ids[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    hidden = out.hidden_states[-1][:, start : start + width, :] if want_hidden else None
    return Forward(logprobs * rollout.completion_mask, entropy, hidden)


def decode_completions(lm: LoadedModel, rollout: Rollout) -> list[str]:
    return lm.tokenizer.batch_decode(rollout.completion_ids, skip_special_tokens=True)
