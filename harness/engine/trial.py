"""One trial, end to end: task, warm-started policy, the RL (or DPO) loop, held-out evaluation.

``run_trial(spec) -> TrialResult`` is what the study runner calls in a worker process. Seed i of
every arm shares the warm start, the prompt order and the evaluation set; only the algorithm
differs. On CPU the same seed and config give bitwise-identical metrics (with ``rollout.backend:
hf``; a vLLM server draws its own samples, and with ``max_staleness`` > 0 the policy that samples
a batch depends on timing: ``harness.engine.samplers.staleness``). A trial with compute looks
(``TrialSpec.looks``) may run in segments, paused after a look and resumed from its checkpoint
(``harness.engine.resume``), with the numbers of the trial run whole.

A task the model's tokenizer cannot encode is a ``ConfigError`` before any work. A trial that ran
but had nothing to learn from says so in ``TrialResult.warnings`` (and on stderr): every group
degenerate (all its samples scored alike) in each of its first ``NO_SIGNAL_STEPS`` steps, or the
same mean reward in every step with no spread in any group, is ``no_learning_signal``.
"""

from __future__ import annotations

import dataclasses
import random
import time
from pathlib import Path

import torch

from harness.algorithms.config import RLConfig
from harness.algorithms.critic import build_critic
from harness.algorithms.presets import check_algorithm
from harness.engine.compute import ComputeTotals
from harness.engine.dpo_step import dpo_step
from harness.engine.episodes.turn_format import check_turn_format
from harness.engine.eval_subset import EvalSubset, draw_subset
from harness.engine.evaluation import eval_metrics
from harness.engine.learner import Learner, make_optimizer
from harness.engine.models import (
    check_tokenizer,
    enable_gradient_checkpointing,
    task_tokenizer,
)
from harness.engine.reference import Reference
from harness.engine.resume import Segment, looks_crossed
from harness.engine.reward_model.recipe import with_built_reward_model
from harness.engine.rl_step import rl_step
from harness.engine.samplers import Sampler
from harness.engine.samplers.backend import Evaluate, trial_backend
from harness.engine.spec import NO_LEARNING_SIGNAL, PromptScores, TrialResult, TrialSpec
from harness.engine.tasks import build_task
from harness.engine.tasks.base import Item, Task, prompt_ids
from harness.engine.tasks.benchmarks import benchmark_task
from harness.engine.teacher_load import load_teacher
from harness.engine.warmstart import load_policy
from harness.errors import ConfigError
from harness.ground.console import warn

STEPS = {"rl": rl_step, "dpo": dpo_step}
#: a trial whose groups are all degenerate in each of its first this many steps has no learning signal
NO_SIGNAL_STEPS = 10


def prompt_batches(items: tuple[Item, ...], per_step: int, steps: int, seed: int) -> list[list[Item]]:
    """The prompts of each step: a seeded shuffle of the train set, reshuffled every pass.

    It depends only on the trial seed, so seed i of every arm sees the same prompts in the
    same order.
    """
    rng = random.Random(seed)
    order: list[Item] = []
    batches = []
    for _ in range(steps):
        while len(order) < per_step:
            fresh = list(items)
            rng.shuffle(fresh)
            order.extend(fresh)
        batches.append(order[:per_step])
        order = order[per_step:]
    return batches


def learning_signal(history: list[dict]) -> list[str]:
    """The ``no_learning_signal`` warning of a trial's history (step 0 is the start evaluation),
    or none: its mean reward was the same in every step with no spread in any group, or every
    group was degenerate in each of its first ``NO_SIGNAL_STEPS`` steps: zero advantages."""
    steps = [row for row in history if row["step"] > 0]
    rewards = {row["train/reward_mean"] for row in steps}
    if len(rewards) == 1 and all(row["train/reward_std_in_group"] == 0 for row in steps):
        what = f"the mean reward was {rewards.pop():.3g} in each of its {len(steps)} steps, with no spread in any group"
    elif steps and all(row["train/frac_degenerate"] == 1 for row in steps[:NO_SIGNAL_STEPS]):
        first = min(len(steps), NO_SIGNAL_STEPS)
        what = f"every group was degenerate (all its samples scored alike) in each of the first {first} steps"
    else:
        return []
    return [
        f"{NO_LEARNING_SIGNAL}: {what}, so the advantages were zero and RL had nothing to learn from; "
        "more seeds will not change that: check warmstart/val_accuracy and the reward, or make the task "
        "easier (or harder, if every sample is right)"
    ]


