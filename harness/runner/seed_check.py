"""The seed check before a study's first trial (``checks: {seeds: true}``, the default).

``harness run`` starts the control's first trial as a worker would, in a trial process, and
calls :data:`SEED_CHECK_FN` on it instead of training (``harness.engine.seed_check``: the same
seed must repeat, two seeds must differ). A failure stops the run before anything is queued,
with the check's own line. While it runs (the first trial of a study may build the warm start,
or a reward model, for a minute or more) the console shows the trial process's progress lines,
which otherwise go to its log only. A pass is written to ``<study>/checks/`` under the control's config
hash, so a re-run of the same design does not repeat it. With a custom ``--trial-fn`` (fake
trials, in tests) there is no engine sampler to check, and it is skipped.
"""

from __future__ import annotations

import json

from harness.engine.spec import PROGRESS_PREFIXES
from harness.errors import HarnessError
from harness.ground.console import say
from harness.runner.child import DEFAULT_TRIAL_FN
from harness.runner.launch import LogFollower, run_trial_process
from harness.runner.options import RunOptions
from harness.study.expand import condition_spec

SEED_CHECK_FN = "harness.engine.seed_check:check_seeds"
SEED_CHECK_ERROR = "SeedCheckError"  # the type of the check's own finding (harness.engine.seed_check)


class SeedCheckFailed(HarnessError):
    """The seeds do not reach the rollouts, one seed does not repeat, or the check could not run."""


def seed_check(study, study_dir, opts: RunOptions, *, before_jobs: bool = False) -> str:
    """Run the check unless switched off, skipped or passed before; the line to print.
    ``before_jobs``: a scheduler runs the trials, so the check (and the warm start it builds)
    runs here, on the submitting machine, before any job goes out; the line says so."""
    if not study.checks.seeds:
        return "seed check: off (checks: {seeds: false})"
    if opts.trial_fn != DEFAULT_TRIAL_FN:
        return f"seed check: skipped (trials run by {opts.trial_fn}, not the engine's sampler)"
    spec = condition_spec(study, study.control, study.seeds[0])
    if not spec.trainer.is_builtin:
        return (
            f"seed check: skipped (the control is trained by a {spec.trainer.kind} program, not the engine's sampler)"
        )
    passed = study_dir / "checks" / f"seeds-{spec.config_hash()}.json"
    if passed.is_file():
        return f"seed check: passed before ({passed.name})"
    log_path = study_dir / "logs" / "seed-check.log"
    here = (
        " on this machine, before any job is submitted (it may build the warm start first; "
        "checks: {seeds: false} skips the check)"
        if before_jobs
        else ""
    )
    say(
        f"seed check: sampling the control's first rollout with seed {spec.seed} twice and seed {spec.seed + 1} "
        f"once{here} (log: {log_path})",
        stream=opts.out(),
    )
    outcome = run_trial_process(
        spec.model_dump_json(),
        trial_fn=SEED_CHECK_FN,
        work_dir=study_dir / "tmp",
        log_path=log_path,
        stem="seed-check",
        timeout_s=opts.trial_timeout,
        kill_grace_s=opts.kill_grace,
        header=f"=== seed check of {spec.trial_id} ===",
        follow=LogFollower(log_path, PROGRESS_PREFIXES, lambda line: say(f"seed check: {line}", stream=opts.out())),
    )
    if outcome.result is None:
        if outcome.error is not None and outcome.error.type == SEED_CHECK_ERROR:
            raise SeedCheckFailed(f"seed check: {outcome.error.message}")
        reason = outcome.reason or "interrupted"
        raise SeedCheckFailed(
            f"seed check could not run ({reason}; log: {log_path}): every trial would "
            "start the same way; fix that, or set checks: {seeds: false} to skip the check"
        )
    final = outcome.result.get("final", {})
    passed.parent.mkdir(parents=True, exist_ok=True)
    passed.write_text(json.dumps({"trial_id": spec.trial_id, **final}, indent=1), encoding="utf-8")
    return (
        f"seed check: seed {spec.seed} repeats ({final.get('check/same_seed_tokens_alike', 1):.0%} of the tokens "
        f"alike), seeds {spec.seed} and {spec.seed + 1} differ ({final.get('check/other_seed_tokens_alike', 0):.0%}"
        f" alike) in {outcome.wall_time_s:.1f}s"
    )
