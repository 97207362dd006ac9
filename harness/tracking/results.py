"""Results frames: what a study has produced so far, as pandas frames for stats and reports.

The local trial records are authoritative. The Optuna storage (``<study_dir>/optuna.db``, or any
storage URL, e.g. the PostgreSQL database of a study run on many machines) adds the records
other machines stored there and the trials that have no record yet (waiting, running, or
failed without a record), matched by the ``trial_id`` user attribute of each Optuna trial.

``load_results(study_or_dir) -> Results(trials, curves, meta)``; ``harness.results(study)`` is the same call.
``Results.prompts``, the per-prompt evaluation scores, is decoded on first use only.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
from pydantic import ValidationError

from harness.engine.spec import METRIC_RANGES, BenchmarkConfig, TrainConfig, TrialSpec
from harness.ground.urls import redact_text, redact_url
from harness.store import (
    ARM,
    PHASE,
    REASON,
    SEED,
    SPEC,
    TRIAL_ID,
    StorageUnreadable,
    default_storage_url,
    open_storage,
)
from harness.store.rules import read_rules
from harness.study.design import earlier_design_of, summary_lines
from harness.study.expand import calibration_comparisons, condition_configs
from harness.study.expand import comparisons as comparisons_of
from harness.study.schema import Study, condition_name
from harness.study.sections import AA, ComputeLooks, PrimaryAt, Scaling, Sequential
from harness.tracking.prompt_scores import LONG_COLUMNS, decode_scores, long_columns
from harness.tracking.records import (
    TrialRecord,
    flatten,
    history_points,
    read_records,
    record_path,
)
from harness.tracking.segments import fold_segments
from harness.tracking.shared_records import merge, open_store
from harness.tracking.study_meta import BenchmarkMeta, ComputeLookDesign, LookDesign, StudyMeta
from harness.tracking.study_ref import StudyRef, resolve_study, study_name

# warnings: the trial's warning lines ("<code>: ...") joined by newlines, "" when it has none
BASE_COLUMNS = ["trial_id", "arm", "seed", "status", "error", "wall_time_s", "config_hash", "warnings"]
CURVE_COLUMNS = ["trial_id", "arm", "seed", "step", "metric", "value"]
# final metrics the trainer always reports come first, in this order; the rest are sorted
FINAL_ORDER = ["eval/accuracy", "eval/mean_reward", "eval/accuracy_start", "tokens/total"]
# final metrics the frame leaves out (one name per quantity): the trainer's time/total_s is the
# record's wall_time_s
OMITTED_FINALS = frozenset({"time/total_s"})
PARAM_PREFIX = "param/"
EARLIER_COLUMNS = ["trial_id", "arm", "seed", "status", "reason"]
PROMPT_COLUMNS = ["trial_id", "arm", "seed", *LONG_COLUMNS]


@dataclass
class Results:
    """``trials``: one row per trial of the current design; ``curves``: long per-step frame;
    ``meta``: the study's metadata (:class:`StudyMeta`); ``earlier``: trials of an earlier design of the study (kept on
    disk, listed, never analysed), with the ``reason``; ``prompts``: long per-prompt evaluation
    frame of the same trials as ``curves`` (:func:`prompts_frame`), built by ``prompt_source``
    on first access, since a big study's scores are large and most reports never look."""

    trials: pd.DataFrame
    curves: pd.DataFrame
    meta: StudyMeta = field(default_factory=StudyMeta)
    earlier: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=EARLIER_COLUMNS))
    prompt_source: Callable[[], pd.DataFrame] = field(default=lambda: prompts_frame([], "."), repr=False)

    def completed(self) -> pd.DataFrame:
        return self.trials[self.trials["status"] == "completed"]

    @functools.cached_property
    def prompts(self) -> pd.DataFrame:
        return self.prompt_source()


# --------------------------------------------------------------------------------------------
# the Optuna view


_SEED_IN_ID = re.compile(r"-s(\d+)-[0-9a-f]{8}$")
_OPTUNA_STATUS = {
    "WAITING": "waiting",
    "RUNNING": "running",
    "FAIL": "failed",
    "COMPLETE": "completed",
    "PRUNED": "failed",
}
_PRECEDENCE = {"running": 0, "waiting": 1, "completed": 2, "failed": 3}