def _warn(lines: list[str]) -> list[str]:
    """``lines`` said on stderr as warnings (the trial's log), and returned for its result."""
    for line in lines:
        warn(line, prefix="")
    return lines


def trial_generator(spec: TrialSpec, device: torch.device) -> torch.Generator:
    """The trial's generator (sampling, minibatch order), seeded from the trial seed; the seed
    check (``harness.engine.seed_check``) draws from exactly this."""
    return torch.Generator(device=device).manual_seed(spec.seed)


def start_policy(spec: TrialSpec):
    """The task and the warm-started policy of a trial, as every trial starts: (task, lm, warm
    info, warnings); the global torch seed set from the trial seed."""
    check_algorithm(spec.algorithm)
    if spec.train.threads:
        torch.set_num_threads(spec.train.threads)
    task = build_task(spec.task, cache_dir=spec.cache_dir)
    tokenizer = task_tokenizer(spec.model, task, spec.cache_dir)  # loaded once for the checks, before the model
    check_tokenizer(spec.model, task, tokenizer)
    check_turn_format(spec.model, task, tokenizer)
    task = with_built_reward_model(spec, task)  # task.reward.train: built once, here, as the warm start is
    lm, warm_info, warnings = load_policy(spec, task)
    torch.manual_seed(spec.seed)
    return task, lm, warm_info, warnings


def make_learner(spec: TrialSpec, lm, task) -> Learner:
    """The trial's learner around ``lm``: its optimiser, reference, critic, generator and (where
    the algorithm distils) teacher, as every step of the trial (and the cost probe's step) uses them."""
    cfg = spec.algorithm
    groups = [{"params": [p for p in lm.model.parameters() if p.requires_grad], "lr": cfg.lr}]
    critic = build_critic(cfg, lm.model) if isinstance(cfg, RLConfig) else None
    if critic is not None:
        groups.append({"params": list(critic.parameters()), "lr": cfg.critic_lr or cfg.lr})
    generator = trial_generator(spec, lm.device)
    reference = Reference(lm.model)
    if spec.train.gradient_checkpointing:  # the policy's only (it acts in train mode: the updates)
        enable_gradient_checkpointing(lm.model)
    return Learner(
        lm=lm,
        reference=reference,
        critic=critic,
        optimizer=make_optimizer(groups, lm.device),
        algorithm=cfg,
        train=spec.train,
        generator=generator,
        turns=spec.task.max_turns if spec.task.tools else 1,
        teacher=load_teacher(spec, task, lm),
    )


def benchmark_tasks(spec: TrialSpec, task, tokenizer) -> dict[str, Task]:
    """The study's held-out benchmarks by name, built once (``benchmark_task``), each checked
    against the policy's tokenizer like the task itself."""
    out = {}
    for config in spec.benchmarks:
        out[config.name] = benchmark_task(config, task, cache_dir=spec.cache_dir)
        try:
            check_tokenizer(spec.model, out[config.name], tokenizer)
        except ConfigError as err:
            raise ConfigError(f"benchmarks: {config.name}: {err}") from None
    return out


def evaluate_benchmarks(evaluate: Evaluate, lm, benchmarks: dict[str, Task], train, step: int) -> list[PromptScores]:
    """Each benchmark's per-prompt scores at ``step`` by ``evaluate``, with the study task's decoding."""
    return [evaluate(lm, bench, train, step, benchmark=name) for name, bench in benchmarks.items()]


def start_evaluation(
    evaluate: Evaluate, lm, task: Task, spec: TrialSpec
) -> tuple[list[PromptScores], EvalSubset | None]:
    """The trial's evaluations so far, the start's (every held-out prompt), and under ``eval_subset``
    the subset drawn from it (``harness.engine.eval_subset``), its prompts labelled with their strata."""
    scores = evaluate(lm, task, spec.train, 0)
    if spec.eval_subset is None:
        return [scores], None
    subset = draw_subset(scores, spec.eval_subset)
    return [subset.label(scores)], subset


