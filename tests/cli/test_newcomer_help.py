"""Every command's --help: flags look like flags, no raw reStructuredText, and every --set example
it gives passes the validation a real ``harness trial`` applies (a value that is no YAML is one
line, not a traceback)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from cli_main import run_main
from typer.core import TyperOption
from typer.testing import CliRunner

from harness.cli import app
from harness.cli.trial import SECTIONS, build_spec
from harness.engine.spec import TrialSpec

GROUP = typer.main.get_command(app)
COMMANDS = sorted(GROUP.commands)


def help_text(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_help_shows_flags_as_flags_and_no_raw_markup(name):
    text = help_text(*([name] if name else []))
    assert "<bool>" not in text, "a flag takes no value"
    assert "``" not in text, "reStructuredText markup is not rendered in a terminal"


def options():
    """(command name, option) of every option of every command."""
    return [
        (name, param)
        for name, command in GROUP.commands.items()
        for param in command.params
        if isinstance(param, TyperOption)
    ]


def test_every_bool_option_is_a_flag():
    bools = [(name, param) for name, param in options() if param.type_descriptor.annotation is bool]
    assert len(bools) >= 5
    for name, param in bools:
        assert param.is_flag, f"harness {name} {param.opts[0]} takes a value"


KEY_START = r"(?<![\w/.=-])"  # a key starts a word: not data/train.jsonl, nor a value's tail


def set_options() -> list[tuple[str, str]]:
    """(command, help) of every --set option."""
    return [(name, param.help or "") for name, param in options() if "--set" in param.opts]


def test_every_set_example_in_the_help_is_accepted():
    options = set_options()
    assert options, "harness trial has --set"
    for name, text in options:
        examples = re.findall(rf"{KEY_START}([a-z_]+(?:\.[a-z_]+)*)=([^\s,()]+)", text)
        assert examples, text
        for key, value in examples:
            build_spec("grpo", None, None, 0, [f"{key}={value}"])  # raises ConfigError when rejected
        for section, key in re.findall(rf"{KEY_START}({'|'.join(SECTIONS)})\.([a-z_]+)", text):
            fields = TrialSpec.model_fields[section].annotation.model_fields
            assert key in fields, f"harness {name} --help names {section}.{key}, which is not a {section} key"


def test_ui_help_says_what_it_runs_in_plain_words():
    text = " ".join(help_text("ui").split())
    assert "runs mlflow ui with MLFLOW_BACKEND_STORE_URI=STORE in its environment" in text
    assert "Usage: harness ui [OPTIONS] {STUDY}" in text


def test_a_set_value_that_is_not_yaml_is_one_line(monkeypatch, capsys):
    code, _, err = run_main(monkeypatch, capsys, "trial", "-a", "grpo", "--set", "task.path=...")
    assert code == 2 and "Traceback" not in err
    assert err.strip() == "error: --set 'task.path=...': the value is not valid YAML; quote it, e.g. task.path='...'"


README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_flag_the_readme_cites_is_in_the_help():
    """A flag README tells a user to set is one `--help` shows (issue 37, item 12)."""
    cited = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", README.read_text()))
    hidden = {(name, flag) for name, param in options() if param.hidden for flag in param.opts}
    assert "--grace-period" in cited
    assert not {(name, flag) for name, flag in hidden if flag in cited}


def test_run_help_shows_the_heartbeat_interval_and_the_grace_period():
    text = help_text("run")
    assert "--grace-period" in text
    assert "--heartbeat-interval" in text