def _storage_url(study_dir: str | os.PathLike, storage: str | None) -> str | None:
    """``storage``, else the study's own ``optuna.db`` when it exists, else None."""
    if storage:
        return storage
    return default_storage_url(study_dir) if (Path(study_dir) / "optuna.db").is_file() else None


def _ours(optuna_study: str, name: str | None) -> bool:
    """Whether an Optuna study of a (shared) storage holds the comparison trials of ``name``:
    ``<name>`` (or an older ``<name>/...``). Tuning queues hold no trial ids: never read."""
    return name is None or optuna_study == name or optuna_study.startswith(f"{name}/")


def optuna_trials(
    study_dir: str | os.PathLike, *, storage: str | None = None, study: str | None = None, strict: bool = False
) -> dict[str, dict[str, Any]]:
    """``trial_id -> {status, arm, seed, phase, spec, error}`` from the Optuna storage.

    ``storage`` is any storage URL (PostgreSQL shared by many machines, ...); default: the
    study's ``<study_dir>/optuna.db``. With ``study``, only that study's queues are read (a
    shared database holds many studies). Empty when there is no storage or it cannot be read
    (a warning says why, without credentials; ``strict``: ``StorageUnreadable`` instead). Read
    through Optuna's public storage API only (the queue's own statements are the store's,
    :mod:`harness.store.optuna_tables`).
    """
    url = _storage_url(study_dir, storage)
    if url is None:
        return {}
    try:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        rdb = open_storage(url, create=False)
        out: dict[str, dict[str, Any]] = {}
        for frozen_study in rdb.get_all_studies():
            if not _ours(frozen_study.study_name, study):
                continue
            study_id = rdb.get_study_id_from_name(frozen_study.study_name)
            for trial in rdb.get_all_trials(study_id, deepcopy=False):
                attrs = trial.user_attrs
                trial_id = attrs.get(TRIAL_ID)
                if not isinstance(trial_id, str):
                    continue
                status = _OPTUNA_STATUS.get(trial.state.name)
                if status is None:
                    continue
                entry = {
                    "status": status,
                    "arm": attrs.get(ARM),
                    "seed": attrs.get(SEED),
                    "phase": attrs.get(PHASE),
                    "spec": attrs.get(SPEC),
                    "error": attrs.get(REASON) or trial.system_attrs.get("fail_reason"),
                }
                old = out.get(trial_id)
                if old is None or _PRECEDENCE[status] < _PRECEDENCE[old["status"]]:
                    out[trial_id] = entry
        rdb.engine.dispose()
        return out
    except Exception as err:  # noqa: BLE001 - a broken queue must not hide the records
        _unread(StorageUnreadable(f"cannot read the Optuna storage {_cause(url, err)}"), strict)
        return {}


def stored_records(
    study_dir: str | os.PathLike, *, storage: str | None, study: str, strict: bool = False
) -> dict[str, TrialRecord]:
    """Each trial's current record as stored in the shared storage by any machine
    (:mod:`harness.tracking.shared_records`); empty without a storage (a warning when it cannot be
    read; ``strict``: ``StorageUnreadable`` instead)."""
    url = _storage_url(study_dir, storage)
    if url is None:
        return {}
    try:
        return open_store(url, study).latest()
    except Exception as err:  # noqa: BLE001
        _unread(StorageUnreadable(f"cannot read the records stored in {_cause(url, err)}"), strict)
        return {}


def _cause(url: str, err: Exception) -> str:
    """``<url>: <Error>: <message>``, without credentials."""
    return f"{redact_url(url)}: {type(err).__name__}: {redact_text(str(err), url)}"


def _unread(err: StorageUnreadable, strict: bool) -> None:
    """Raise ``err`` (``strict``: the caller wants all the trials or none), or warn and go on
    with the local records only."""
    if strict:
        raise err
    warnings.warn(f"{err}; showing local records only", stacklevel=3)


# --------------------------------------------------------------------------------------------
# frames


def _param_value(value: Any) -> Any:
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    return value


def _spec_dict(spec: Any) -> dict[str, Any] | None:
    if isinstance(spec, dict):
        return spec
    if isinstance(spec, str):
        try:
            loaded = json.loads(spec)
        except ValueError:
            return None
        return loaded if isinstance(loaded, dict) else None
    return None