def task_evaluation(evaluate: Evaluate, lm, task: Task, spec: TrialSpec, step: int, subset: EvalSubset | None):
    """The study task's held-out scores at ``step`` > 0: every prompt's, or under ``eval_subset``
    the subset's at an intermediate step and every prompt's at the last, each prompt labelled with
    its stratum (the record says which prompts each evaluation scored)."""
    if subset is None:
        return evaluate(lm, task, spec.train, step)
    if step == spec.train.steps:
        return subset.label(evaluate(lm, task, spec.train, step))
    items = list(task.eval[: spec.train.max_eval_prompts])
    on_subset = dataclasses.replace(task, eval=tuple(subset.items(items, prompt_ids(items))))
    scored = evaluate(lm, on_subset, spec.train, step)
    return subset.label(scored.model_copy(update={"prompt_ids": list(subset.chosen)}))


def benchmark_metrics(scores: list[PromptScores]) -> dict[str, float]:
    """The benchmarks' aggregate metrics, ``eval/<benchmark>/<metric>``."""
    return {k: v for one in scores for k, v in eval_metrics(one).items()}


def held_out_scores(
    evaluate: Evaluate, lm, own: PromptScores, benchmarks: dict[str, Task], train, step: int
) -> tuple[list[PromptScores], dict[str, float]]:
    """One evaluation at ``step``: the task's own per-prompt scores ``own`` (``task_evaluation``)
    and each benchmark's, and their metrics, as a history row carries them."""
    scored = [own, *evaluate_benchmarks(evaluate, lm, benchmarks, train, step)]
    return scored, {**eval_metrics(scored[0]), **benchmark_metrics(scored[1:])}


def first_evaluation(
    evaluate: Evaluate, lm, task: Task, benchmarks: dict[str, Task], spec: TrialSpec
) -> tuple[list[dict], list[PromptScores], EvalSubset | None]:
    """The start of a trial's history (step 0, nothing spent), its evaluations (the task's and each
    benchmark's before any update) and the eval subset drawn from the task's (``start_evaluation``)."""
    [own], subset = start_evaluation(evaluate, lm, task, spec)
    evaluations, scores = held_out_scores(evaluate, lm, own, benchmarks, spec.train, 0)
    return [{"step": 0, **scores, "tokens/total": 0.0, **ComputeTotals().totals}], evaluations, subset


def resumed_subset(start: PromptScores, spec: TrialSpec) -> EvalSubset | None:
    """A resumed segment's eval subset: drawn again from the start evaluation its checkpoint
    holds, as the first segment drew it (the draw depends on those scores and the config alone)."""
    return None if spec.eval_subset is None else draw_subset(start, spec.eval_subset)


def final_metrics(history: list[dict], wall_s: float, warm_info: dict[str, float], learner: Learner) -> dict:
    """A trial's final metrics: its last step's train metrics and last evaluation's, the start
    evaluation's accuracy and mean reward, the tokens and seconds spent, the warm start's
    metrics and a distillation teacher's."""
    last, start = history[-1], history[0]
    return {
        **{k: v for k, v in last.items() if k.startswith(("train/", "tools/", "eval/"))},
        "eval/accuracy_start": start["eval/accuracy"],
        "eval/mean_reward_start": start["eval/mean_reward"],
        "tokens/total": last["tokens/total"],
        "time/total_s": wall_s,
        **warm_info,
        **(learner.teacher.metrics if learner.teacher is not None else {}),  # issue 35: the distillation teacher
    }


def train_step(learner: Learner, task: Task, items: list[Item], sampler: Sampler, step: int, tokens: float) -> dict:
    """Step ``step`` of the arm's update on the prompts ``items``, the new policy then published to
    the sampler (a vLLM server): its metrics, with its wall seconds (and the sync's) and
    ``tokens/total``, the ``tokens`` spent before it and its own."""
    clock = time.perf_counter()
    latest = STEPS[learner.algorithm.kind](learner, task, items)
    synced = sampler.publish(learner.lm, step)
    learner.policy_version = step
    if synced is not None:
        latest["time/weight_sync_s"] = synced
    latest["time/step_s"] = time.perf_counter() - clock
    latest["tokens/total"] = tokens + (latest["tokens/generated"] + latest["tokens/trained"])
    return latest


