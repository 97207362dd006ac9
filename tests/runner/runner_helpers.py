"""Helpers for the runner tests: tiny study files, fast run options, call counters."""

from __future__ import annotations

import io
from pathlib import Path

import yaml

FAKE = "fake_trials:by_arm"


def write_study(tmp_path: Path, arms: list[str], *, seeds=1, name="t", **extra) -> Path:
    """A study whose arms are named for the fake outcome they produce (see fake_trials)."""
    data = {
        "name": name,
        "output_dir": str(tmp_path / "out" / name),
        "seeds": seeds,
        "control": arms[0],
        "arms": [{"name": arm, "algorithm": "grpo"} for arm in arms],
        **extra,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def options(**kw):
    from harness.runner.options import RunOptions

    defaults = dict(
        trial_fn=FAKE,
        tracking=False,
        poll_interval=0.2,
        heartbeat_interval=1,
        grace_period=3,
        kill_grace=2,
        progress_every=60,
        stream=io.StringIO(),
        gpus=[],
    )
    defaults.update(kw)
    return RunOptions(**defaults)


def calls(counters: Path, trial_id: str, what: str = "started") -> int:
    path = counters / f"{trial_id}.{what}"
    return len(path.read_text().splitlines()) if path.exists() else 0


def at_once(storage_url: str, queue_name: str, racers: int, work) -> list:
    """``work(queue)`` in ``racers`` threads released together, each with a storage connection of
    its own (another machine); returns what each returned, after asserting none raised."""
    import threading

    from harness import store as study_db
    from harness.runner import queue

    barrier = threading.Barrier(racers)
    results, errors = [], []

    def machine():
        storage = study_db.open_storage(storage_url)
        try:
            mine = queue.load_queue(storage, queue_name)
            barrier.wait()
            results.append(work(mine))
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)
        finally:
            storage.engine.dispose()

    threads = [threading.Thread(target=machine) for _ in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return results
