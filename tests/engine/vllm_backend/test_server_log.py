"""The server's log outlives the trial: a builtin trial whose vLLM server fails to start fails with
one line that names the server's log, and that file is there afterwards, in the trial's folder
(``$HARNESS_TRIAL_DIR``, as the runner's trial process sets it) or, for a trial run outside one,
in a kept temporary folder. The "vLLM environment" is a stand-in whose server exits at once."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

from harness.engine.samplers.backend import SERVER_LOG
from harness.engine.trial import run_trial as engine_trial
from harness.engine.vllm.errors import VllmStartError
from harness.trainers.dispatch import run_trial
from harness.trainers.trial_dir import TRIAL_DIR_ENV

SAYS = "stand-in vLLM: cannot load the model"


@pytest.fixture
def failing_python(tmp_path) -> str:
    """A "Python" with a ``vllm`` distribution whose server module says ``SAYS`` and exits with code 3."""
    site = tmp_path / "site"
    package = site / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for level in [package, *list(package.parents)[:3]]:
        (level / "__init__.py").touch()
    (package / "api_server.py").write_text(f"import sys\nprint({SAYS!r}, file=sys.stderr)\nsys.exit(3)\n")
    (site / "vllm-0.0.dist-info").mkdir()
    (site / "vllm-0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.0\n")
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def _named_log(message: str) -> Path:
    assert "\n" not in message
    found = re.search(r"; log: (\S+)\)", message)
    assert found, message
    return Path(found[1])


def test_a_failed_server_start_names_its_log_in_the_trials_folder(make_spec, failing_python, tmp_path, monkeypatch):
    folder = tmp_path / "trial-1.trial"
    monkeypatch.setenv(TRIAL_DIR_ENV, str(folder))
    spec = make_spec("grpo", rollout={"backend": "vllm", "vllm": {"python": failing_python}})
    with pytest.raises(VllmStartError, match="stopped before it was ready") as caught:
        run_trial(spec)
    log = _named_log(str(caught.value))
    assert log == folder.resolve() / SERVER_LOG and log.is_file()
    text = log.read_text()
    assert SAYS in text and "vLLM server exited with code 3" in text


def test_a_trial_outside_a_trial_process_keeps_its_servers_log(make_spec, failing_python):
    spec = make_spec("grpo", seed=1, rollout={"backend": "vllm", "vllm": {"python": failing_python}})
    with pytest.raises(VllmStartError) as caught:
        engine_trial(spec)
    log = _named_log(str(caught.value))
    try:
        assert log.name == SERVER_LOG and SAYS in log.read_text()
        assert log.parent.name.startswith(spec.trial_id)
    finally:
        shutil.rmtree(log.parent, ignore_errors=True)
