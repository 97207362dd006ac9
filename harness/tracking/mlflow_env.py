"""MLflow's environment as harness wants it, set when the first harness module that can import
mlflow is imported (``mlflow_layout``, ``mlflow_mirror``), before mlflow reads it."""

from __future__ import annotations

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# A dead tracking server must not stall a trial for minutes (MLflow's defaults: 7 retries with
# exponential backoff, 120 s per request). The user's own settings win.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
# MLflow's own INFO lines ("Creating initial MLflow database tables...") would interleave with
# every worker's output; warnings and errors still show. The user's own level wins.
USER_MLFLOW_LEVEL = os.environ.get("MLFLOW_LOGGING_LEVEL")
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
# MLflow prints "View run ... at: <tracking URI>/#/..." on stdout after every run it ends, with
# the URI as given: credentials in it would be printed in full. Never.
os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"
# MLflow draws a progress bar on stderr for every artifact it moves, however small (a per-prompt
# table `harness decide` reads, a record the mirror logs). The user's own setting wins.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
