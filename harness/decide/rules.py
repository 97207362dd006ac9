"""The settings a study's comparisons are decided under, as one frozen object.

:class:`ReadOptions` is what a command may set (``harness report --alpha 0.1 --min-effect 0.02``,
the runner's fixed level and correction), checked when it is made, so bad input fails before
any record is read. :class:`DecisionRules` is the pre-registered rule those options read the
study under: the study's metric, direction, control, failure policy and test, with the options'
alpha, correction, power, ``min_effect`` (the study's unless a command overrides it) and the
permutation tests' draws and seed. It is built once, where the results are read
(:func:`harness.decide.analysis.analyze`, the sequential schedule), and passed whole to every
step that decides (the comparisons, the replay of a sequential study's looks, the calibration
comparisons, the benchmarks, the compute curves, the report's header).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.decide.frames import check_alpha, check_correction, check_min_effect, check_power
from harness.tracking.study_meta import StudyMeta


@dataclass(frozen=True)
class ReadOptions:
    """How a command reads the results: the verdicts' level, correction and power, a
    ``min_effect`` overriding the study's (None: the study's), and the permutation tests' draws
    and seed. A bad value is a one-line ``ConfigError`` when the options are made."""

    alpha: float = 0.05
    correction: str = "bonferroni"
    power: float = 0.8
    min_effect: float | None = None
    n_permutations: int = 10_000
    seed: int = 0

    def __post_init__(self) -> None:
        check_correction(self.correction)
        object.__setattr__(self, "alpha", check_alpha(self.alpha))
        object.__setattr__(self, "power", check_power(self.power))
        object.__setattr__(self, "min_effect", check_min_effect(self.min_effect))


@dataclass(frozen=True)
class DecisionRules:
    """The pre-registered settings every comparison of a study is decided under."""

    metric: str  # the metric compared (the study's primary metric, unless a command names another)
    direction: str  # maximize or minimize
    control: str | None
    alpha: float
    correction: str  # across the pre-registered comparisons: bonferroni or none
    power: float  # for the seeds a comparison needs
    min_effect: float | None  # the equivalence margin (None: no equivalence verdict)
    failures: str  # what a failed trial counts as: drop or worst
    test: str  # the primary test
    n_permutations: int = 10_000
    seed: int = 0

    @classmethod
    def of(cls, meta: StudyMeta, options: ReadOptions | None = None, *, metric: str | None = None) -> DecisionRules:
        """The study ``meta``'s rules read under ``options`` (default: the defaults), on
        ``metric`` (default: the study's primary metric)."""
        options = options or ReadOptions()
        margin = options.min_effect if options.min_effect is not None else check_min_effect(meta.min_effect)
        return cls(
            metric=metric or meta.primary_metric,
            direction=meta.direction,
            control=meta.control,
            alpha=options.alpha,
            correction=options.correction,
            power=options.power,
            min_effect=margin,
            failures=meta.failures,
            test=meta.test,
            n_permutations=options.n_permutations,
            seed=options.seed,
        )
