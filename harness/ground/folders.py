"""The folder the harness keeps for the user in the working directory, named once: ``reports/``
(``harness report`` and ``harness decide`` write ``reports/<name>/`` there without ``--out``, and
the reports in it share one ``plotly.min.js``)."""

from __future__ import annotations

from pathlib import Path

#: where reports go without --out: reports/<name>/
REPORTS_ROOT = Path("reports")
