"""Which arm and seed each evaluated run is: one pattern over the name the tool recorded.

An evaluation tool names what it evaluated by a model path or name
(``/ckpt/grpo-s1/step_500``, ``hf/org/model``). ``--runs REGEX`` is searched in that name; its
named group ``arm`` is the arm and its optional group ``seed`` (digits) the seed, so the runs of
several training seeds of one arm line up as that arm's seeds. Without a pattern the arm is the
name's last part after ``/`` and every run is seed 0 (one run per arm). Two runs that name the
same arm and seed are refused: their answers would be mixed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from harness.errors import ConfigError
from harness.evallogs.rows import LogRows


@dataclass(frozen=True)
class RunNames:
    """How run names become (arm, seed): ``pattern`` (None: the last part of the name, seed 0)."""

    pattern: re.Pattern[str] | None = None

    @classmethod
    def parse(cls, text: str | None) -> RunNames:
        """The ``--runs`` pattern, checked: a valid regular expression with an ``arm`` group."""
        if text is None:
            return cls()
        try:
            pattern = re.compile(text)
        except re.error as err:
            raise ConfigError(f"--runs {text!r}: not a valid regular expression ({err})") from None
        if "arm" not in pattern.groupindex:
            raise ConfigError(
                f"--runs {text!r}: name the arm with a group (?P<arm>...), and the seed with (?P<seed>...)"
            )
        return cls(pattern)

    def arm_and_seed(self, run: str) -> tuple[str, int]:
        if self.pattern is None:
            return run.rstrip("/").rsplit("/", 1)[-1] or run, 0
        found = self.pattern.search(run)
        if found is None or not found["arm"]:
            raise ConfigError(
                f"run {run!r} does not match --runs {self.pattern.pattern!r} (or its arm group is empty); "
                "give a pattern every run name matches"
            )
        seed = found.groupdict().get("seed")
        if seed is None:
            return found["arm"], 0
        if not seed.isdigit():
            raise ConfigError(f"run {run!r}: the seed group of --runs matched {seed!r}, not a whole number")
        return found["arm"], int(seed)


def tidy_rows(rows: LogRows, names: RunNames) -> pd.DataFrame:
    """The per-sample tidy rows (``arm, seed, benchmark, prompt_id, sample, value, where``) of a
    tool's logs, each run named by ``names``; two runs naming one arm and seed are refused."""
    frame = rows.frame
    runs = list(dict.fromkeys(frame["run"]))
    named = {run: names.arm_and_seed(run) for run in runs}
    first: dict[tuple[str, int], str] = {}
    for run, key in named.items():
        if key in first:
            raise ConfigError(
                f"runs {first[key]!r} and {run!r} both name arm {key[0]}, seed {key[1]}; give --runs PATTERN "
                "whose arm (and seed) groups tell them apart"
            )
        first[key] = run
    arms = frame["run"].map(lambda run: named[run][0])
    seeds = frame["run"].map(lambda run: named[run][1])
    out = frame.assign(arm=arms, seed=seeds)
    return out[["arm", "seed", "benchmark", "prompt_id", "sample", "value", "where"]].reset_index(drop=True)
