"""Commands: ``harness validate`` and ``harness plan`` (look at a study without running it)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from harness.cli.app import app
from harness.errors import HarnessError
from harness.ground.console import error, warn
from harness.ground.exit_codes import EXIT_BAD_INPUT
from harness.study.expand import comparisons, condition_spec, study_dir, tuning_specs
from harness.study.fragments import check_fragment
from harness.study.load import (
    check_task,
    is_fragment,
    load_study,
    read_study_data,
    study_warnings,
)
from harness.study.model_check import check_model
from harness.study.noop import check_arms_differ
from harness.study.plan import (
    SFT_STEP_S,
    TRIAL_TURNOVER_S,
    ProbedCosts,
    StudyPlan,
    describe_overrides,
    format_duration,
    measured_costs,
    plan_study,
)
from harness.study.resources import Resources
from harness.study.rollout_check import check_rollout
from harness.study.sections import AA, AA_SEED_OFFSET
from harness.tracking.records import read_records


def _fail(message: str) -> None:
    error(message)
    raise typer.Exit(EXIT_BAD_INPUT)


def _seeds(seeds: list[int]) -> str:
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{len(seeds)} seeds ({seeds[0]}..{seeds[-1]})"
    return f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} {seeds}"


def _summary(study) -> list[str]:
    n_cond = len(study.conditions())
    arms = f"{len(study.arms)} arm{'s' if len(study.arms) != 1 else ''}"
    lines = []
    if study.tuning is not None:
        t = study.tuning
        n_tune = len(study.arms) * t.n_trials * len(t.seeds)
        lines.append(
            f"study {study.name}: {arms}, control {study.control}; tuning {t.n_trials} trials/arm "
            f"x {_seeds(t.seeds)} = {n_tune} trials on {', '.join(t.search_space)}; then each "
            f"arm's best x {_seeds(study.seeds)} = {len(study.arms) * len(study.seeds)} trials"
        )
    else:
        design = arms
        if study.grid:
            design += f" x {n_cond // len(study.arms)} grid cells = {n_cond} conditions"
        lines.append(
            f"study {study.name}: {design}, control {study.control}, {_seeds(study.seeds)} "
            f"-> {n_cond * len(study.seeds)} trials"
        )
    lines.append(
        f"primary metric {study.primary_metric} ({study.direction}); "
        f"{len(comparisons(study))} comparison(s) vs control; output {study_dir(study)}"
    )
    lines.append(f"decision: {decision_line(study.min_effect, study.test, study.failures)}")
    if study.sequential is not None:
        lines.append(
            f"sequential: {looks_line(study.sequential.schedule(), study.sequential.spending)}; "
            "the trials above are its maximum"
        )
    if study.compute_looks is not None:
        lines.append(study.compute_looks.describe(study.primary_at, study.train.steps, study.min_effect))
    extra = [
        what
        for what, on in (
            ("an A/A copy of the control", study.calibration == "aa"),
            ("a placebo", study.placebo != "none"),
        )
        if on
    ]
    if extra:
        lines.append(f"calibration: {' and '.join(extra)}, reported apart from the verdicts")
    return lines


def resource_lines(study) -> list[str]:
    """Each arm's resources per trial and the study's executor, when the study names any."""
    given = study.executor is not None or any(
        r != Resources() for r in (study.resources, *(arm.resources for arm in study.arms))
    )
    if not given:
        return []
    lines = [f"executor {study.executor or 'local'} (harness run --executor overrides it); resources per trial:"]
    width = max(len(arm.name) for arm in study.arms)
    lines += [f"  {arm.name:<{width}}  {study.resources_of(arm.name).describe()}" for arm in study.arms]
    return lines + scheduler_notes(study)


def scheduler_notes(study) -> list[str]:
    """What a scheduler study's first ``harness run`` does before any job goes out, and the Slurm
    time limit of an arm that gives none."""
    from harness.runner.executors.slurm import DEFAULT_TIME_MIN, TIMEOUT_MARGIN_MIN

    if study.executor not in ("slurm", "ray"):
        return []
    lines = []
    if study.executor == "slurm" and any(study.resources_of(arm.name).time is None for arm in study.arms):
        lines.append(
            f"  an arm without time: its Slurm jobs get --trial-timeout + {TIMEOUT_MARGIN_MIN} min, "
            f"else {DEFAULT_TIME_MIN} min"
        )
    if study.checks.seeds and condition_spec(study, study.control, study.seeds[0]).trainer.is_builtin:
        lines.append(
            "seed check: the first `harness run` runs it, and builds the warm start it needs, on the machine it "
            "runs on (a login node) before any job goes out; checks: {seeds: false} skips it, a pass is kept"
        )
    return lines


def looks_line(looks: list[int], spending: str) -> str:
    return f"looks at {', '.join(map(str, looks))} seeds per arm ({spending.replace('_', '-')} spending)"


def sequential_lines(plan: StudyPlan) -> list[str]:
    """A sequential plan: its looks, and the trials it spends on average under no effect and at
    min_effect (planning figures: the sd of the control's trial means, measured or assumed)."""
    from harness.stats.sequential import expected_trials

    design = plan.sequential
    arms = len(plan.comparisons)
    cells = sum(c.arm == plan.control and c.role == "arm" for c in plan.conditions) or 1
    lines = [f"sequential: {looks_line(design['looks'], design['spending'])}; the trials below are the maximum"]
    if not arms:
        return lines
    if plan.control_sd is not None:
        sd, source = (
            plan.control_sd,
            f"the sd of the control's trial means {plan.control_sd:.3g} ({plan.control_sd_from} records)",
        )
    elif plan.min_effect is not None:
        sd, source = plan.min_effect, "an sd of trial means assumed equal to min_effect (none measured yet)"
    else:
        return [*lines, "  expected trials: set min_effect (or run the first look) to plan them"]
    arms_per_cell = arms // cells
    spent = {
        what: cells
        * expected_trials(
            design["looks"],
            arms=arms_per_cell,
            delta=delta,
            margin=plan.min_effect,
            sd=sd,
            spending=design["spending"],
            followers=plan.followers,
        ).mean
        for what, delta in (("no effect", 0.0), ("min_effect", plan.min_effect))
        if delta is not None
    }
    shown = "; ".join(f"{n:.0f} under {what}" for what, n in spent.items())
    return [*lines, f"  expected trials: {shown} (every arm alike; from {source})"]


@app.command()
def validate(
    study_files: list[Path] = typer.Argument(..., help="one or more study YAML files", metavar="STUDY.yaml..."),
) -> None:
    """Check study files without running a trial.

    Checks schema, presets, overrides, grid, tuning, the model as far as it can be read here (a
    GGUF file's header, a local folder's config.json, a chat template asked for; a hub id is left
    to the trial), the vLLM environment of rollout.backend vllm (unless a server's URL is given),
    the task (its files, and that the tiny model can read it), and that arms which differ in the
    file compute different losses; prints a summary per file. An include-only
    fragment (fragment: true, e.g. studies/common/*.yaml) is checked as one: its keys and values. A
    bad file prints one line naming the field and exits with 2.

    Building the task runs code: validate imports the modules that task.tools and task.reward
    name as module:function and calls each tool factory, as a trial would. Validate only study
    files whose code you trust.
    """
    from harness.runner.executors import check_resources

    failed = 0
    for path in study_files:
        try:
            data = read_study_data(path)
            if is_fragment(data):
                checked = ", ".join(check_fragment(data)) or "nothing: it is empty"
                typer.echo(
                    f"ok: {path} (an include-only fragment; checked {checked}; "
                    "the studies that include it are checked whole)"
                )
                continue
            study = load_study(path)
            check_model(study.model)
            check_rollout(study)
            n_train, n_eval = check_task(study)
            check_arms_differ(study)
            check_resources(study)
            warnings = study_warnings(study)
        except HarnessError as err:
            failed += 1
            prefix = f"{path}: " if len(study_files) > 1 else ""
            error(f"{prefix}{err}")
            continue
        typer.echo(f"ok: {path}")
        for line in [*_summary(study), *resource_lines(study)]:
            typer.echo(f"  {line}")
        typer.echo(f"  task {study.task.name}: {n_train} train / {n_eval} held-out prompts; model {study.model.name}")
        for warning in warnings:
            warn(f"{path}: {warning}", prefix="")
    if failed:
        raise typer.Exit(EXIT_BAD_INPUT)


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        out.append("  ".join(cells).rstrip())
    return out


def decision_line(min_effect: float | None, test: str, failures: str) -> str:
    """What the verdicts will rest on, as registered before any trial runs."""
    margin = (
        f"min_effect {min_effect:g} (better / worse / equivalent / inconclusive)"
        if min_effect is not None
        else "no min_effect: equivalence cannot be concluded (set min_effect beside primary_metric)"
    )
    return f"{margin}; primary test {test}; failed trials: {failures}"


def render_plan(plan: StudyPlan) -> str:
    """The plan as text: the design, one row per condition, the totals and the estimate."""
    lines = [f"study {plan.study}" + (f" ({plan.source})" if plan.source else "")]
    lines.append(f"  primary metric: {plan.primary_metric} ({plan.direction}); control: {plan.control}")
    lines.append(f"  decision: {decision_line(plan.min_effect, plan.test, plan.failures)}")
    lines.append(f"  output: {plan.output_dir}")
    lines.append("")
    if plan.tuning is not None:
        t = plan.tuning
        lines.append(
            f"phase 1, tuning: {t.n_trials} trials per arm x {_seeds(t.seeds)} = {t.trials} trials "
            f"({t.done} done), est. {format_duration(t.est_s)}"
        )
        for key, desc in t.search_space.items():
            lines.append(f"  search {key}: {desc}")
        lines.append(f"phase 2, comparison: each arm's best configuration x {_seeds(plan.seeds)}")
    else:
        aa = any(c.role == AA for c in plan.conditions)
        lines.append(
            f"seeds: {_seeds(plan.seeds)}, the same for every condition"
            + (f" (the A/A copy: the same + {AA_SEED_OFFSET})" if aa else "")
        )
    if plan.sequential is not None:
        lines += sequential_lines(plan)
    if plan.compute_looks is not None:
        lines.append(plan.compute_looks)
    lines.append("")
    rows = [["condition", "algorithm", "overrides", "trials", "done", "tokens/trial", "est/trial"]]
    for c in plan.conditions:
        name = c.name + (" (control)" if c.arm == plan.control and c.name == c.arm else "")
        rows.append(
            [
                name,
                c.algorithm,
                describe_overrides(c.overrides),
                str(c.trials),
                str(c.done),
                f"{c.tokens_per_trial:,}",
                format_duration(c.est_trial_s),
            ]
        )
    lines += _table(rows, right={3, 4, 5, 6})
    lines.append("")
    if plan.comparisons:
        lines.append(f"comparisons vs control ({len(plan.comparisons)}):")
        lines += [f"  {a} vs {b}" for a, b in plan.comparisons]
    else:
        lines.append("comparisons: none (a single arm; the report gives its noise floor)")
    lines.append("")
    todo = plan.total_trials - plan.done_trials
    lines.append(f"total: {plan.total_trials} trials ({plan.done_trials} done, {todo} to run)")
    lines += estimate_lines(plan)
    lines += [f"earlier design: {line} (kept in {plan.output_dir}/records)" for line in plan.earlier_design]
    for warning in plan.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def _s(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 60 else format_duration(seconds)


def estimate_lines(plan: StudyPlan) -> list[str]:
    """How long the rest will take and what that adds up, then what the records measured."""
    workers = f"{plan.workers} worker{'s' if plan.workers != 1 else ''}"
    if plan.est_remaining_s > 0:
        parts = [f"{_s(plan.run_start_s)} to start"]
        if plan.warmstart_s:
            parts.append(f"at most {_s(plan.warmstart_s)} of warm start")
        parts.append(f"{format_duration(plan.est_remaining_s)} of trials / {workers}")
        lines = [f"estimate: about {format_duration(plan.est_wall_s)} on {workers} = {' + '.join(parts)}"]
    else:
        lines = ["estimate: nothing left to run"]
    costs, probed = plan.costs, plan.probed
    if probed is not None:
        lines.append(
            f"  per trial: {_s(costs.start_s)} to start its process + {_s(probed.load_s)} to load the model + "
            f"{probed.steps} steps x {_s(probed.step_s)} + {probed.evaluations} evaluations x {_s(probed.eval_s)} "
            f"+ {TRIAL_TURNOVER_S:g}s to the next trial (its first condition: {_s(costs.start_s + probed.total_s)})"
        )
    else:
        lines.append(
            f"  per trial: {_s(costs.start_s)} to start its process + tokens/trial x {costs.overall:.2g} s/token "
            f"(model, warm-start load, rollouts, updates, evaluations) + {TRIAL_TURNOVER_S:g}s to the next trial"
        )
    lines.append(f"  {plan.rate_source}")
    for w in plan.warmstarts:
        if w.cached:
            lines.append(f"  warm start: cached in {w.folder}; each trial loads it")
        else:
            lines.append(
                f"  warm start: not cached ({w.folder}): built once before the trials that use it, at "
                f"most {w.max_steps} SFT steps x {SFT_STEP_S:g}s (it stops sooner at its target accuracy)"
            )
    m = plan.measured
    if m is not None:
        lines.append(
            f"measured: {m.trials} completed trial(s), {_s(m.median_s)} each from start to finish (median; the "
            f"defaults estimate {_s(m.default_median_s)}), {format_duration(m.total_s)} in all; "
            f"{format_duration(m.span_s)} from the first start to the last finish"
        )
    return lines


def _cost_probe(study, cache_dir: str | None, again: bool) -> ProbedCosts | None:
    """The cost probe of the study's first control trial (``harness.engine.cost_probe``, imported
    here: a tiny-model plan never loads torch), for a real model trained by the builtin loop;
    None for the tiny model, a trainer program, or a model the probe cannot load (said in one line)."""
    first = (
        tuning_specs(study, study.control, {}, study.tuning.seeds[0])
        if study.tuning is not None
        else condition_spec(study, next(c for c in study.iter_conditions() if c.arm == study.control), study.seeds[0])
    )
    if first.model.name == "tiny" or first.trainer.kind != "builtin":
        return None
    from harness.engine.cost_probe import probe_costs

    try:
        spec = first if cache_dir is None else first.model_copy(update={"cache_dir": cache_dir})
        return probe_costs(spec, again=again)
    except HarnessError as err:
        warn(f"plan: no cost probe of {first.model.name} ({err}); the estimate uses the testbed defaults")
        return None


@app.command()
def plan(
    study_file: Path = typer.Argument(..., help="study YAML file", metavar="STUDY.yaml"),
    workers: int = typer.Option(1, "--workers", "-w", min=1, help="trials run at once"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
    probe: bool = typer.Option(
        True, "--probe/--no-probe", help="a real model without records: price its trials by a short probe"
    ),
    reprobe: bool = typer.Option(False, "--reprobe", help="probe again, whatever an earlier plan kept"),
    cache_dir: str | None = typer.Option(
        None, "--cache-dir", help="where the probe's result (and a converted model) is kept; default: the trials'"
    ),
) -> None:
    """Print a study's design and estimated run time without running it.

    Estimate: the run's start, each warm start not cached yet, and per trial its process start
    plus tokens (steps x prompts_per_step x group_size x max_new_tokens, plus evaluation) x a
    rate; the start and the rate are measured from completed records in the study folder, or
    else the defaults of harness.study.plan. A real model without records is priced instead by
    a short probe on this machine (its load, one step, one evaluation; cached, so the next plan
    is instant). After a run, it shows what the records measured.
    """
    try:
        study = load_study(study_file)
        check_arms_differ(study)
        records = read_records(study_dir(study))
        measured = measured_costs(r for r in records if r.status == "completed").measured_from
        probed = _cost_probe(study, cache_dir, reprobe) if probe and not measured else None
        result = plan_study(study, workers=workers, records=records, probe=probed)
    except HarnessError as err:
        _fail(str(err))
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        typer.echo(render_plan(result))
        for line in resource_lines(study):
            typer.echo(line)
