"""MLflow runs of learned reward models (``harness reward-model train``).

One experiment, ``reward-models`` (default store ``sqlite:///runs/reward_models/mlflow.db``, with
artifacts beside it, like a study's), and one run per reward model, tagged
``harness.role=reward_model`` and ``harness.reward_model=<id>``: its training inputs as params,
its metrics, and its ``manifest.json`` as an artifact. A model already recorded is not recorded
again (the id is a content hash: the same id is the same model). The reward model's folder is
the truth; a failure here only warns (``TrackingWarning``) and returns None.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

from harness.ground.checked_cache import MANIFEST_FILE
from harness.ground.urls import redact_url
from harness.tracking.mlflow_layout import ROLE_TAG, mlflow_key, param_items
from harness.tracking.mlflow_mirror import Tracker, TrackingWarning, failure_text

EXPERIMENT = "reward-models"
STORE_DIR = Path("runs") / "reward_models"
ROLE = "reward_model"
ID_TAG = "harness.reward_model"


def log_reward_model(
    folder: Path, manifest: dict[str, Any], *, tracking_uri: str | None = None, store_dir: str | Path = STORE_DIR
) -> tuple[str, str] | None:
    """Record the reward model in ``folder`` (its ``manifest``); (run id, the store as shown), or
    None after a ``TrackingWarning`` when MLflow failed."""
    tracker = Tracker(tracking_uri, store_dir, EXPERIMENT)
    try:
        return _log(tracker, Path(folder), manifest), redact_url(tracker.tracking_uri)
    except Exception as err:  # noqa: BLE001 - the reward model stands whatever MLflow does
        warnings.warn(
            f"MLflow tracking at {redact_url(tracker.tracking_uri)} failed for reward model "
            f"{manifest.get('id')}: {failure_text(err, tracker.tracking_uri)}; the model is saved in "
            f"{folder}",
            TrackingWarning,
            stacklevel=2,
        )
        return None


def _log(tracker: Tracker, folder: Path, manifest: dict[str, Any]) -> str:
    from mlflow.entities import Metric, Param

    tracker._preflight()
    client, model_id = tracker.client, str(manifest["id"])
    found = tracker._search(f"tags.`{ID_TAG}` = '{model_id}'")
    if found:
        return found[0].info.run_id
    run = client.create_run(
        tracker.experiment_id(),
        run_name=model_id,
        tags={ROLE_TAG: ROLE, ID_TAG: model_id, "base": str(manifest.get("base")), "folder": str(folder.resolve())},
    )
    run_id = run.info.run_id
    params = {**manifest.get("inputs", {}), "training": manifest.get("training", {})}
    items = [Param(k, v) for k, v in param_items(params).items()]
    for i in range(0, len(items), 100):
        client.log_batch(run_id, params=items[i : i + 100], synchronous=True)
    now = int(time.time() * 1000)
    metrics = [Metric(mlflow_key(k), float(v), now, 0) for k, v in manifest.get("metrics", {}).items()]
    metrics += [Metric(k, float(manifest[k]), now, 0) for k in ("score_mean", "score_std")]
    client.log_batch(run_id, metrics=metrics, synchronous=True)
    client.log_artifact(run_id, str(folder / MANIFEST_FILE))
    client.set_terminated(run_id, "FINISHED")
    return run_id
