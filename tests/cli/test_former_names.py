"""Renamed commands keep their former names for one release: ``harness judge`` is ``harness decide``
and ``harness sync`` is ``harness mirror-to-mlflow``. A script that calls a former name gets the same
result and the same stdout, and one line on stderr naming the new command; --help lists only the new."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_main import run_main
from test_decide import stored_study

FORMER = {"judge": "decide", "sync": "mirror-to-mlflow"}


def notice(old: str) -> str:
    return f"[harness] warning: `harness {old}` is now `harness {FORMER[old]}`; the old name goes in the next release"


def test_help_lists_the_new_names_only(monkeypatch, capsys):
    code, out, _ = run_main(monkeypatch, capsys, "--help")
    assert code == 0
    listed = {line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.strip()}
    assert set(FORMER.values()) <= listed, out
    assert not set(FORMER) & listed, out


def test_judge_runs_decide_and_says_its_new_name(monkeypatch, capsys):
    stored_study(3)
    assert run_main(monkeypatch, capsys, "tidy", "scored", "--out", "t.csv")[0] == 0
    options = ["t.csv", "--control", "grpo", "--min-effect", "0.05", "--out"]
    new = run_main(monkeypatch, capsys, "decide", *options, "new")
    old = run_main(monkeypatch, capsys, "judge", *options, "old")
    assert new[0] == old[0] == 0, (new, old)
    assert old[1] == new[1].replace("new", "old") and "big vs grpo: " in old[1]
    assert old[2].splitlines() == [notice("judge"), *new[2].splitlines()]
    assert Path("old/summary.md").read_text() == Path("new/summary.md").read_text()


@pytest.mark.parametrize("old", sorted(FORMER))
def test_a_former_name_takes_the_same_arguments_and_fails_the_same_way(monkeypatch, capsys, old):
    monkeypatch.delenv("HARNESS_TRACKING_URI", raising=False)
    args = {"judge": ["missing.csv", "--control", "grpo"], "sync": ["nosuchstudy"]}[old]
    new = run_main(monkeypatch, capsys, FORMER[old], *args)
    former = run_main(monkeypatch, capsys, old, *args)
    assert new[0] == former[0] == 2, (new, former)
    assert former[1] == new[1] == ""
    assert former[2].splitlines() == [notice(old), *new[2].splitlines()] and len(new[2].splitlines()) == 1
