"""The suite never touches the user's study outputs in the checkout.

A user who followed the README ran the quickstart before the tests, from the same folder: the
checkout then holds ``runs/quickstart/`` (records, the Optuna queue, the MLflow store),
``reports/quickstart/`` and the warm-start cache ``.cache/harness/``. Every default that
writes or reads those is relative to the current folder, so:

- each test runs in a fresh temporary folder of its own (``_own_working_folder``); tests that
  need a repository file name it by absolute path (``Path(__file__).resolve().parents[N]``);
  fixtures that ``monkeypatch.chdir`` somewhere else still win, being set up after this one;
- the session snapshots ``runs/``, ``reports/`` (but ``reports/README.md``) and ``.cache/`` in
  the checkout at its start, and fails at its end, listing the paths, if anything there was
  created, changed or removed. What was there before (the user's data) is fine as it is.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# submitit configures logging when it is first imported (logging.config.dictConfig: every handler
# there is then closed, pytest's own among them, and its new ones write to the sys.stdout and
# sys.stderr of that moment, a test's captured streams): in the tests it leaves logging as it is.
os.environ.setdefault("SUBMITIT_LOG_LEVEL", "NOCONFIG")
# The suite runs offline: a model named by a Hugging Face hub id (the tests that price or refuse
# one) fails at once from the local cache instead of retrying the network for about 45 s.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
GUARDED = ("runs", "reports", ".cache")
UNGUARDED = {Path("reports") / "README.md"}  # tracked in git: the folder's description
MAX_LISTED = 20

Snapshot = dict[str, tuple[str, int, int]]  # relative path -> (kind, size, mtime_ns)
_SNAPSHOT = pytest.StashKey[Snapshot]()
_CHANGES = pytest.StashKey[list[str]]()


def snapshot(root: Path = REPO) -> Snapshot:
    """Every folder and file under the guarded folders, with size and modification time.
    Folders count too: a folder created (or a file created and removed again) changes them."""
    found: Snapshot = {}

    def add(path: Path) -> None:
        rel = path.relative_to(root)
        if rel in UNGUARDED:
            return
        try:
            st = path.lstat()
        except FileNotFoundError:  # removed while walking
            return
        kind = "dir" if path.is_dir() and not path.is_symlink() else "file"
        found[rel.as_posix()] = (kind, st.st_size if kind == "file" else 0, st.st_mtime_ns)

    for name in GUARDED:
        top = root / name
        if not top.exists() and not top.is_symlink():
            continue
        add(top)
        for folder, dirs, files in os.walk(top):  # does not follow symlinked folders
            for entry in [*dirs, *files]:
                add(Path(folder) / entry)
    return found


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What differs, one line a path: created, removed or modified."""
    lines = []
    for rel in sorted(before.keys() | after.keys()):
        if rel not in before:
            lines.append(f"created  {rel}")
        elif rel not in after:
            lines.append(f"removed  {rel}")
        elif before[rel] != after[rel]:
            lines.append(f"modified {rel}")
    return lines


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``--dist loadgroup``, the tests that share an expensive setup run on one worker
    (``shared_setup.SHARED_SETUP_GROUPS``); any other ``--dist`` is xdist's own."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from shared_setup import SharedSetupScheduling  # xdist is imported only where it runs the tests

    return SharedSetupScheduling(config, log)


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")  # the controller checks the whole run


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _is_xdist_worker(session.config):
        session.config.stash[_SNAPSHOT] = snapshot()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash.get(_SNAPSHOT, None)
    if before is None:
        return
    found = changes(before, snapshot())
    session.config.stash[_CHANGES] = found
    if found and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    found = config.stash.get(_CHANGES, [])
    if not found:
        return
    terminalreporter.write_sep("=", "the tests touched the checkout's runs/, reports/ or .cache/", red=True, bold=True)
    terminalreporter.write_line(f"in {REPO} (each test should run in its own temporary folder):")
    for line in found[:MAX_LISTED]:
        terminalreporter.write_line(f"  {line}")
    if len(found) > MAX_LISTED:
        terminalreporter.write_line(f"  ... and {len(found) - MAX_LISTED} more")


@pytest.fixture(autouse=True)
def _own_working_folder(tmp_path_factory, monkeypatch):
    """Run the test in an empty temporary folder, so that ``runs/<study>``, ``reports/<study>``
    and ``.cache/harness`` land there and a user's outputs in the checkout are never read.
    A folder apart from ``tmp_path``, so tests that inspect ``tmp_path`` see only their own files."""
    folder = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(folder)
    return folder