def run_trial(
    spec: TrialSpec,
    folder: Path | None = None,
    *,
    pause_after_look: int | None = None,
    resume_after_look: int | None = None,
) -> TrialResult:
    """Run one trial of a study from start to end (or one segment of it), in this process, and
    return what it measured.

    The task is built, the warm-started policy loaded (from the cache, or built there), the
    held-out prompts evaluated once before any update, then ``spec.train.steps`` steps of the
    arm's update (``rl_step`` or ``dpo_step``, by ``spec.algorithm.kind``) each run on the prompts
    of ``prompt_batches``, with held-out evaluations (``task_evaluation``: the ``eval_subset``'s
    between the start and the last) every ``eval_every`` steps, after the last, and at each compute
    look (``spec.looks``: the first step whose row reaches its point, tagged ``"look": k``), all
    generated by the trial's backend (``rollout.backend``); ``folder`` is the trial's own folder,
    for a vLLM server's log (None: a temporary one) and the checkpoints: ``pause_after_look=k``
    stops after look k's evaluation with the whole training state saved, ``resume_after_look=k``
    starts from there (``harness.engine.resume``); the segments give bitwise the whole trial.

    Returns a ``TrialResult``: ``history`` (one row per step, step 0 the start evaluation, each
    with the compute spent so far: ``harness.engine.compute``), ``final`` (``final_metrics``),
    ``prompts`` (every evaluation's per-prompt scores, which pair arms on prompts), ``warnings``
    (a warm start below its target, no learning signal), each also said on stderr, and
    ``paused_at_look`` (k where it paused, all of these up to there; None where it ran to its
    last step, as it does when that comes before look k). Everything random is drawn from
    generators seeded from ``spec.seed`` and the prompt order depends on the seed alone, so seed
    i of every arm sees the same start, prompts and evaluation set: the arms differ only in
    their algorithm, which is what a study compares. Bad input (or an unusable checkpoint)
    raises ``ConfigError`` before any training; a non-finite loss raises.
    """
    started = time.perf_counter()
    segment = Segment.of(spec, folder, pause_after_look, resume_after_look)
    task, lm, warm_info, warnings = start_policy(spec)
    _warn(warnings)
    learner = make_learner(spec, lm, task)
    benchmarks = benchmark_tasks(spec, task, lm.tokenizer)
    batches = prompt_batches(task.train, spec.train.prompts_per_step, spec.train.steps, spec.seed)
    with trial_backend(spec, lm, [[item.prompt for item in items] for items in batches], folder) as backend:
        resumed = segment.resume(learner)
        if resumed is None:
            history, evaluations, subset = first_evaluation(backend.evaluate, lm, task, benchmarks, spec)
        else:
            history, evaluations, started = resumed.history, resumed.evaluations, started - resumed.elapsed_s
            subset = resumed_subset(evaluations[0], spec)
        compute = ComputeTotals(history[-1])
        learner.sampler = backend.sampler
        done = history[-1]["step"]
        for step, items in enumerate(batches[done:], done + 1):
            if segment.pauses(history):
                break
            latest = train_step(learner, task, items, backend.sampler, step, history[-1]["tokens/total"])
            spent = compute.add(latest)  # takes the step's own FLOPs out of its metrics
            row = {"step": step, **latest, **spent}
            looks = looks_crossed(spec.looks, history[-1], row)
            if looks or step == spec.train.steps or (spec.train.eval_every and step % spec.train.eval_every == 0):
                own = task_evaluation(backend.evaluate, lm, task, spec, step, subset)
                scored, scores = held_out_scores(backend.evaluate, lm, own, benchmarks, spec.train, step)
                evaluations += scored
                row.update(scores)
            if looks:
                row["look"] = looks[-1]  # a step that reaches two looks is the later one's
            history.append(row)
        paused = segment.pauses(history)
        if paused:
            segment.pause(learner, history, evaluations, time.perf_counter() - started)

    final = final_metrics(history, time.perf_counter() - started, warm_info, learner)
    if not paused:
        warnings += _warn(learning_signal(history))
    return TrialResult(
        trial_id=spec.trial_id,
        final=final,
        history=history,
        wall_time_s=final["time/total_s"],
        prompts=evaluations,
        warnings=warnings,
        paused_at_look=segment.pause_after_look if paused else None,
    )
