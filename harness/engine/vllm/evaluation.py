"""The held-out evaluation through a vLLM server: the same per-prompt records as
``harness.engine.evaluation.evaluate``, the same prompts, budget, stop rule and scoring.

The prompts are the harness tokenizer's token ids (``rollout.prompt_token_ids``: the chat
template, or BOS), so both backends read the same tokens; completions stop at EOS, which the
verifier never sees (decoded without special tokens, as ``rollout.decode_completions`` does), or
at ``train.max_new_tokens``. Greedy decoding is temperature 0; the samples are drawn at
``train.temperature`` by the server's engine, which is seeded once: per-request seeds fail on
vLLM's CPU backend, so the samples are not the ``hf`` evaluation's draws (its generator seeded by
``EVAL_SEED``) and depend on the order of the requests; the greedy scores do not.
"""

from __future__ import annotations

from harness.engine.evaluation import EVAL_BATCH, prompt_scores
from harness.engine.models import LoadedModel
from harness.engine.rollout import prompt_token_ids
from harness.engine.spec import PromptScores, TrainConfig
from harness.engine.tasks.base import Item, Task, score_groups
from harness.engine.vllm.client import VllmClient
from harness.errors import ConfigError


def served_rewards(
    client: VllmClient,
    model: str,
    lm: LoadedModel,
    task: Task,
    items: list[Item],
    *,
    samples: int,
    max_new_tokens: int,
    temperature: float,
) -> list[list[float]]:
    """The verifier's score of each of ``samples`` completions per item by the served ``model``
    (temperature 0: greedy), one list per item. ``lm`` gives the tokenizer and prompt format
    (its weights are not read)."""
    if task.tool_use is not None:
        raise ConfigError(
            f"task {task.name!r} uses tools: the vLLM backend evaluates single-turn tasks only; "
            "use rollout.backend: hf for it"
        )
    tok = lm.tokenizer
    per_item: list[list[float]] = []
    for start in range(0, len(items), EVAL_BATCH):
        chunk = items[start : start + EVAL_BATCH]
        rows = client.complete(
            prompt_token_ids(lm, [i.prompt for i in chunk]),
            n=samples,
            max_tokens=max_new_tokens,
            temperature=temperature,
            model=model,
            stop_token_ids=[tok.eos_token_id],
        )
        texts = [tok.decode(list(s.token_ids), skip_special_tokens=True) for row in rows for s in row]
        scores = score_groups(chunk, texts, samples, task.reward)
        per_item += [scores[j : j + samples] for j in range(0, len(scores), samples)]
    return per_item


def evaluate_served(
    client: VllmClient,
    model: str,
    lm: LoadedModel,
    task: Task,
    train: TrainConfig,
    step: int,
    *,
    benchmark: str | None = None,
) -> PromptScores:
    """``harness.engine.evaluation.evaluate`` of the served ``model``: every held-out prompt's
    greedy score and its ``train.eval_samples`` samples' rewards."""
    items = list(task.eval[: train.max_eval_prompts])
    budget = train.max_new_tokens
    greedy = served_rewards(client, model, lm, task, items, samples=1, max_new_tokens=budget, temperature=0.0)
    sampled = served_rewards(
        client, model, lm, task, items, samples=train.eval_samples, max_new_tokens=budget, temperature=train.temperature
    )
    return prompt_scores(task, items, [g for (g,) in greedy], sampled, train, step, benchmark=benchmark)
