"""Bad input and safety: study files are data (safe YAML, nothing evaluated), rewards are
imported by name, study names cannot escape their folder, and credentials in storage and
tracking URLs are never printed or logged in full."""

from __future__ import annotations

import ast
import socket
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from faults_helpers import FAKE, FAST, Machine, write_study

from harness.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def _cli(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    from harness.cli import main

    monkeypatch.setattr(sys, "argv", ["harness", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    return exit_.value.code, capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# study files are data


@pytest.mark.parametrize(
    "tag",
    [
        '!!python/object/apply:os.system ["touch {mark}"]',
        "!!python/object/new:subprocess.Popen [[touch, {mark}]]",
        "!!python/name:os.system",
    ],
)
def test_python_yaml_tags_are_rejected_and_never_run(tmp_path, fault_env, monkeypatch, capsys, tag):
    mark = tmp_path / "MARK"
    path = tmp_path / "evil.yaml"
    path.write_text(f"name: {tag.format(mark=mark)}\nseeds: 1\ncontrol: a\narms: [{{name: a, algorithm: grpo}}]\n")
    for command in ("validate", "run"):
        code, err = _cli(monkeypatch, capsys, command, str(path), *(["--trial-fn", FAKE] if command == "run" else []))
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "could not determine a constructor for the tag" in err and "python/" in err
    assert not mark.exists()
    assert not (tmp_path / "runs").exists()


def test_no_eval_or_exec_in_the_harness():
    """Nothing from a config or a model's output can reach eval/exec: the package never calls them."""
    offenders = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"eval", "exec"}:
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"eval", "exec"}
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in {"builtins", "__builtins__"}
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


# --------------------------------------------------------------------------------------------
# rewards are imported, never evaluated


def test_reward_module_function_is_imported(tmp_path, monkeypatch):
    from harness.engine.tasks.base import Item
    from harness.engine.tasks.rewards import resolve_reward

    (tmp_path / "my_rewards.py").write_text(
        "from pathlib import Path\n"
        f"Path({str(tmp_path / 'IMPORTED')!r}).touch()\n"
        "def half(item, completion):\n    return 0.5\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_rewards", raising=False)
    fn = resolve_reward("my_rewards:half")
    assert (tmp_path / "IMPORTED").exists()  # imported (module code ran) ...
    assert fn is sys.modules["my_rewards"].half  # ... and the named function is used as is
    assert fn(Item(prompt="1+1=", answer="2"), "2") == 0.5


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('touch {mark}')",  # no colon: an unknown registered name
        "os:system('touch {mark}')",  # a module, then an attribute that is not a name
        "__import__('os').system('touch {mark}'):half",  # a "module" that is code
        "os:path.join",  # a dotted attribute is not a function name either
    ],
)
def test_reward_strings_are_never_evaluated(tmp_path, fault_env, monkeypatch, capsys, text):
    from harness.engine.tasks.rewards import resolve_reward

    mark = tmp_path / "MARK"
    reward = text.format(mark=mark)
    with pytest.raises(ConfigError) as err:
        resolve_reward(reward)
    message = str(err.value)
    assert "task.reward" in message or "unknown reward" in message
    assert not mark.exists()
    study = write_study(tmp_path, "rewarded", ["a"])
    data = yaml.safe_load(study.read_text())
    data["task"] = {"reward": reward}
    study.write_text(yaml.safe_dump(data))
    code, out = _cli(monkeypatch, capsys, "validate", str(study))
    assert code == 2 and "reward" in out and len(out.strip().splitlines()) == 1
    assert not mark.exists()


# --------------------------------------------------------------------------------------------
# study names never escape their folder


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", "a\\b", "/abs", "x..y"])
def test_study_names_with_separators_or_dotdot_are_rejected_before_any_folder(
    tmp_path, fault_env, monkeypatch, capsys, name
):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    path = tmp_path / "study.yaml"
    path.write_text(
        yaml.safe_dump({"name": name, "seeds": 1, "control": "a", "arms": [{"name": "a", "algorithm": "grpo"}]})
    )
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for command in (["run", str(path), "--trial-fn", FAKE], ["worker", str(path)], ["status", str(path)]):
        code, err = _cli(monkeypatch, capsys, *command)
        assert code == 2, (command, err)
        assert "study name" in err and ("path separator" in err or "'..'" in err), err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing created