def _seed_of(trial_id: str, seed: Any) -> int | None:
    if isinstance(seed, int) and not isinstance(seed, bool):
        return seed
    match = _SEED_IN_ID.search(trial_id)
    return int(match.group(1)) if match else None


def _final_order(keys: set[str]) -> list[str]:
    return [k for k in FINAL_ORDER if k in keys] + sorted(keys - set(FINAL_ORDER))


def trials_frame(
    records: list[TrialRecord], queued: dict[str, dict[str, Any]] | None = None, *, phase: str | None = "compare"
) -> pd.DataFrame:
    """One row per trial: records first (authoritative), then Optuna-only trials."""
    rows: list[dict[str, Any]] = []
    finals: set[str] = set()
    params: set[str] = set()
    seen = set()
    queued = queued or {}
    for record in records:
        if phase is not None and record.phase != phase:
            continue
        seen.add(record.trial_id)
        status, error = record.status, record.error
        live = queued.get(record.trial_id)
        if status == "failed" and live and live["status"] in ("running", "waiting"):
            status = live["status"]  # a retry of a failed attempt is under way
        row = {
            "trial_id": record.trial_id,
            "arm": record.arm,
            "seed": record.seed,
            "status": status,
            "error": error,
            "wall_time_s": record.wall_time_s,
            "config_hash": record.config_hash,
            "warnings": "\n".join(record.warnings),
        }
        if phase is None:
            row["phase"] = record.phase
        for key, value in record.final.items():
            if key in OMITTED_FINALS:
                continue
            row[key] = float(value)
            finals.add(key)
        for key, value in flatten(record.spec).items():
            row[PARAM_PREFIX + key] = _param_value(value)
            params.add(PARAM_PREFIX + key)
        rows.append(row)
    for trial_id in sorted(queued):
        info = queued[trial_id]
        if trial_id in seen or (phase is not None and info.get("phase") not in (None, phase)):
            continue
        spec = _spec_dict(info.get("spec"))
        arm = info.get("arm") or (spec or {}).get("arm") or trial_id.rsplit("-s", 1)[0]
        error = info.get("error")
        if info["status"] in ("completed", "failed") and not error:
            error = f"Optuna marks this trial {info['status']} but it has no local record"
        if info["status"] == "completed":
            info = {**info, "status": "failed"}  # no record: no result to count
        row = {
            "trial_id": trial_id,
            "arm": arm,
            "seed": _seed_of(trial_id, info.get("seed")),
            "status": info["status"],
            "error": error,
            "wall_time_s": float("nan"),
            "config_hash": None,
            "warnings": "",
        }
        if phase is None:
            row["phase"] = info.get("phase")
        if spec:
            try:
                row["config_hash"] = TrialSpec.model_validate(spec).config_hash()
            except Exception:  # noqa: BLE001 - an old or partial spec still gives params
                pass
            for key, value in flatten(spec).items():
                row[PARAM_PREFIX + key] = _param_value(value)
                params.add(PARAM_PREFIX + key)
        rows.append(row)
    columns = BASE_COLUMNS + (["phase"] if phase is None else []) + _final_order(finals) + sorted(params)
    frame = pd.DataFrame(rows, columns=columns)
    for key in finals:
        frame[key] = frame[key].astype("float64")
    frame["wall_time_s"] = frame["wall_time_s"].astype("float64")
    frame["seed"] = frame["seed"].astype("int64" if frame["seed"].notna().all() else "Int64")
    return frame.reset_index(drop=True)


def curves_frame(records: list[TrialRecord], *, phase: str | None = "compare") -> pd.DataFrame:
    """Long frame of every numeric history value: trial_id, arm, seed, step, metric, value."""
    cols: dict[str, list] = {c: [] for c in CURVE_COLUMNS}
    for record in records:
        if phase is not None and record.phase != phase:
            continue
        for step, metric, value in history_points(record):
            cols["trial_id"].append(record.trial_id)
            cols["arm"].append(record.arm)
            cols["seed"].append(record.seed)
            cols["step"].append(step)
            cols["metric"].append(metric)
            cols["value"].append(value)
    frame = pd.DataFrame(cols, columns=CURVE_COLUMNS)
    return frame.astype({"seed": "int64", "step": "int64", "value": "float64"})


