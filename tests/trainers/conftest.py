"""Tiny program-trial specs and the trial programs the tests write (real subprocesses)."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from harness.algorithms import resolve_algorithm
from harness.engine.spec import TrialSpec

TINY = {
    "task": {"name": "addition", "max_digits": 1, "n_train": 40, "n_eval": 8},
    "model": {"name": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}},
    "warmstart": {"steps": 10, "batch_size": 16, "lr": 3e-3},
    "train": {"steps": 2, "prompts_per_step": 2, "max_new_tokens": 3, "eval_every": 0, "eval_samples": 2},
}


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("trainers-cache"))


@pytest.fixture
def program_spec(cache_dir):
    """A spec whose trainer runs ``command`` (a list; ``None``: the builtin loop)."""

    def make(command: list[str] | None, *, trainer: dict | None = None, **sections) -> TrialSpec:
        fields = {key: {**value, **sections.pop(key, {})} for key, value in TINY.items()}
        kind = {"kind": "command", "command": command} if command is not None else {}
        return TrialSpec(
            arm="prog" if command is not None else "builtin",
            algorithm=resolve_algorithm("grpo", {"group_size": 2}),
            cache_dir=cache_dir,
            trainer={**kind, **(trainer or {})},
            **fields,
            **sections,
        )

    return make


@pytest.fixture
def script(tmp_path):
    """A trial program written into tmp from ``body`` (Python, run with this interpreter): the
    command list that runs it with the trial file."""

    def write(body: str, name: str = "program.py") -> list[str]:
        path = tmp_path / name
        path.write_text(textwrap.dedent(body), encoding="utf-8")
        return [sys.executable, str(path), "{trial_file}"]

    return write