# --------------------------------------------------------------------------------------------
# credentials


ML_USER, ML_PASSWORD = "mluser", "ml-secret-77aa"
WRONG_PASSWORD = "wrong-secret-0000"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_credentials_in_urls_stay_out_of_every_output(
    tmp_path, fault_env, pg_url, postgres, mlflow_server, monkeypatch
):
    """Storage and tracking URLs with passwords: no command output, log file, record, worker
    file, trial environment, MLflow param/tag or stored attribute holds a password."""
    monkeypatch.setenv("FAKE_TRIALS_DUMP_ENV", "1")
    assert postgres.password in pg_url
    ml_url = mlflow_server.url.replace("http://", f"http://{ML_USER}:{ML_PASSWORD}@")
    dead_ml = f"http://{ML_USER}:{ML_PASSWORD}@127.0.0.1:{_closed_port()}"
    pg_url_driver = pg_url.replace("postgresql://", "postgresql+psycopg://")  # the README's form
    a = Machine(tmp_path, "machine_a")
    study = write_study(a.dir, "creds", ["ok", "raise"])
    commands = {
        "run": ["run", study.name, *FAST],  # the URLs come from HARNESS_STORAGE / HARNESS_TRACKING_URI
        "status": ["status", "runs/creds", "--storage", pg_url],
        "sync": ["mirror-to-mlflow", "runs/creds", "--storage", pg_url, "--tracking-uri", ml_url],
        "sync_dead": ["mirror-to-mlflow", "runs/creds", "--tracking-uri", dead_ml],
        "wrong_password": ["run", study.name, "--storage", postgres.url("postgres", WRONG_PASSWORD), *FAST],
    }
    codes = {}
    for label, args in commands.items():
        env = {"HARNESS_STORAGE": pg_url_driver, "HARNESS_TRACKING_URI": ml_url} if label == "run" else {}
        codes[label] = a.run(*args, label=label, env=env)[0]
    texts = {label: "".join(a.output(label)) for label in commands}
    assert codes == {"run": 1, "status": 0, "sync": 0, "sync_dead": 1, "wrong_password": 2}, texts
    # the commands did talk about their URLs, masked
    assert f"postgresql+psycopg://harness:***@127.0.0.1:{postgres.port}/" in texts["run"]
    assert f"postgresql://harness:***@127.0.0.1:{postgres.port}/" in texts["status"]
    assert f"http://{ML_USER}:***@127.0.0.1:" in texts["sync_dead"]
    assert "password authentication failed" in texts["wrong_password"]
    assert "RuntimeError: boom" in texts["run"]

    # what MLflow holds: every run's params and tags (the trials were mirrored through ml_url)
    from mlflow import MlflowClient

    client = MlflowClient(mlflow_server.url)
    experiment = client.get_experiment_by_name("creds")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 3  # the study's parent run and its two trials
    mlflow_text = [repr(r.data.params) + repr(r.data.tags) + repr(r.info) for r in runs]
    mlflow_text.append(repr(experiment.tags) + experiment.artifact_location)

    # what the storage holds: Optuna's attributes and the shared records
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        stored = [
            str(v)
            for table, column in (
                ("trial_user_attributes", "value_json"),
                ("trial_system_attributes", "value_json"),
                ("study_user_attributes", "value_json"),
                ("study_system_attributes", "value_json"),
                ("harness_records", "record"),
            )
            for v in conn.execute(sa.text(f"SELECT {column} FROM {table}")).scalars()
        ]
    engine.dispose()
    assert any("raise-s0" in v for v in stored)

    # every file the machine wrote (records, logs, worker configs, study snapshot, outputs) and
    # the trial processes' environments (calls/*.env)
    files = {str(p): p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file()}
    assert any(p.endswith(".env") for p in files) and any("/logs/" in p for p in files)
    everything = {
        **{f"output of {k}": v for k, v in texts.items()},
        **files,
        **{f"mlflow run {i}": t for i, t in enumerate(mlflow_text)},
        **{f"storage value {i}": v for i, v in enumerate(stored)},
    }
    for where, text in everything.items():
        for secret in (postgres.password, ML_PASSWORD, WRONG_PASSWORD):
            assert secret not in text, f"{secret!r} in {where}"
        assert "secret" not in text.lower(), f"'secret' in {where}"
