"""A trial process forked for a worker finds the worker's imports done.

multiprocessing runs the parent's main module again in every child it starts (as ``__mp_main__``).
A worker runs as a module by name (``harness.runner.worker_process``) or as a script by path (the
``harness`` command, for ``harness worker`` and the seed check), and its main module imports the
queue, Optuna and SQLAlchemy: each trial imported them all again, about a second on 2 cores,
before it began. The forkserver imports the main module once, so the children do not.

The probe: a main module importing ``probe_heavy``, which records each process that imports it.
It runs two fake trials through ``run_trial_process``; the import is recorded by the main process
and by its forkserver, never by a trial."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from runner_helpers import write_study

from harness.runner.launch import module_command
from harness.study.expand import condition_spec
from harness.study.load import load_study

PROBE_MAIN = """\
    import json
    import sys
    from pathlib import Path

    import probe_heavy  # noqa: F401  (the worker's heavy imports, recorded)
    from harness.runner.launch import run_trial_process

    if __name__ == "__main__":
        folder = Path(sys.argv[1])
        outcomes = [
            run_trial_process(
                (folder / "spec.json").read_text(),
                trial_fn="fake_trials:by_arm",
                work_dir=folder / "tmp",
                log_path=folder / f"trial{n}.log",
                stem=f"t{n}",
                timeout_s=120,
            )
            for n in range(2)
        ]
        print(json.dumps([o.reason for o in outcomes]))
    """

PROBE_HEAVY = """\
    import os

    with open(os.environ["PROBE_IMPORTS"], "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    """


@pytest.mark.parametrize("started", ["by module name", "by script path"])
def test_a_trial_process_does_not_import_the_workers_main_module_again(tmp_path, fake_env, monkeypatch, started):
    (tmp_path / "probe_main.py").write_text(textwrap.dedent(PROBE_MAIN))
    (tmp_path / "probe_heavy.py").write_text(textwrap.dedent(PROBE_HEAVY))
    spec = condition_spec(load_study(write_study(tmp_path, ["ok_a"])), "ok_a", 0)
    (tmp_path / "spec.json").write_text(spec.model_dump_json())
    imports = tmp_path / "imports.txt"
    monkeypatch.setenv("PROBE_IMPORTS", str(imports))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    monkeypatch.delenv("HARNESS_TRIAL_START", raising=False)  # the default: forked from the forkserver
    if started == "by module name":
        command = [*module_command("probe_main"), str(tmp_path)]
    else:
        command = [sys.executable, str(tmp_path / "probe_main.py"), str(tmp_path)]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout.splitlines()[-1]) == [None, None]  # both trials completed

    importers = imports.read_text().split()
    trials = (fake_env / f"{spec.trial_id}.done").read_text().split()
    assert len(trials) == 2 and not set(trials) & set(importers)  # no trial imported it again
    assert len(importers) == 2  # the main process, and its forkserver once
