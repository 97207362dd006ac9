"""A full disk or an unwritable output folder: one clear line and exit 2 before any trial starts.

What is real and what is simulated:

- *unwritable (real)*: the output folder lies under a regular file, so it cannot be created
  (root ignores permission bits, so a chmod'ed folder would prove nothing);
- *read-only (real, needs mount rights)*: a read-only tmpfs (512 MiB, empty) is mounted; EROFS;
- *disk full (real, needs mount rights)*: a 1 MiB tmpfs filled to the last byte: with the
  free-space threshold at 0 the write probe hits ENOSPC; with the default threshold the
  free-space check refuses first;
- *too little free space (simulated)*: the threshold (``HARNESS_MIN_FREE_MB``) is raised above
  what any disk has, so the real free space of the test's disk is "too little".

Without mount rights (a CI container without CAP_SYS_ADMIN) the tmpfs cases are skipped.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from faults_helpers import FAKE, write_study

from harness.runner.output_dir import DEFAULT_MIN_FREE_MB


def _run_cli(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    from harness.cli import main

    monkeypatch.setattr(sys, "argv", ["harness", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    return exit_.value.code, capsys.readouterr().err


def _nothing_started(tmp_path: Path, counters: Path) -> None:
    assert not counters.exists(), "a trial ran"
    assert not list(tmp_path.rglob("optuna.db")), "a storage was created"
    assert not list(tmp_path.rglob("study.yaml")), "a study folder was set up"


def _expect_clear_error(monkeypatch, capsys, study: Path, *extra: str) -> str:
    code, err = _run_cli(monkeypatch, capsys, "run", str(study), "--trial-fn", FAKE, "--no-tracking", *extra)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: output folder "), err
    return lines[0]


@pytest.fixture
def tmpfs(tmp_path):
    """Mount a tmpfs (``mount(options) -> folder``); skip without mount rights; always unmounted."""
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        point = tmp_path / f"mnt{len(mounted)}"
        point.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.skip(
                f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); "
                "the read-only and full-disk cases need mount rights"
            )
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", "-l", str(point)], capture_output=True)


def test_output_folder_under_a_file(tmp_path, fault_env, monkeypatch, capsys):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where a folder should be\n")
    study = write_study(tmp_path, "blocked", ["ok"], output_dir=str(blocker / "out"))
    line = _expect_clear_error(monkeypatch, capsys, study)
    assert f"{blocker} is a file, not a folder" in line
    _nothing_started(tmp_path, fault_env)


def test_too_little_free_space_simulated_by_the_threshold(tmp_path, fault_env, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_MIN_FREE_MB", str(10**12))  # more than any disk has
    study = write_study(tmp_path, "roomy", ["ok"], output_dir=str(tmp_path / "out"))
    line = _expect_clear_error(monkeypatch, capsys, study)
    assert "MB free on its disk, need at least 1e+12 MB" in line and "HARNESS_MIN_FREE_MB" in line
    _nothing_started(tmp_path, fault_env)
    assert not (tmp_path / "out").exists()
    # and `harness worker` checks the same before joining
    code, err = _run_cli(
        monkeypatch,
        capsys,
        "worker",
        str(study),
        "--trial-fn",
        FAKE,
        "--no-tracking",
        "--storage",
        f"sqlite:///{tmp_path / 'nowhere.db'}",
    )
    free_mb = re.compile(r"only [0-9.]+ MB free")  # the disk's free space moves between the two reads
    assert code == 2 and [free_mb.sub("only N MB free", x) for x in err.strip().splitlines()] == [
        free_mb.sub("only N MB free", line)
    ]


def test_read_only_output_folder(tmp_path, fault_env, monkeypatch, capsys, tmpfs):
    ro = tmpfs("ro,size=512m")  # a limit, not memory: room enough for the free-space check
    study = write_study(tmp_path, "readonly", ["ok"], output_dir=str(ro / "out"))
    line = _expect_clear_error(monkeypatch, capsys, study)
    assert "is not writable: Read-only file system" in line
    _nothing_started(tmp_path, fault_env)


def test_full_disk(tmp_path, fault_env, monkeypatch, capsys, tmpfs):
    disk = tmpfs("size=1m")
    with open(disk / "filler", "wb", buffering=0) as fh:  # fill it to the last byte
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError:
            pass
    study = write_study(tmp_path, "full", ["ok"], output_dir=str(disk / "out"))
    line = _expect_clear_error(monkeypatch, capsys, study)  # the default threshold refuses first
    assert f"need at least {DEFAULT_MIN_FREE_MB:g} MB" in line
    monkeypatch.setenv("HARNESS_MIN_FREE_MB", "0")  # then the write itself fails: ENOSPC
    line = _expect_clear_error(monkeypatch, capsys, study)
    assert "No space left on device" in line
    _nothing_started(tmp_path, fault_env)
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]  # nothing left behind
