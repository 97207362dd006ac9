"""What a tool's log holds, before arms and seeds are named: one row per scored sample."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

#: the columns of :attr:`LogRows.frame`
LOG_COLUMNS = ("run", "benchmark", "prompt_id", "sample", "value", "where")


@dataclass(frozen=True)
class LogRows:
    """The scored samples of one tool's logs.

    ``frame`` has one row per scored sample:

    * ``run``: the name the tool recorded for what was evaluated (a model path or name), from
      which :mod:`harness.evallogs.naming` takes the arm and seed;
    * ``benchmark``: the tool's task name, made a valid benchmark name (lower case, digits, ``_``);
    * ``prompt_id``: the question's id within the task (str), the same for every run;
    * ``sample``: 0, 1, ... the sample's index among the question's samples in that run (repeats,
      epochs); 0 when the tool scored one answer per question;
    * ``value``: the score (float), checked finite;
    * ``where``: ``file:line`` (or ``file``) of the row, for the one-line errors about it.

    ``tool`` names the tool and the version that wrote the logs (``lm-evaluation-harness 0.4.13``);
    ``score`` names the field the values were read from (``exact_match``), as the report shows it.
    """

    frame: pd.DataFrame
    tool: str
    score: str


def benchmark_name(task: str) -> str:
    """A tool's task name as a valid benchmark name (``BENCHMARK_NAME``: lower case, digits and
    ``_``, a letter first): ``leaderboard|arc:challenge|25`` -> ``leaderboard_arc_challenge_25``."""
    name = re.sub(r"[^a-z0-9]+", "_", task.lower()).strip("_")
    return name if name[:1].isalpha() else f"t_{name}"
