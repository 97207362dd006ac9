"""Over-optimisation in the report: with proxy and gold rewards in the curves, every arm's seed-mean
gold is drawn against its proxy and its KL in step order, and the last step is tabled; a study
without them gets the report it always got."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from report_fakes import CONDITIONS, make_results

from harness.decide.analysis import analyze
from harness.decide.overoptimisation import (
    GOLD,
    KL,
    PROXY,
    last_step_table,
    overoptimisation_frame,
)
from harness.decide.rules import ReadOptions
from harness.report import write_report
from harness.report.figures import all_figures

STEPS = range(1, 9)


def proxy(cond, seed, step):
    return 0.1 * step + 0.01 * seed + (0.05 * step if cond == "big" else 0.0)


def gold(cond, seed, step):  # rises, then falls as the proxy keeps climbing
    return 0.4 + 0.06 * step - 0.006 * step**2 + 0.01 * seed


def kl(cond, seed, step):
    return 0.02 * step + 0.001 * seed


def with_rewards(results, *, kl_logged: bool = True):
    rows = []
    for t in results.trials.itertuples():
        if t.status == "waiting":
            continue
        for step in STEPS:
            rows += [
                (t.trial_id, t.arm, t.seed, step, PROXY, proxy(t.arm, t.seed, step)),
                (t.trial_id, t.arm, t.seed, step, GOLD, gold(t.arm, t.seed, step)),
            ]
            if kl_logged:
                rows.append((t.trial_id, t.arm, t.seed, step, KL, kl(t.arm, t.seed, step)))
    results.curves = pd.concat([results.curves, pd.DataFrame(rows, columns=results.curves.columns)], ignore_index=True)
    return results


def test_the_frame_holds_each_arms_seed_means_in_step_order():
    results = with_rewards(make_results())  # null-s4 failed: it is left out
    frame = overoptimisation_frame(results)
    assert list(frame["condition"].unique()) == CONDITIONS
    for cond in CONDITIONS:
        seeds = [0, 1, 2, 3] if cond == "null" else [0, 1, 2, 3, 4]
        g = frame[frame["condition"] == cond]
        assert list(g["step"]) == list(STEPS)
        for metric, fn in (("proxy", proxy), ("gold", gold), ("kl", kl)):
            expected = [np.mean([fn(cond, s, step) for s in seeds]) for step in STEPS]
            assert g[metric].to_numpy() == pytest.approx(expected)
        assert set(g["n_seeds"]) == {len(seeds)}
    last = last_step_table(frame).set_index("condition")
    assert last.loc["big", "step"] == 8 and last.loc["big", "gold"] == pytest.approx(
        np.mean([gold("big", s, 8) for s in range(5)])
    )


def test_the_figure_draws_gold_against_proxy_and_against_kl_for_every_arm():
    analysis = analyze(with_rewards(make_results()), ReadOptions(n_permutations=200))
    figures = {div: fig for div, _, fig in all_figures(analysis)}
    fig = figures["fig-overopt"]
    frame = analysis.overoptimisation
    for cond in CONDITIONS:
        lines = [t for t in fig.data if t.name == cond]
        assert len(lines) == 2  # one per panel, legend once
        on_proxy, on_kl = sorted(lines, key=lambda t: t.xaxis)
        g = frame[frame["condition"] == cond]
        assert list(on_proxy.x) == pytest.approx(list(g["proxy"])) and list(on_proxy.y) == pytest.approx(
            list(g["gold"])
        )
        assert list(on_kl.x) == pytest.approx(list(g["kl"]))
        assert [row[0] for row in on_proxy.customdata] == list(STEPS)  # in step order
        assert on_proxy.showlegend and not on_kl.showlegend


def test_without_kl_only_the_proxy_panel_is_drawn():
    analysis = analyze(with_rewards(make_results(), kl_logged=False), ReadOptions(n_permutations=200))
    fig = {div: fig for div, _, fig in all_figures(analysis)}["fig-overopt"]
    assert {t.xaxis for t in fig.data} == {"x"} and len(fig.data) == len(CONDITIONS)
    assert analysis.overoptimisation["kl"].isna().all()


def test_html_and_markdown_show_it(tmp_path):
    out = tmp_path / "report"
    write_report(with_rewards(make_results()), out, ReadOptions(n_permutations=200))
    page = (out / "index.html").read_text()
    assert 'id="fig-overopt"' in page and 'id="overoptimisation"' in page
    summary = (out / "summary.md").read_text()
    assert "## Over-optimisation: proxy, gold and KL at the last step" in summary
    assert "draws each arm's gold (verifier) reward against its proxy" in summary
    table = summary.split("## Over-optimisation")[1].split("\n## ")[0]
    assert "| condition | step | proxy | gold | KL | seeds |" in table and "| null | 8 |" in table


def test_a_report_without_proxy_and_gold_is_unchanged(tmp_path):
    results = make_results()
    analysis = analyze(results, ReadOptions(n_permutations=200))
    assert analysis.overoptimisation.empty
    assert "fig-overopt" not in {div for div, _, _ in all_figures(analysis)}
    out = tmp_path / "report"
    write_report(results, out, ReadOptions(n_permutations=200))
    assert "overopt" not in (out / "index.html").read_text()
    assert "Over-optimisation" not in (out / "summary.md").read_text()
    only_gold = make_results()
    only_gold.curves = pd.concat(
        [only_gold.curves, pd.DataFrame([("grpo-s0", "grpo", 0, 1, GOLD, 0.5)], columns=only_gold.curves.columns)],
        ignore_index=True,
    )
    assert overoptimisation_frame(only_gold).empty  # gold alone is not a learned reward