def prompts_frame(
    records: list[TrialRecord], study_dir: str | os.PathLike, *, phase: str | None = "compare"
) -> pd.DataFrame:
    """Long frame of every evaluation's per-prompt scores: trial_id, arm, seed, step, prompt_id,
    metric (``harness.tracking.prompt_scores.PROMPT_METRICS``), value. Records without scores
    add no rows; damaged scores are a HarnessError naming the record file."""
    cols: dict[str, list] = {c: [] for c in PROMPT_COLUMNS}
    for record in records:
        if record.prompt_scores is None or (phase is not None and record.phase != phase):
            continue
        where = f"trial record {record_path(study_dir, record.trial_id)}"
        rows = long_columns(decode_scores(record.prompt_scores, where))
        n = len(rows["step"])
        cols["trial_id"] += [record.trial_id] * n
        cols["arm"] += [record.arm] * n
        cols["seed"] += [record.seed] * n
        for key, values in rows.items():
            cols[key] += values
    frame = pd.DataFrame(cols, columns=PROMPT_COLUMNS)
    return frame.astype({"seed": "int64", "step": "int64", "value": "float64"})


# --------------------------------------------------------------------------------------------
# meta


def _seed_list(seeds: Any) -> list[int]:
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        return list(range(seeds))
    if isinstance(seeds, (list, tuple)):
        return [int(s) for s in seeds]
    return []


def _sequential_meta(section: Any) -> LookDesign | None:
    """The looks of a sequential study (from its model or raw YAML)."""
    if section is None:
        return None
    try:
        section = section if isinstance(section, Sequential) else Sequential.model_validate(section)
    except ValidationError:
        return None
    return LookDesign(looks=section.schedule(), spending=section.spending)


def _compute_looks_meta(
    section: Any, primary_at: dict[str, Any], train: Any, min_effect: Any
) -> ComputeLookDesign | None:
    """A study's looks over compute (from its model or raw YAML), resolved where they read: on
    ``primary_at``'s axis at fractions of its budget, or under ``point: final`` at fractions of
    ``train.steps`` on the step axis; None where it has none or its raw YAML does not validate."""
    if section is None:
        return None
    try:
        section = section if isinstance(section, ComputeLooks) else ComputeLooks.model_validate(section)
        train = train if isinstance(train, TrainConfig) else TrainConfig.model_validate(train or {})
    except ValidationError:
        return None
    catch_up = section.catch_up if section.catch_up is not None else min_effect
    if catch_up is None:
        return None
    primary = PrimaryAt.model_validate(primary_at)
    axis, points = section.axis_points(primary, train.steps)  # where the trials' looks were evaluated
    budget, point = float(points[-1]), "budget" if primary.point == "final" else primary.point
    return ComputeLookDesign(
        at=list(section.at),
        spending=section.spending,
        catch_up=float(catch_up),
        against=section.against,
        axis=axis,
        budget=budget,
        point=point,
        forecast=section.forecast,
    )


def _benchmarks_meta(benchmarks: Any, primary: str | None) -> list[BenchmarkMeta]:
    """The study's held-out benchmarks as the decisions read them: name, the full name of the
    metric decided on (``eval/<name>/accuracy``) and min_effect (None: the study's)."""
    out = []
    for entry in benchmarks or []:
        try:
            config = entry if isinstance(entry, BenchmarkConfig) else BenchmarkConfig.model_validate(entry)
        except ValidationError:
            continue
        out.append(BenchmarkMeta(config.name, config.primary_metric(primary or "eval/accuracy"), config.min_effect))
    return out


def _section_fields(section: Any, model: type[PrimaryAt] | type[Scaling]) -> dict[str, Any]:
    """A section's keys (from its model or raw YAML) as a plain dict; its defaults where the
    study lacks it or its raw YAML does not validate."""
    try:
        section = section if isinstance(section, model) else model.model_validate(section or {})
    except ValidationError:
        section = model()
    return section.model_dump()


def _provenance(values: list[str | None]) -> str | None:
    distinct = sorted({v for v in values if v})
    return ", ".join(distinct) if distinct else None


