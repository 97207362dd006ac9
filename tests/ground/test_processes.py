"""The processes a process started are found by parentage, even one in a session of its own, and
ended together; those it keeps are spared (real processes: sh, setsid and sleep)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from harness.ground.processes import descendants, end_descendants
from harness.runner.child import process_gone

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("setsid") is None, reason="needs Linux /proc and setsid"
)


def detaching_tree() -> tuple[subprocess.Popen, int]:
    """A shell that starts a sleeper in a new session (out of its group) and then sleeps itself."""
    shell = subprocess.Popen(
        ["sh", "-c", "setsid sleep 600 & echo $!; exec sleep 600"], stdout=subprocess.PIPE, text=True
    )
    return shell, int(shell.stdout.readline())


def test_a_detached_grandchild_is_found_and_ended_with_its_parent():
    before = descendants()  # what this test process runs besides (servers of other tests): kept
    shell, detached = detaching_tree()
    try:
        assert {shell.pid, detached} <= descendants()
        assert end_descendants(before) == {shell.pid, detached}
        assert process_gone(shell.pid) and process_gone(detached)
    finally:
        shell.kill()
        shell.wait()


def test_the_processes_kept_and_theirs_are_spared():
    before = descendants()
    kept, kept_detached = detaching_tree()
    other, other_detached = detaching_tree()
    try:
        assert end_descendants(before | {kept.pid}) == {other.pid, other_detached}
        assert process_gone(other_detached) and not process_gone(kept_detached)
    finally:
        end_descendants(before)
        for shell in (kept, other):
            shell.wait()
    assert process_gone(kept_detached)
