"""Absurd reasoning-gym sizes are refused in one line, fast, without the caller's process ever
holding the problems (issue 37, item 4): at most ``MAX_PROMPTS`` prompts, checked by arithmetic,
and the dataset's settings within a memory and CPU budget measured on its first problems in a
forked child (:mod:`harness.engine.tasks.gym_budget`)."""

from __future__ import annotations

import resource
import time

import pytest
from cli_main import run_main

from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task, gym_budget
from harness.engine.tasks import reasoning_gym as gym_task
from harness.engine.tasks.synthetic import MAX_PROMPTS
from harness.errors import ConfigError

pytest.importorskip("reasoning_gym", reason="the reasoning_gym task needs: pip install reasoning-gym")

ABSURD = {"min_terms": 2, "max_terms": 100_000_000, "min_digits": 1, "max_digits": 1_000_000}


def _config(settings: dict, n_train: int = 50, n_eval: int = 8, **gym) -> TaskConfig:
    return TaskConfig(reasoning_gym={"dataset": "chain_sum", "config": settings, **gym}, n_train=n_train, n_eval=n_eval)


@pytest.fixture
def small_sample(monkeypatch):
    """A sample of 64 MiB: an absurd problem outgrows it in a fraction of a second (1 GiB takes seconds)."""
    monkeypatch.setattr(gym_budget, "SAMPLE_MEMORY_BYTES", 64 << 20)


def test_settings_whose_one_problem_does_not_fit_are_refused_without_the_caller_holding_it(small_sample):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConfigError) as refused:
        build_task(_config(ABSURD))
    message = str(refused.value)
    assert message.startswith("task.reasoning_gym (chain_sum): one problem of these settings ")
    assert "needs more than 64 MiB of memory" in message or "was not made within" in message
    assert "\n" not in message and "lower the sizes in task.reasoning_gym.config" in message
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 * 1024, "the sample is made in a child: this process never held it"


def test_more_prompts_than_a_task_gives_are_refused_before_any_is_made(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("nothing is made for a count refused by arithmetic")

    monkeypatch.setattr(gym_task, "_dataset", never)
    with pytest.raises(ConfigError, match=r"^task\.reasoning_gym: asked for 100,000,000 train \+ 8 eval prompts; "):
        build_task(_config({}, n_train=100_000_000, eval_seed=10**9))
    with pytest.raises(ConfigError, match=f"at most {MAX_PROMPTS:,} in all: lower task.n_train/n_eval"):
        build_task(_config({}, n_train=MAX_PROMPTS, n_eval=1, eval_seed=10**9))


class _Problems:
    """A dataset of problems with ``text`` characters each, each taking ``cpu_s`` of CPU to make."""

    def __init__(self, text: int, cpu_s: float = 0.0):
        self.text, self.cpu_s, self.made = text, cpu_s, 0

    def __getitem__(self, index: int) -> dict:
        start = time.process_time()
        while time.process_time() - start < self.cpu_s:
            pass
        self.made += 1
        return {"question": "x" * self.text, "answer": "1"}


def test_the_text_of_all_the_prompts_is_estimated_from_the_sample_and_held_to_the_budget():
    problems = _Problems(text=999)  # 1,000 bytes a problem with its answer
    gym_budget.check_budget(problems, gym_budget.TEXT_BUDGET_BYTES // 1000, "here")
    with pytest.raises(ConfigError, match=r"^here: 2,000,000 prompts of these settings would hold about 1,907 MiB"):
        gym_budget.check_budget(problems, 2_000_000, "here")
    assert problems.made == 0, "the sample is made in the child, not here"


def test_the_cpu_time_of_all_the_prompts_is_estimated_from_the_sample_and_held_to_the_budget():
    problems = _Problems(text=10, cpu_s=0.005)  # CPU time, not wall time: a busy machine changes nothing
    gym_budget.check_budget(problems, 1_000, "here")  # about 5 s
    with pytest.raises(ConfigError, match=r"^here: 200,000 prompts of these settings would take about 1,[0-9]{3} s"):
        gym_budget.check_budget(problems, 200_000, "here")  # about 1,000 s


def test_a_problem_that_never_finishes_is_refused_at_the_deadline(monkeypatch):
    class Stuck:
        def __getitem__(self, index):
            while True:
                time.sleep(60)

    monkeypatch.setattr(gym_budget, "SAMPLE_DEADLINE_S", 0.5)
    with pytest.raises(ConfigError, match=r"^here: one problem of these settings was not made within 0.5 s"):
        gym_budget.check_budget(Stuck(), 10, "here")


def test_a_dataset_error_in_the_sample_is_left_to_the_caller_to_report():
    class Broken:
        def __getitem__(self, index):
            raise ValueError("the dataset's own complaint")

    gym_budget.check_budget(Broken(), 10, "here")  # no verdict: making the problems raises it as before


def test_validate_refuses_absurd_settings_in_one_line(tmp_path, monkeypatch, capsys, small_sample):
    study = tmp_path / "gym.yaml"
    study.write_text(
        "name: gym\nseeds: 1\n"
        "task:\n  reasoning_gym: {dataset: chain_sum, config: {max_terms: 100000000, max_digits: 1000000}}\n"
        "  n_train: 50\n  n_eval: 8\n"
        "model:\n  name: HuggingFaceTB/SmolLM2-135M-Instruct\n"
        "arms:\n  - {name: grpo, algorithm: grpo}\n"
    )
    code, out, err = run_main(monkeypatch, capsys, "validate", str(study))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "task: task.reasoning_gym (chain_sum): one problem of these settings" in err and "Traceback" not in err