def _meta(ref: StudyRef, records: list[TrialRecord], trials: pd.DataFrame, **more: Any) -> StudyMeta:
    study, raw = ref.study, ref.raw

    def pick(name: str, default: Any = None) -> Any:
        if study is not None and hasattr(study, name):
            return getattr(study, name)
        return raw.get(name, default)

    name = pick("name") or (Counter(r.study for r in records).most_common(1)[0][0] if records else ref.dir.name)
    control = pick("control")
    direction = pick("direction", "maximize")
    direction = getattr(direction, "value", direction)
    observed = sorted(set(trials["arm"].dropna().astype(str)))
    if study is not None and hasattr(study, "conditions"):
        conditions = list(study.conditions())
    elif raw.get("arms") and not raw.get("grid"):
        conditions = [a["name"] for a in raw["arms"] if isinstance(a, dict) and "name" in a]
    else:
        conditions = observed
    conditions += [c for c in observed if c not in conditions]
    calibration, pools, mirrors = [], {}, {}
    if study is not None:
        comparisons = [tuple(c) for c in comparisons_of(study)]
        calibration = [tuple(c) for c in calibration_comparisons(study)]
        pools = {c.name: study.condition_seeds(c) for c in study.iter_conditions()}
        mirrors = {c.name: condition_name(study.control, c.cell) for c in study.iter_conditions() if c.role != "arm"}
    else:
        comparisons = []
        for condition in conditions:
            arm, bracket, cell = condition.partition("[")
            if control and arm != control:
                comparisons.append((condition, f"{control}{bracket}{cell}"))

    def seeds_of(frame: pd.DataFrame) -> dict[str, list[int]]:
        return {c: sorted({int(s) for s in frame.loc[frame["arm"] == c, "seed"].dropna()}) for c in conditions}

    seeds_by_condition = seeds_of(trials[trials["status"] == "completed"])
    designed_seeds = seeds_of(trials)  # whatever their state: a failed trial does not unpair the design
    pool = _seed_list(pick("seeds"))
    sequential = _sequential_meta(pick("sequential"))
    primary = _section_fields(pick("primary_at"), PrimaryAt)
    compute_looks = _compute_looks_meta(pick("compute_looks"), primary, pick("train"), pick("min_effect"))
    # the A/A copy runs on seeds of its own by design: it does not unpair the others
    matched = {c: v for c, v in designed_seeds.items() if c not in {a for a, _, role in calibration if role == AA}}
    if sequential:  # arms stop at different looks; each takes the pool's seeds in order
        seed_matched = all(v == sorted(pool[: len(v)]) for v in matched.values())
    else:
        seed_matched = len({tuple(v) for v in matched.values()}) <= 1
    return StudyMeta(
        study=name,
        description=pick("description") or "",
        study_dir=str(ref.dir),
        primary_metric=pick("primary_metric"),
        direction=direction,
        min_effect=pick("min_effect"),
        test=pick("test", "auto"),
        failures=pick("failures", "drop"),
        metric_ranges=dict(METRIC_RANGES),
        control=control,
        conditions=conditions,
        comparisons=comparisons,
        calibration=calibration,
        seed_pools=pools,
        mirrors=mirrors,  # calibration condition -> the control condition whose seeds it follows
        seeds=pool,
        seed_matched=seed_matched,
        sequential=sequential,
        primary_at=primary,  # {point, axis, budget}
        compute_looks=compute_looks,
        scaling=_section_fields(pick("scaling"), Scaling),  # {fit, efficiency_margin}
        # a study with looks: its rule's, each condition's config as the study file sets it now (None unknown)
        configs=condition_configs(study) if (sequential or compute_looks) and study is not None else None,
        seeds_by_condition=seeds_by_condition,
        benchmarks=_benchmarks_meta(pick("benchmarks", []), pick("primary_metric")),
        status_counts={k: int(v) for k, v in trials["status"].value_counts().items()},
        harness_version=_provenance([r.harness_version for r in records]),
        git_commit=_provenance([r.git_commit for r in records]),
        **more,
    )


