"""Command: ``harness reward-model train`` (a learned Bradley-Terry reward model for RLHF).

The task, model, warm start, generation budget and cache come from a study (``--study``: its
control arm's set-up, so the reward model samples the warm start the study's trials start from)
or from defaults and ``--set SECTION.KEY=VALUE`` (as ``harness trial`` takes them; they apply on
top of a study too). Pairs come from a JSONL file (``--pairs``) or are built from the task's
verifier on the warm-started policy's samples (``--from-verifier``, ``--label-noise``). The model
is cached by the content hash of all of it (``<cache_dir>/reward_models/<key>/``): the same
command again loads it without training. It prints the model's id (``rm-<key>``) and folder and
its held-out metrics, and records it in MLflow (experiment ``reward-models``; default store
``runs/reward_models/mlflow.db``); a study trains on it with ``task: {reward: {model: <id>}}``.

A study may instead say how its reward model is trained (``task.reward.train``: these flags'
settings), and its trials build it; ``--study`` without ``--pairs`` or ``--from-verifier`` builds
that same model ahead of them (the same cache entry) and records it in MLflow.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError

from harness.cli.app import app
from harness.cli.trial import SECTIONS, parse_assignments
from harness.engine.spec import TrialSpec
from harness.engine.task_config import LearnedRewardConfig
from harness.errors import ConfigError
from harness.study.field_errors import format_validation_error

if TYPE_CHECKING:  # the engine's training imports torch: only in the command, never at the CLI's start
    from harness.engine.reward_model.settings import RewardModelRecipe
    from harness.engine.reward_model.training import TrainedRewardModel

reward_model = typer.Typer(
    help="Learned reward models: train one on preference pairs (Bradley-Terry) for a study to train on.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(reward_model, name="reward-model")

#: the flags of the training and pair settings, by field name (for one-line errors)
FLAGS = {
    "steps": "--steps",
    "epochs": "--epochs",
    "lr": "--lr",
    "batch_size": "--batch-size",
    "held_out": "--held-out",
    "seed": "--seed",
    "base": "--base",
    "pairs": "--pairs",
    "prompts": "--prompts",
    "samples_per_prompt": "--samples-per-prompt",
    "pairs_per_prompt": "--pairs-per-prompt",
    "label_noise": "--label-noise",
}
SHOWN = (
    "heldout/accuracy",
    "heldout/accuracy_gold",
    "heldout/loss",
    "heldout/brier",
    "heldout/ece",
    "train/loss",
    "train/accuracy",
    "pairs/train",
    "pairs/heldout",
    "pairs/flipped_share",
)


def _settings(model: type, values: dict[str, Any]):
    try:
        return model(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else ""
        message = first.get("msg", "invalid value").removeprefix("Value error, ")
        raise ConfigError(f"{FLAGS.get(field, field)}: {message}") from None


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def reward_model_spec(study_file: Path | None, assignments: list[str], cache_dir: str | None) -> TrialSpec:
    """The set-up the reward model reads: a study's control arm at seed 0, or the defaults; then
    ``--set`` on top. Checked before any work (a bad key is one line naming it)."""
    from harness.algorithms import resolve_algorithm

    algorithm, sections = parse_assignments(assignments)
    if algorithm:
        raise ConfigError(
            f"--set {next(iter(algorithm))}: give SECTION.KEY=VALUE ({', '.join(SECTIONS)}); "
            "a reward model has no algorithm"
        )
    if study_file is not None:
        from harness.study.expand import condition_spec
        from harness.study.load import load_study

        study = load_study(study_file)
        base = condition_spec(study, study.control or study.arms[0].name, study.seeds[0]).model_dump(mode="json")
    else:
        base = {"arm": "reward-model", "algorithm": resolve_algorithm("grpo", {}).model_dump(mode="json")}
    data = _merge(base, sections)
    if cache_dir is not None:
        data["cache_dir"] = cache_dir
    try:
        return TrialSpec.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, TrialSpec)) from None


@reward_model.command("train")
def train(
    study_file: Path | None = typer.Option(
        None,
        "--study",
        metavar="STUDY.yaml",
        help="take the task, model, warm start and budget from this study; when it "
        "says how its reward model is trained (task.reward.train) and neither "
        "--pairs nor --from-verifier is given, build that model",
    ),
    assignments: list[str] = typer.Option(
        [],
        "--set",
        metavar="SECTION.KEY=VALUE",
        help="repeatable: a task/model/warmstart/train key (task.name=sorting, model.name=Qwen/Qwen2.5-0.5B), "
        "over the study's or the defaults",
    ),
    pairs: Path | None = typer.Option(
        None, "--pairs", metavar="FILE.jsonl", help="preference pairs, one {prompt, chosen, rejected} object a line"
    ),
    from_verifier: bool = typer.Option(
        False, "--from-verifier", help="build the pairs from the task's verifier on the warm start's samples"
    ),
    label_noise: float | None = typer.Option(
        None, "--label-noise", help="--from-verifier: flip each label with this probability (default 0)"
    ),
    prompts: int | None = typer.Option(None, "--prompts", help="--from-verifier: train prompts sampled (default: all)"),
    samples_per_prompt: int | None = typer.Option(
        None, "--samples-per-prompt", help="--from-verifier: samples per prompt (default 8)"
    ),
    pairs_per_prompt: int | None = typer.Option(
        None, "--pairs-per-prompt", help="--from-verifier: pairs per prompt, at most (default 3)"
    ),
    base: str | None = typer.Option(
        None,
        "--base",
        help="the trunk: warmstart (the warm-started policy; the default), model (the model "
        "as configured: a fresh tiny one or the pretrained one), or a hub id / local folder",
    ),
    steps: int | None = typer.Option(None, "--steps", help="optimiser steps (default: --epochs passes over the pairs)"),
    epochs: int | None = typer.Option(
        None, "--epochs", help="passes over the train pairs, when --steps is not given (default 15)"
    ),
    lr: float | None = typer.Option(
        None, "--lr", help="AdamW learning rate (default 5e-4, the tiny model's; about 1e-5 for real models)"
    ),
    batch_size: int | None = typer.Option(None, "--batch-size", help="pairs per optimiser step (default 32)"),
    held_out: float | None = typer.Option(
        None, "--held-out", help="share of the pairs (whole prompts) held out (default 0.2)"
    ),
    seed: int | None = typer.Option(None, "--seed", help="pair choice, label noise, split, head and order (default 0)"),
    cache_dir: str | None = typer.Option(None, "--cache-dir", help="default: the study's (.cache/harness)"),
    tracking_uri: str | None = typer.Option(
        None,
        "--tracking-uri",
        envvar="HARNESS_TRACKING_URI",
        help="MLflow tracking URI (default: sqlite:///runs/reward_models/mlflow.db)",
    ),
    as_json: bool = typer.Option(False, "--json", help="print the id, folder and metrics as JSON"),
) -> None:
    """Train a scalar-head reward model with the Bradley-Terry loss (cached), print its id and
    held-out metrics, and record it in MLflow."""
    _check_pair_source(pairs, from_verifier, label_noise)
    spec = reward_model_spec(study_file, assignments, cache_dir)
    studied = spec.task.reward if isinstance(spec.task.reward, LearnedRewardConfig) else None
    flags = dict(steps=steps, epochs=epochs, lr=lr, batch_size=batch_size, held_out=held_out, seed=seed, base=base)
    sampling = dict(
        prompts=prompts,
        samples_per_prompt=samples_per_prompt,
        pairs_per_prompt=pairs_per_prompt,
        label_noise=label_noise,
    )
    recipe = _recipe(study_file, studied, pairs, from_verifier, flags, sampling)
    built, logged = _build_and_record(spec, recipe, tracking_uri)
    if as_json:
        typer.echo(_json_summary(built, logged))
        return
    _print_summary(built, logged)
    typer.echo(_next_step(study_file, studied, spec, built.id, built.folder))


def _check_pair_source(pairs: Path | None, from_verifier: bool, label_noise: float | None) -> None:
    """The pairs come from a file or from the verifier, not both; label noise is the verifier's."""
    if pairs is not None and from_verifier:
        raise ConfigError("give the pairs as --pairs FILE.jsonl or build them with --from-verifier (one of the two)")
    if pairs is not None and label_noise is not None:
        raise ConfigError("--label-noise applies to --from-verifier pairs; a pair file's labels are used as they are")


