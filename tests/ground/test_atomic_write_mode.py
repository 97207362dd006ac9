"""atomic_write gives a file the mode a plain open would: 0o666 less the umask for a new file, the
replaced file's own mode for one it replaces (tempfile's 0o600 made every report private)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from harness.ground.files import atomic_write, atomic_write_all


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask():
    """Set the process umask for one test and put the old one back."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_a_new_file_gets_the_umask_s_mode(tmp_path, umask, mask, expected):
    umask(mask)
    written = atomic_write_all({tmp_path / "a.html": "a", tmp_path / "b.csv": b"b"})
    assert [mode(p) for p in written] == [expected, expected]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "b.csv"]  # no temporary left


def test_a_replaced_file_keeps_its_own_mode(tmp_path, umask):
    umask(0o022)
    private = tmp_path / "private.json"
    private.write_text("old")
    private.chmod(0o600)
    atomic_write(private, "new")
    assert private.read_text() == "new" and mode(private) == 0o600
