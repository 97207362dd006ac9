"""A trial trained by a program (``trainer: command`` or ``trl``): its inputs written, the program
run, its checkpoints judged (or its handed-in scores checked) and its metrics merged, into the
same ``TrialResult`` a builtin trial gives: history rows (step 0 the start model's evaluation),
per-prompt scores of every evaluation, and the final metrics under the builtin trial's names."""

from __future__ import annotations

import time
from pathlib import Path

from harness.engine.evaluation import eval_metrics
from harness.engine.spec import GREEDY_METRIC, SAMPLED_METRIC, PromptScores, TrialResult, TrialSpec
from harness.engine.tasks.base import prompt_ids
from harness.engine.trial import benchmark_tasks, start_policy
from harness.engine.trial_file import check_templates
from harness.ground.console import warn
from harness.trainers.checkpoint_eval import judge_checkpoints, judged_scores
from harness.trainers.checkpoints import Reader
from harness.trainers.handed_scores import read_scores
from harness.trainers.program import run_program
from harness.trainers.program_metrics import COMPUTE_PREFIX, merged_history, read_metrics
from harness.trainers.served_checkpoint_eval import judge_through_vllm
from harness.trainers.trial_dir import fresh_trial_dir
from harness.trainers.trial_inputs import held_out_items, write_inputs


def evaluation_rows(scores: list[PromptScores]) -> dict[int, dict[str, float]]:
    """Each evaluated step's aggregate metrics (the task's and every benchmark's)."""
    rows: dict[int, dict[str, float]] = {}
    for one in scores:
        rows.setdefault(one.step, {}).update(eval_metrics(one))
    return rows


def final_metrics(history: list[dict], evaluations: dict[int, dict[str, float]]) -> dict[str, float]:
    """The builtin trial's final metrics where a program trial has them: the last reported train
    metrics, the last evaluation, the start accuracy, and the compute and token totals."""
    last = history[-1]
    start, end = evaluations[0], evaluations[max(evaluations)]
    return {
        **{k: v for row in history for k, v in row.items() if k.startswith(("train/", "tools/"))},
        **{k: v for k, v in last.items() if k.startswith(COMPUTE_PREFIX) or k == "tokens/total"},
        **end,
        "eval/accuracy_start": start[GREEDY_METRIC],
        "eval/mean_reward_start": start[SAMPLED_METRIC],
    }


def run_program_trial(spec: TrialSpec) -> TrialResult:
    """Run one trial through its program and judge what it wrote (docs/trainers.md). Any breach
    of the contract raises ``ProgramTrialError`` (a bad template, ``ConfigError``): the trial
    fails with that one line as its reason, and nothing of it is recorded as complete."""
    started = time.perf_counter()
    check_templates(spec)
    task, lm, warm_info, warnings = start_policy(spec)
    for line in warnings:
        warn(line, prefix="")
    benchmarks = benchmark_tasks(spec, task, lm.tokenizer)
    trial_dir = fresh_trial_dir(spec.trial_id)
    document = write_inputs(spec, task, benchmarks, lm, trial_dir)
    judging = spec.trainer.scores == "judge"
    through_vllm = judging and spec.rollout.backend == "vllm"  # the start model too, after the program
    scores = judged_scores(lm, task, benchmarks, spec.train, 0) if judging and not through_vllm else []
    dtype = str(next(lm.model.parameters()).dtype).removeprefix("torch.")
    reader = Reader.released(lm)  # the program gets the memory the start model held
    clock = time.perf_counter()
    run_program(spec.trainer, document)
    program_s = time.perf_counter() - clock
    metrics = read_metrics(Path(document["metrics_file"]), spec.train.steps)
    if through_vllm:
        server = spec.rollout.vllm
        scores = judge_through_vllm(
            spec,
            reader,
            document,
            task,
            benchmarks,
            log_path=trial_dir / "vllm-judge.log",
            dtype=dtype,
            python=server.python,
            url=server.url,
            start_timeout_s=server.start_timeout_s,
            request_timeout_s=server.request_timeout_s,
        )
    elif judging:
        scores += judge_checkpoints(spec, reader, document, task, benchmarks)
    else:
        expected = {None: prompt_ids(held_out_items(task, spec))}
        expected |= {name: prompt_ids(held_out_items(bench, spec)) for name, bench in benchmarks.items()}
        scores = read_scores(Path(document["scores_file"]), expected, spec.train)
    evaluations = evaluation_rows(scores)
    history = merged_history(metrics, evaluations)
    final = {
        **final_metrics(history, evaluations),
        "time/program_s": program_s,
        "time/total_s": time.perf_counter() - started,
        **warm_info,
    }
    return TrialResult(
        trial_id=spec.trial_id,
        final=final,
        history=history,
        wall_time_s=final["time/total_s"],
        prompts=scores,
        warnings=warnings,
    )