def _recipe(
    study_file: Path | None,
    studied: LearnedRewardConfig | None,
    pairs: Path | None,
    from_verifier: bool,
    flags: dict[str, Any],
    sampling: dict[str, Any],
) -> RewardModelRecipe:
    """How the model is trained: from the flags (with --pairs or --from-verifier), else the
    study's own ``task.reward.train``, which then no flag may change."""
    from harness.engine.reward_model.settings import RewardModelRecipe, VerifierSampling

    if pairs is not None or from_verifier:
        return _settings(
            RewardModelRecipe,
            {
                **flags,
                "pairs": str(pairs) if pairs is not None else None,
                "from_verifier": _settings(VerifierSampling, sampling) if from_verifier else None,
            },
        )
    if studied is not None and studied.train is not None:
        given = [FLAGS[name] for name, value in {**flags, **sampling}.items() if value is not None]
        if given:
            raise ConfigError(
                f"{given[0]}: {study_file} says how its reward model is trained (task.reward.train); "
                "change it there, or give --pairs or --from-verifier to train another"
            )
        return studied.train
    raise ConfigError(
        "give the pairs as --pairs FILE.jsonl or build them with --from-verifier (one of the two), "
        "or a --study that says how its reward model is trained (task.reward.train)"
    )


def _build_and_record(
    spec: TrialSpec, recipe: RewardModelRecipe, tracking_uri: str | None
) -> tuple[TrainedRewardModel, tuple[str, str] | None]:
    """The model trained (or loaded from the cache) and recorded in MLflow: (built, the MLflow
    run id and store, or None)."""
    from harness.engine.reward_model.training import train_reward_model

    built = train_reward_model(spec, recipe)

    from harness.tracking.reward_model_runs import log_reward_model

    return built, log_reward_model(built.folder, built.manifest, tracking_uri=tracking_uri)


