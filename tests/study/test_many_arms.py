"""A study of thousands of arms is validated in time linear in its arms (issue 37, item 10: 10,000
arms ran past 120 s). Counted, not timed: the no-op check compares a number of pairs that grows
with the arms, not with their square, and finds the pairs that comparing all of them finds; a
condition's arm is looked up, not searched for."""

from __future__ import annotations

import textwrap

import pytest

from harness.algorithms.config import RLConfig
from harness.algorithms.probe_result import UNPROBED, ProbeResult, differing_fields
from harness.study import noop
from harness.study.load import load_study


def study_of(folder, arms: list[str]):
    path = folder / "many.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: many
        output_dir: {folder / "out"}
        control: a0
        seeds: 1
        arms:
        """)
        + "".join(f"  - {arm}\n" for arm in arms)
    )
    return load_study(path)


@pytest.fixture
def probe_by_eps_high(monkeypatch):
    """A probe whose loss is the config's eps_high (dual_clip and the name change nothing): two
    configs are the same computation exactly when their eps_high is. No torch runs."""

    def probe(cfg: RLConfig, max_new_tokens, cache_dir) -> ProbeResult:
        return ProbeResult(loss=float(cfg.eps_high), gradient=(1.0, -1.0))

    monkeypatch.setattr(noop, "probe_result", probe)


@pytest.fixture
def compared(monkeypatch):
    """The pairs of conditions the no-op check compares."""
    pairs: list[tuple[str, str]] = []
    real = noop._only_probed_differences

    def counting(a, b):
        pairs.append((a.arm, b.arm))
        return real(a, b)

    monkeypatch.setattr(noop, "_only_probed_differences", counting)
    return pairs


def every_pair(study) -> list[str]:
    """The no-op pairs by comparing every pair of conditions (the rule itself, quadratic)."""
    specs = noop._condition_specs(study)
    names, lines = list(specs), []
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            a, b = specs[first], specs[second]
            if not (isinstance(a.algorithm, RLConfig) and isinstance(b.algorithm, RLConfig)) or a.train != b.train:
                continue
            fields = differing_fields(a.algorithm, b.algorithm)
            if not fields or set(fields) & (UNPROBED - {"name"}):
                continue
            if fields != ["name"] and a.algorithm.eps_high != b.algorithm.eps_high:  # the probe above
                continue
            lines.append(f"{first} and {second} differ only in")
    return lines


@pytest.mark.parametrize("size", [100, 400])
def test_arms_apart_in_what_the_probe_cannot_see_are_never_compared(tmp_path, compared, size):
    arms = [f"{{name: a{i}, algorithm: grpo, set: {{lr: {1e-4 * (1 + i / size):.12g}}}}}" for i in range(size)]
    assert noop.noop_pairs(study_of(tmp_path, arms)) == []
    assert compared == []  # all pairs: size * (size - 1) / 2


@pytest.mark.parametrize("size", [100, 400])
def test_arms_that_differ_where_the_probe_sees_are_compared_a_linear_number_of_times(
    tmp_path, compared, probe_by_eps_high, size
):
    arms = [f"{{name: a{i}, algorithm: grpo, set: {{eps_high: {0.1 + i / size:.12g}}}}}" for i in range(size)]
    assert noop.noop_pairs(study_of(tmp_path, arms)) == []
    assert len(compared) <= size  # all pairs: 4,950 and 79,800


def test_the_pairs_found_are_those_every_pair_gives(tmp_path, compared, probe_by_eps_high):
    arms = [
        "{name: a0, algorithm: grpo}",
        "{name: a1, algorithm: grpo, set: {dual_clip: 1000.0}}",  # a no-op beside a0 (same eps_high)
        "{name: a2, algorithm: grpo, set: {eps_high: 0.28}}",
        "{name: a3, algorithm: grpo, set: {eps_high: 0.28, dual_clip: 3.0}}",  # a no-op beside a2
        "{name: a4, algorithm: grpo, set: {lr: 3.0e-4, dual_clip: 1000.0}}",  # unseen lr: apart from all
        "{name: a5, algorithm: grpo, set: {lr: 3.0e-4, dual_clip: 5.0}}",  # a no-op beside a4
        "{name: a6, algorithm: grpo, train: {max_new_tokens: 6}}",  # other train settings: apart
        "{name: a7, algorithm: dr_grpo}",
        "{name: a8, algorithm: grpo, set: {advantage: group_mean, aggregation: seq_mean_token_sum_norm}}",
        "{name: a9, algorithm: grpo, set: {dual_clip: 2000.0}}",  # a no-op beside a0 and a1
        "{name: a10, algorithm: dpo}",
    ]
    study = study_of(tmp_path, arms)
    found = noop.noop_pairs(study)
    assert [line.split(" differ only in")[0] + " differ only in" for line in found] == every_pair(study)
    assert [line.split(" differ only in")[0] for line in found] == [
        "a0 and a1",
        "a0 and a7",  # dr_grpo vs grpo with other parts: probed, same eps_high, so the same here
        "a0 and a8",
        "a0 and a9",
        "a1 and a7",
        "a1 and a8",
        "a1 and a9",
        "a2 and a3",
        "a4 and a5",
        "a7 and a8",
        "a7 and a9",
        "a8 and a9",
    ]
    assert len(compared) < 11 * 10 // 2


class CountingList(list):
    """A list that counts the times it is walked."""

    walks = 0

    def __iter__(self):
        CountingList.walks += 1
        return super().__iter__()


def test_a_condition_s_arm_is_looked_up_not_searched_for(tmp_path):
    arms = [f"{{name: a{i}, algorithm: grpo, set: {{lr: {1e-4 * (1 + i):g}}}}}" for i in range(300)]
    study = study_of(tmp_path, arms)
    study.arms = CountingList(study.arms)
    CountingList.walks = 0
    assert [study.arm(f"a{i}").name for i in range(300)] == [f"a{i}" for i in range(300)]
    assert CountingList.walks <= 1  # a search per lookup: 300


def test_the_lookup_follows_arms_replaced_or_renamed(tmp_path):
    study = study_of(tmp_path, ["{name: a0, algorithm: grpo}", "{name: a1, algorithm: rloo}"])
    assert study.arm("a1").algorithm == "rloo"
    other = study.model_copy(update={"arms": [study.arms[0].model_copy(update={"algorithm": "cispo"})]})
    assert other.arm("a0").algorithm == "cispo" and study.arm("a0").algorithm == "grpo"
    with pytest.raises(KeyError):
        other.arm("a1")
    study.arms[1].name = "b1"
    assert study.arm("b1").algorithm == "rloo"
    with pytest.raises(KeyError):
        study.arm("a1")
    assert study == study_of(tmp_path, ["{name: a0, algorithm: grpo}", "{name: b1, algorithm: rloo}"])
