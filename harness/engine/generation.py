"""What a step or an evaluation samples, whatever the task: single-turn completions, or
tool-calling episodes when the task has tools (``task.tool_use``).

``generate`` gives the rollout the losses read, the text of each row the verifier reads (the
completion, or an episode's final turn) and, for episodes, the episodes themselves. The
verifier's scores (``verifier_scores``) are the gold score everywhere; what a training step
trains on (``training_rewards``) is the trajectory reward of an episode, or a learned
reward model's score (``task.scorer``), else the verifier's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harness.engine.episodes import Episode, sample_episodes
from harness.engine.models import LoadedModel
from harness.engine.rollout import Rollout, decode_completions
from harness.engine.samplers import HfSampler, Sampler
from harness.engine.tasks.base import Item, Task, score_groups
from harness.engine.tools import episode_reward


@dataclass
class Generation:
    rollout: Rollout
    texts: list[str]  # per row: what the verifier reads
    episodes: list[Episode] | None = None


def generate(
    lm: LoadedModel,
    task: Task,
    prompts: list[str],
    group_size: int,
    *,
    mask_tool_tokens: bool = True,
    sampler: Sampler | None = None,
    **sampling,
) -> Generation:
    """``group_size`` samples per prompt, rows grouped by prompt (prompt i: rows i*G..i*G+G-1),
    single-turn ones by ``sampler`` (default: the policy itself, ``HfSampler``); tool-calling
    episodes always by the policy itself (``rollout.backend: vllm`` refuses tools)."""
    if task.tool_use is None:
        rollout = (sampler or HfSampler()).sample_groups(lm, prompts, group_size, **sampling)
        return Generation(rollout, decode_completions(lm, rollout))
    rollout, episodes = sample_episodes(
        lm, task.tool_use, prompts, group_size, mask_tool_tokens=mask_tool_tokens, **sampling
    )
    return Generation(rollout, [e.final for e in episodes], episodes)


def verifier_scores(task: Task, items: list[Item], generation: Generation, group_size: int) -> list[float]:
    """The verifier's (gold) score of each row."""
    return score_groups(items, generation.texts, group_size, task.reward)


def training_rewards(
    task: Task, items: list[Item], generation: Generation, group_size: int
) -> tuple[list[float], dict[str, float]]:
    """What each row is trained on, and the step's reward metrics: the trajectory reward of a
    tool-calling episode (with its parts and the episodes' tool metrics), a learned reward's score
    (with the gold score beside it), or the verifier's score."""
    gold = verifier_scores(task, items, generation, group_size)
    if generation.episodes is not None:
        return _episode_rewards(task, generation.episodes, gold)
    if task.scorer is None:
        return gold, {}
    proxy = list(task.scorer([items[j // group_size] for j in range(len(generation.texts))], generation.texts))
    return proxy, {"train/reward_proxy": mean(proxy), "train/reward_gold": mean(gold)}


def mean(values: Iterable[float]) -> float:
    """Summed in order, then divided: the one way an average of scores is taken (0 for none)."""
    values = list(values)
    return sum(values) / max(len(values), 1)


def _episode_rewards(task: Task, episodes: list[Episode], gold: list[float]) -> tuple[list[float], dict[str, float]]:
    tool_use = task.tool_use
    parts = [
        episode_reward(
            e.turns,
            answer_score=score,
            hit_turn_limit=e.hit_turn_limit,
            tool_names=tool_use.toolset.names,
            config=tool_use.reward,
        )
        for e, score in zip(episodes, gold)
    ]
    return [p.total for p in parts], {
        **episode_metrics(episodes),
        **{
            "train/reward_answer": mean(p.answer for p in parts),
            "train/reward_format": mean(p.format for p in parts),
            "train/answer_correct": mean(gold),
            "tools/valid_call_rate": sum(p.valid_calls for p in parts) / max(sum(p.calls for p in parts), 1),
        },
    }


def episode_metrics(episodes: list[Episode]) -> dict[str, float]:
    """How the episodes used their tools: calls, errors, turns, the turn limit, policy vs tool tokens."""
    outcomes = [o for e in episodes for o in e.outcomes]
    return {
        "tools/calls_per_episode": mean(len(e.outcomes) for e in episodes),
        "tools/error_rate": sum(not o.ok for o in outcomes) / max(len(outcomes), 1),
        "tools/turns": mean(len(e.turns) for e in episodes),
        "tools/hit_turn_limit": mean(float(e.hit_turn_limit) for e in episodes),
        "tokens/policy": float(sum(e.tokens(policy=True) for e in episodes)),
        "tokens/tool": float(sum(e.tokens(policy=False) for e in episodes)),
    }