def load_results(
    study_or_dir: Any, *, phase: str | None = "compare", storage: str | None = None, strict_storage: bool = False
) -> Results:
    """The study's results: trials (records + Optuna states), curves and meta.

    ``phase="compare"`` (default) keeps the comparison trials, ``"tune"`` the tuning trials,
    ``None`` both (with a ``phase`` column). The trials of a compute-look study run in segments:
    ``compare`` reads each design trial as its furthest segment (``harness.tracking.segments``:
    ``paused`` where it has not reached the budget), ``None`` every segment as it is.
    ``storage`` is the Optuna storage URL of the study
    (default: ``<study_dir>/optuna.db``); the records other machines stored there complete the
    local ones (a later attempt wins), so a study run on many machines reads whole anywhere.
    Nothing is written: ``harness results --storage`` also copies them into the local folder.
    A storage that cannot be read is a warning, and the local records stand in; with
    ``strict_storage`` it raises ``StorageUnreadable`` (a sequential study's replay must see
    every trial or none).
    """
    ref = resolve_study(study_or_dir)
    name = study_name(ref)
    # The queue's states first, then the records: a worker writes a trial's record before its
    # state, so every trial read here as finished has its record in what is read next. The other
    # way round, a trial finishing in between reads as finished without a result (a failure),
    # and a sequential study's replay would take a look for complete too early.
    queued = optuna_trials(ref.dir, storage=storage, study=name, strict=strict_storage)
    shared = stored_records(ref.dir, storage=storage, study=name, strict=strict_storage)
    records = merge(read_records(ref.dir), shared, ref.dir)
    if phase == "compare":  # a compute-look study: one row per design trial, its furthest segment
        records, queued = fold_segments(records, queued)
    trials = trials_frame(records, queued, phase=phase)
    curves = curves_frame(records, phase=phase)
    earlier = earlier_trials(ref.study, records, queued, trials)
    if len(earlier):
        trials = trials[~trials["trial_id"].isin(earlier["trial_id"])].reset_index(drop=True)
        curves = curves[~curves["trial_id"].isin(earlier["trial_id"])].reset_index(drop=True)
    meta = _meta(ref, records, trials, earlier_design=summary_lines(earlier["reason"]))
    if meta.sequential or meta.compute_looks:  # the rule versions fixed at its looks (harness.decide.sequential)
        rules = read_rules(ref.dir, _storage_url(ref.dir, storage), name, strict=strict_storage)
        meta = dataclasses.replace(meta, sequential_rules=rules)
    earlier_ids = set(earlier["trial_id"])
    current = [r for r in records if r.trial_id not in earlier_ids]
    _warn_mixed_flops_counting(current)
    prompts = functools.partial(prompts_frame, current, ref.dir, phase=phase)
    return Results(trials=trials, curves=curves, meta=meta, earlier=earlier, prompt_source=prompts)


def _warn_mixed_flops_counting(records: list[TrialRecord]) -> None:
    """One warning line when the completed trials' ``compute/flops`` were counted two ways
    (``harness.engine.spec.FLOPS_COUNTING``): a curve, a fit or a verdict at a FLOPs budget would
    put them on one axis."""
    by_counting: dict[int, list[str]] = {}
    for record in records:
        if record.status == "completed" and "compute/flops" in record.final:
            by_counting.setdefault(record.flops_counting or 1, []).append(record.trial_id)
    if len(by_counting) < 2:
        return
    newest = max(by_counting)
    older = sorted(t for counting, ids in by_counting.items() if counting != newest for t in ids)
    warnings.warn(
        f"compute/flops of {len(older)} trial(s) was counted by an older harness (counting "
        f"{min(by_counting)}; now {newest}: the LM head only where logits are computed, a group's prompt "
        f"prefilled once), e.g. {older[0]}: curves, fits and verdicts on compute/flops mix the two; re-run "
        "those trials (delete their records) or read the study at steps",
        stacklevel=3,
    )


def earlier_trials(
    study: Study | None, records: list[TrialRecord], queued: dict[str, dict[str, Any]], trials: pd.DataFrame
) -> pd.DataFrame:
    """The comparison trials of ``trials`` that are not in ``study``'s current design, and why
    (none without a loadable study, or for a trial whose spec is unknown)."""
    rows = []
    if study is not None:
        specs = {tid: info.get("spec") for tid, info in queued.items()}
        specs.update({r.trial_id: r.spec for r in records})
        for row in trials.itertuples(index=False):
            if getattr(row, "phase", "compare") not in ("compare", None) or not specs.get(row.trial_id):
                continue
            reason = earlier_design_of(study, specs[row.trial_id], row.arm)
            if reason is not None:
                rows.append(
                    {"trial_id": row.trial_id, "arm": row.arm, "seed": row.seed, "status": row.status, "reason": reason}
                )
    return pd.DataFrame(rows, columns=EARLIER_COLUMNS)
