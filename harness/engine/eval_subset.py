"""The fixed stratified subset of the held-out prompts that a study's intermediate evaluations
score (``TrialSpec.eval_subset``), drawn from the start evaluation.

Why from the start evaluation, in every trial: the warm start is shared by every trial of a
study (``warmstart.seed``, cached) and the start evaluation's draws are seeded by a constant
(``harness.engine.evaluation.EVAL_SEED``), so its per-prompt scores, and with them the strata and
the draw, are the same for every arm and seed (the spec refuses a vLLM backend, whose samples
follow the trial seed). The subset is therefore one for the whole study; it is fixed before any
update, by the rule and ``seed`` the study file pre-registers, so no one chooses prompts after
seeing a result; and it is reproducible from the record (the start scores and the settings),
which stores each evaluation's prompts and strata. Choosing it at plan time instead would need
the warm start's scores there; choosing it from the control's first trial would make every
other trial wait for that one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from harness.engine.spec import EvalSubsetConfig, PromptScores
from harness.engine.tasks.base import Item


@dataclass(frozen=True)
class EvalSubset:
    """The strata of the held-out prompts and the subset drawn from them: ``strata`` maps every
    held-out prompt id to its stratum (0 the hardest at the start), ``sizes`` is each stratum's
    count, ``chosen`` the subset's ids in the task's eval order."""

    strata: dict[str, int]
    sizes: tuple[int, ...]
    chosen: tuple[str, ...]

    def items(self, items: list[Item], ids: list[str]) -> list[Item]:
        """The subset's items of ``items`` (whose prompt ids are ``ids``), in their order."""
        keep = set(self.chosen)
        return [item for item, pid in zip(items, ids) if pid in keep]

    def label(self, scores: PromptScores) -> PromptScores:
        """``scores`` with each prompt's stratum and the strata's sizes."""
        return scores.model_copy(
            update={"strata": [self.strata[pid] for pid in scores.prompt_ids], "stratum_sizes": list(self.sizes)}
        )


def allocate(total: int, sizes: list[int]) -> list[int]:
    """``total`` (fewer than ``sum(sizes)``, at least 2 per stratum) spread over strata of ``sizes``
    in proportion to their sizes, by largest remainder (ties to the earlier stratum); a stratum
    left with fewer than 2 (no variance to estimate) takes one from the stratum most above its share."""
    whole = sum(sizes)
    exact = [total * size / whole for size in sizes]
    counts = [int(share) for share in exact]
    by_remainder = sorted(range(len(sizes)), key=lambda h: (-(exact[h] - counts[h]), h))
    for h in by_remainder[: total - sum(counts)]:
        counts[h] += 1
    for short in [h for h in range(len(sizes)) if counts[h] < 2]:
        while counts[short] < 2:
            donor = max((h for h in range(len(sizes)) if counts[h] > 2), key=lambda h: (counts[h] - exact[h], -h))
            counts[donor] -= 1
            counts[short] += 1
    return counts


def _difficulty(value: float) -> tuple[bool, float]:
    """A score as a sort key: a NaN (a custom reward's) sorts as the hardest."""
    return (value == value, value if value == value else 0.0)


def draw_subset(start: PromptScores, config: EvalSubsetConfig) -> EvalSubset:
    """The subset of the held-out prompts ``start`` scored (the start evaluation), by ``config``:
    the prompts ordered by their sampled mean reward there (ties by the greedy score, then by a
    shuffle from ``config.seed``), cut into ``config.strata`` consecutive strata of near-equal
    size, and each stratum's allocation (:func:`allocate`) drawn from it by the same generator."""
    rng = random.Random(f"eval_subset:{config.seed}")
    ids = list(start.prompt_ids)
    shuffled = rng.sample(range(len(ids)), len(ids))
    order = sorted(
        range(len(ids)),
        key=lambda i: (_difficulty(start.sampled_mean[i]), _difficulty(start.greedy[i]), shuffled[i]),
    )
    n_strata = config.strata
    base, extra = divmod(len(ids), n_strata)
    sizes = [base + (h < extra) for h in range(n_strata)]
    strata, chosen, at = {}, set(), 0
    for h, (size, take) in enumerate(zip(sizes, allocate(config.count(len(ids)), sizes))):
        members = [ids[i] for i in order[at : at + size]]
        at += size
        strata.update(dict.fromkeys(members, h))
        chosen.update(rng.sample(members, take))
    return EvalSubset(strata, tuple(sizes), tuple(pid for pid in ids if pid in chosen))
