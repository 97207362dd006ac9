"""A test's shorthand for the two arguments of a decision step: the results and the rules they
are decided under (the study's, read with a command's ``options``)."""

from harness.decide.frames import meta_of
from harness.decide.rules import DecisionRules, ReadOptions


def under(results, **options):
    return results, DecisionRules.of(meta_of(results), ReadOptions(**options))
