"""Trial warnings in the report: a header line per warning code, and comparisons whose side had
no learning signal marked as such (more seeds would not decide them)."""

from __future__ import annotations

import re

import pandas as pd

from harness.decide.frames import completed

#: the warning code of a trial that had nothing to learn from (harness.engine.spec.NO_LEARNING_SIGNAL;
#: the report does not import the engine)
NO_SIGNAL = "no_learning_signal"


#: the first line of a warning: its code (one lower-case token: letters, digits, underscores), ": ", the rest
_WARNING_START = re.compile(r"[a-z][a-z0-9_]*: ")


def split_warnings(text) -> list[tuple[str, str]]:
    """A trial's warnings as ``(code, detail)``, from the trials frame's newline-joined
    ``warnings`` text. A warning's code is the first token of its first line only: a line that
    does not start with ``<code>: `` (free text, an indented line) goes on with the warning
    before it, so a warning written over several lines stays one warning, its lines joined by
    spaces, instead of each line passing for a code of its own."""
    warnings: list[tuple[str, list[str]]] = []
    for line in text.splitlines() if isinstance(text, str) else []:
        if not line.strip():
            continue
        if warnings and not _WARNING_START.match(line):
            warnings[-1][1].append(line.strip())
            continue
        code, _, detail = line.partition(": ")
        warnings.append((code, [detail]))
    return [(code, " ".join(part for part in lines if part)) for code, lines in warnings]


def _warned(results) -> tuple[dict[str, dict[str, list[tuple[int, str]]]], dict[str, int]]:
    """``code -> condition -> [(seed, detail)]`` over completed trials' warnings, and each
    condition's completed-trial count."""
    done = completed(results.trials)
    by_code: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for cond, seed, text in zip(done["arm"], done["seed"], done.get("warnings", pd.Series("", index=done.index))):
        for code, detail in split_warnings(text):
            by_code.setdefault(code, {}).setdefault(str(cond), []).append((int(seed), detail))
    return by_code, done["arm"].astype(str).value_counts().to_dict()


def warning_state(results) -> list[str]:
    """The header's line per warning code: how many completed trials of each condition carry it,
    and one trial's text."""
    by_code, totals = _warned(results)
    lines = []
    for code, per in sorted(by_code.items()):
        counts = ", ".join(f"{cond} {len(hits)} of {totals[cond]}" for cond, hits in per.items())
        cond, hits = next(iter(per.items()))
        seed, detail = min(hits)
        lines.append(f"WARNING {code} in completed trials ({counts}); {cond} seed {seed}: {detail}")
    return lines


def mark_no_learning_signal(verdicts: pd.DataFrame, results) -> pd.DataFrame:
    """Comparisons with a side whose completed trials all have no learning signal: no seeds-needed
    figure (more seeds would not decide them), and the reason says so first."""
    by_code, totals = _warned(results)
    silent = {cond for cond, hits in by_code.get(NO_SIGNAL, {}).items() if len(hits) == totals[cond]}
    out = verdicts.copy()
    hit = [[c for c in pair if c in silent] for pair in zip(out["condition"], out["control"])]
    if not any(hit):
        return out
    seeds = ["seeds_needed_null", "seeds_needed_effect"]
    out[seeds] = out[seeds].astype(object)
    for i, sides in zip(out.index, hit):
        if sides:
            out.loc[i, seeds] = None
            out.at[i, "reason"] = (
                f"No learning signal in {' and '.join(sides)} (each of its completed trials warns "
                f"{NO_SIGNAL}): more seeds will not decide this; fix the set-up first. "
                f"{out.at[i, 'reason']}"
            ).strip()
    return out
