"""Include-only fragments: the shipped ones live in ``studies/common/`` and say ``fragment: true``;
``harness validate`` checks a fragment's own keys and values and passes it, and a command that
needs a study says that a fragment is not one."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from cli_main import run_main

from harness.engine.vllm.environment import URL_ENV
from harness.study.load import is_fragment, load_study, read_study_data

REPO = Path(__file__).resolve().parents[2]
STUDIES = REPO / "studies"


def write_task_files(studies: list[Path]) -> None:
    """The JSONL files a study's task reads (relative to the working folder), a few problems each:
    what a user puts there before validating a real-model study."""
    line = json.dumps({"question": "What is 2 + 3?", "answer": "2 + 3 = 5 #### 5"})
    for path in studies:
        task = read_study_data(path).get("task", {})
        for key in ("path", "eval_path"):
            if key in task:
                Path(task[key]).parent.mkdir(parents=True, exist_ok=True)
                Path(task[key]).write_text((line + "\n") * 10)


@pytest.mark.slow
def test_validate_passes_every_shipped_study_and_fragment(monkeypatch, capsys):
    studies, fragments = sorted(STUDIES.glob("*.yaml")), sorted((STUDIES / "common").glob("*.yaml"))
    assert fragments, "the shared testbed is a fragment in studies/common/"
    write_task_files(studies)
    # a study with rollout.backend vllm has its vLLM environment checked at validate unless it
    # names a server; one named here (never contacted by validate) checks the rest of such a study
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:9")
    code, out, err = run_main(monkeypatch, capsys, "validate", *map(str, studies + fragments))
    assert code == 0, err
    assert out.count("ok: ") == len(studies) + len(fragments)
    for path in fragments:
        assert f"ok: {path} (an include-only fragment; checked " in out


def test_fragments_are_in_common_and_studies_are_not_fragments():
    for path in STUDIES.glob("*.yaml"):
        assert not is_fragment(read_study_data(path)), path
    for path in (STUDIES / "common").glob("*.yaml"):
        assert is_fragment(read_study_data(path)), path


def write(path: str, text: str) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(textwrap.dedent(text))
    return out


def one_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    "body, message",
    [
        ("trian: {steps: 5}\n", "trian: unknown key; valid: name, "),
        ("train: {steps: 0}\n", "train.steps: Input should be greater than 0"),
        ("train: {stepz: 5}\n", "train.stepz: unknown key; valid: steps, "),
        ("primary_metric: eval/acc\n", "primary_metric: unknown metric 'eval/acc'"),
        ("seeds: 0\n", "seeds: the number of seeds must be at least 1"),
    ],
)
def test_validate_checks_a_fragments_keys_and_values(monkeypatch, capsys, body, message):
    path = write("common/bad.yaml", "fragment: true\n" + body)
    code, out, err = run_main(monkeypatch, capsys, "validate", str(path))
    assert code == 2 and "ok:" not in out
    assert one_error(err).startswith(f"error: {message}")


def test_a_fragment_needs_none_of_a_studys_required_fields(monkeypatch, capsys):
    path = write("common/budget.yaml", "fragment: true\ntrain: {steps: 5}\ncontrol: grpo\n")
    code, out, err = run_main(monkeypatch, capsys, "validate", str(path))
    assert code == 0, err
    assert out.strip() == (
        f"ok: {path} (an include-only fragment; checked control, train; the studies that include it are checked whole)"
    )


@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_command_that_needs_a_study_says_a_fragment_is_not_one(monkeypatch, capsys, command):
    path = write("common/budget.yaml", "fragment: true\ntrain: {steps: 5}\n")
    code, _, err = run_main(monkeypatch, capsys, command, str(path))
    assert code == 2
    assert "an include-only fragment (fragment: true), not a study; include it from a study file" in one_error(err)


def test_a_study_including_a_fragment_is_no_fragment():
    write("studies/common/budget.yaml", "fragment: true\ntrain: {steps: 5}\n")
    study = write(
        "studies/s.yaml",
        """\
        name: s
        include: common/budget.yaml
        seeds: 3
        arms: [{name: grpo, algorithm: grpo}]
        """,
    )
    assert not is_fragment(read_study_data(study))
    assert load_study(study).train.steps == 5


@pytest.mark.parametrize("where", ["top", "included"])
def test_fragment_false_is_refused(monkeypatch, capsys, where):
    write("common/budget.yaml", "fragment: false\ntrain: {steps: 5}\n")
    path = (
        Path("common/budget.yaml")
        if where == "top"
        else write(
            "s.yaml",
            """\
        name: s
        include: common/budget.yaml
        seeds: 3
        arms: [{name: grpo, algorithm: grpo}]
        """,
        )
    )
    code, _, err = run_main(monkeypatch, capsys, "validate", str(path))
    assert code == 2
    assert "fragment: must be true (it marks an include-only file)" in one_error(err)
