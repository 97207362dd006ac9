"""A testbed study with ``eval_subset``: its trials train, score the subset at the intermediate
evaluation and every prompt at the start and the end, and ``harness report`` reads it; the
comparison read at the subset's evaluation says its interval carries the subset's variance."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from cli_main import run_main

from harness.study.expand import expand, study_dir
from harness.study.load import load_study
from harness.tracking import records
from harness.tracking.results import load_results

STUDY = """\
    name: subset
    control: grpo
    seeds: 2
    min_effect: 0.05
    primary_metric: eval/mean_reward
    task: {name: addition, max_digits: 2, n_train: 300, n_eval: 24, reward: partial_match}
    model: {name: tiny, tiny: {hidden_size: 32, layers: 1, heads: 2, intermediate_size: 64}}
    warmstart: {steps: 20, batch_size: 16, lr: 3.0e-3}
    train: {steps: 4, prompts_per_step: 4, max_new_tokens: 4, eval_every: 2, eval_samples: 2}
    eval_subset: {size: 0.5, strata: 2, seed: 3}
    arms:
      - {name: grpo, algorithm: grpo}
      - {name: rloo, algorithm: rloo}
    """


@pytest.mark.slow
def test_a_study_with_an_eval_subset_trains_scores_the_subset_between_and_reports(monkeypatch, capsys):
    import torch

    from harness.engine.trial import run_trial

    torch.set_num_threads(1)
    path = Path("studies") / "subset.yaml"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(STUDY))
    study = load_study(path)
    for spec in expand(study):
        spec = spec.model_copy(update={"cache_dir": str(Path("cache").resolve())})
        records.write_record(study_dir(study), records.make_record(spec, run_trial(spec)))

    prompts = load_results(path).prompts
    scored = prompts[prompts["metric"] == "eval/mean_reward"].groupby(["trial_id", "step"])["prompt_id"].agg(frozenset)
    assert set(scored.index.get_level_values("step")) == {0, 2, 4}
    for step, count in ((0, 24), (2, 12), (4, 24)):
        sets = set(scored.xs(step, level="step"))
        assert len(sets) == 1 and len(next(iter(sets))) == count  # one subset for every arm and seed
    assert set(prompts["metric"]) >= {"eval/stratum", "eval/stratum.size"}

    code, _, err = run_main(monkeypatch, capsys, "report", str(path), "--out", "final")
    assert code == 0, err
    assert "eval subset" not in Path("final/summary.md").read_text()  # the final evaluation: every prompt

    path.write_text(textwrap.dedent(STUDY) + "primary_at: {point: budget, axis: step, budget: 2}\n")
    code, _, err = run_main(monkeypatch, capsys, "report", str(path), "--out", "mid")
    assert code == 0, err
    summary = Path("mid/summary.md").read_text()
    assert "Read on the eval subset (12 of the 24 held-out prompts in 2 strata)" in summary
