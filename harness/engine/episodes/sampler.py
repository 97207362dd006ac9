"""Multi-turn tool-calling episodes, G per prompt, sampled turn by turn in one batch.

A turn is sampled for every episode still going, all prompts' groups together (``rollout.sample``
with its KV cache; the first turn prefills each prompt once for its G episodes). A turn ends at
EOS (the episode's final answer), at the end of a call (``</tool_call>``) or at the turn's token
budget. After a call the tools run, their results' tokens (and the chat template's around them)
are appended, and the episode goes on to its next turn, up to ``max_turns``; an episode whose
last allowed turn is a call ends there, at the turn limit. An episode that has finished waits
for the others: it is not in the next turn's batch, so it costs nothing and stalls nothing.
Each turn re-reads the conversation so far as its prompt (the cache lives within a turn).

The episode becomes one ``Rollout`` row: the prompt, then the policy's turns and the tools'
tokens in order. ``completion_mask`` is 1 on the policy's tokens only, so the loss, the KL, the
entropy, the length normalisation and the length metrics never read a tool's tokens;
``completion_attention`` is 1 on all of them, so every forward pass reads the whole conversation.
With ``mask_tool_tokens`` off (an ablation) the tool tokens are in the loss mask too, and their
old log-probs come from a forward pass (``Rollout.unsampled_in_loss``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from harness.engine.episodes.turn_format import PlainTurns, TemplateTurns, format_of
from harness.engine.models import LoadedModel
from harness.engine.rollout import Rollout, pad_rows, sample
from harness.engine.tasks.base import ToolUse
from harness.engine.tools import CLOSE_TAG, ToolOutcome, parse_calls


@dataclass
class Episode:
    """One episode as it unfolds: its pieces of tokens (the policy's with their log-probs, a
    tool's with None), the policy's turn texts and what the tools said."""

    prompt: int  # index of its prompt
    ids: list[int]  # the prompt's tokens
    history: list[dict]  # the conversation, for a chat template
    pieces: list[tuple[list[int], list[float] | None]] = field(default_factory=list)
    turns: list[str] = field(default_factory=list)
    outcomes: list[ToolOutcome] = field(default_factory=list)
    done: bool = False
    hit_turn_limit: bool = False

    @property
    def context(self) -> list[int]:
        return self.ids + [t for ids, _ in self.pieces for t in ids]

    @property
    def final(self) -> str:
        """The text the verifier reads: the policy's last turn."""
        return self.turns[-1] if self.turns else ""

    def tokens(self, policy: bool) -> int:
        return sum(len(ids) for ids, logps in self.pieces if (logps is not None) == policy)


def sample_episodes(
    lm: LoadedModel,
    tool_use: ToolUse,
    prompts: list[str],
    group_size: int,
    *,
    max_new_tokens: int,
    temperature: float,
    generator: torch.Generator | None,
    greedy: bool = False,
    mask_tool_tokens: bool = True,
) -> tuple[Rollout, list[Episode]]:
    """``group_size`` episodes per prompt (prompt i: rows i*G..i*G+G-1), as one rollout and the episodes."""
    fmt = format_of(lm, tool_use)
    tok = lm.tokenizer
    eos, pad = tok.eos_token_id, tok.pad_token_id
    stop = torch.tensor(fmt.stop_ids, dtype=torch.long, device=lm.device)
    starts = [fmt.start(p) for p in prompts]
    episodes = [Episode(i, ids, list(history)) for i, (ids, history) in enumerate(starts) for _ in range(group_size)]
    sampling = dict(max_new_tokens=max_new_tokens, temperature=temperature, generator=generator, greedy=greedy)
    for turn in range(tool_use.max_turns):
        going = [e for e in episodes if not e.done]
        if not going:
            break
        if turn == 0:  # every episode of a group has the same context: prefill it once
            ids, mask = pad_rows([ids for ids, _ in starts], pad, left=True, device=lm.device)
            out = sample(lm, ids, mask, group_size=group_size, stop=stop, **sampling)
        else:
            ids, mask = pad_rows([e.context for e in going], pad, left=True, device=lm.device)
            out = sample(lm, ids, mask, stop=stop, **sampling)
        # to the host once a turn: the turn's tokens, log-probs and lengths of every row
        lengths = out.completion_mask.sum(1).long().tolist()
        turn_ids, turn_logps = out.completion_ids.tolist(), out.logprobs.tolist()
        for row, episode in enumerate(going):
            n = lengths[row]
            tokens = turn_ids[row][:n]
            episode.pieces.append((tokens, turn_logps[row][:n]))
            text = tok.decode(tokens, skip_special_tokens=True)
            episode.turns.append(text)
            calls = parse_calls(text)
            if (tokens and tokens[-1] == eos) or not text.endswith(CLOSE_TAG) or not calls:
                episode.done = True  # an answer, a turn cut at its budget, or a closing tag without a call
                continue
            outcomes = [tool_use.toolset.run(call) for call in calls]
            episode.outcomes += outcomes
            if turn + 1 == tool_use.max_turns:
                episode.done = episode.hit_turn_limit = True
                continue
            episode.pieces.append((fmt.after_call(episode.history, text, outcomes), None))
    return _as_rollout(lm, starts, episodes, group_size, mask_tool_tokens), episodes


def _as_rollout(lm: LoadedModel, starts, episodes: list[Episode], group_size: int, mask_tool_tokens: bool) -> Rollout:
    """The episodes as rollout rows: the prompt left-padded, the episode right-padded after it."""
    pad, device = lm.tokenizer.pad_token_id, lm.device
    prompt_ids, prompt_mask = pad_rows([ids for ids, _ in starts], pad, left=True, device=device)
    tokens = [[t for ids, _ in e.pieces for t in ids] for e in episodes]
    logps = [[v for ids, values in e.pieces for v in (values or [0.0] * len(ids))] for e in episodes]
    policy = [[float(values is not None) for ids, values in e.pieces for _ in ids] for e in episodes]
    ids, attention = pad_rows(tokens, pad, left=False, device=device)
    logprobs, sampled = (
        pad_rows(rows, 0.0, left=False, dtype=torch.float, device=device)[0] for rows in (logps, policy)
    )
    attention = attention.float()
    return Rollout(
        prompt_ids.repeat_interleave(group_size, 0),
        prompt_mask.repeat_interleave(group_size, 0),
        ids,
        sampled if mask_tool_tokens else attention,
        logprobs,
        attention,
        sampled,
    )


def demonstration(
    fmt: PlainTurns | TemplateTurns, tool_use: ToolUse, prompt: str, turns: tuple[str, ...]
) -> tuple[list[int], list[int], list[float]]:
    """A worked episode for the warm start, in the turn format ``fmt`` (``format_of``: build it
    once per batch): the prompt's tokens, then the demonstrated policy ``turns`` (EOS after the
    last) with the results of their calls, run on the real tools, between them; and the loss mask
    (1 on the policy's tokens, as in RL)."""
    tokenizer = fmt.tokenizer
    prompt_ids, history = fmt.start(prompt)
    ids, mask = [], []
    for k, turn in enumerate(turns):
        tokens = tokenizer(turn, add_special_tokens=False)["input_ids"]
        if k == len(turns) - 1:
            tokens = tokens + [tokenizer.eos_token_id]
        ids += tokens
        mask += [1.0] * len(tokens)
        if k < len(turns) - 1:
            outcomes = [tool_use.toolset.run(call) for call in parse_calls(turn)]
            tool_ids = fmt.after_call(history, turn, outcomes)
            ids += tool_ids
            mask += [0.0] * len(tool_ids)
    return prompt_ids, ids, mask