def _json_summary(built: TrainedRewardModel, logged: tuple[str, str] | None) -> str:
    """``--json``: the model's id, folder, held-out metrics and score scale, and its MLflow run."""
    return json.dumps(
        {
            "id": built.id,
            "folder": str(built.folder),
            "cached": built.cached,
            "metrics": built.manifest["metrics"],
            "score_mean": built.manifest["score_mean"],
            "score_std": built.manifest["score_std"],
            "mlflow_run_id": logged[0] if logged else None,
        },
        indent=2,
    )


def _print_summary(built: TrainedRewardModel, logged: tuple[str, str] | None) -> None:
    """The model's id and folder, whether it was trained now, its held-out metrics and score scale."""
    metrics = built.manifest["metrics"]
    how = "cached: loaded, nothing trained" if built.cached else f"trained in {metrics['time/train_s']:.0f} s"
    typer.echo(f"reward model {built.id} ({how})")
    typer.echo(f"  folder: {built.folder}")
    for key in SHOWN:
        if key in metrics:
            typer.echo(f"  {key:28s} {metrics[key]:.4g}")
    typer.echo(
        f"  scores of the held-out completions: mean {built.manifest['score_mean']:.4g}, "
        f"sd {built.manifest['score_std']:.4g} (a study's reward is normalised by them)"
    )
    if logged:
        typer.echo(f"MLflow: run {logged[0]} in experiment reward-models at {logged[1]}")


def _next_step(
    study_file: Path | None, studied: LearnedRewardConfig | None, spec: TrialSpec, built_id: str, folder: Path
) -> str:
    """What the study does with the model just built: which model it trains on, if another."""
    if studied is not None and studied.train is not None:
        from harness.engine.reward_model.key import recipe_id

        theirs = recipe_id(spec, studied.train)
        if theirs == built_id:
            return f"{study_file}'s trials train on this model (its task.reward.train): they load it from the cache"
        return (
            f"note: {study_file}'s trials train on the model its task.reward.train builds, {theirs}, not this "
            f"one; to train on this one set task.reward.model: {built_id} in place of task.reward.train"
        )
    if studied is not None and studied.model not in (built_id, str(folder)):
        return (
            f"note: {study_file} trains on reward model {studied.model}; to train on this one set "
            f"task.reward.model: {built_id}"
        )
    if studied is not None:
        return f"{study_file} trains on this model"
    return f"train a study on it: task: {{reward: {{model: {built_id}}}}}"
