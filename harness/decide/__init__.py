"""Deciding: records become verdicts and next looks. Nothing here draws or writes a file.

* :mod:`.frames` reads a results object (meta, conditions, comparisons, metrics) and checks the
  analysis settings; :mod:`.comparisons` scores each condition and tests each pair;
  :mod:`.noise` measures the noise floor and splits it by source; :mod:`.calibration` reads
  the A/A tripwire and the placebo; :mod:`.trial_warnings` turns the trials' warnings into
  header lines and marks comparisons without a learning signal; :mod:`.overoptimisation`
  follows a learned reward's proxy against its gold score; :mod:`.scaling` fits each condition's
  saturating compute curve and decides on ceilings and efficiency.
* :mod:`.analysis` puts it all together: ``analyze(results)`` is every table a report shows,
  ``compare_pair`` one pair the way the report reads it.
* Sequential studies: everything about their looks is :mod:`.sequential` (the rule fixed at
  the first look and its versions, the seeds and trials of each look, the look-by-look replay
  on the boundaries of :mod:`harness.stats.sequential`, and the runner's question: which looks
  are due now).

Every statistic comes from :mod:`harness.stats`; :mod:`harness.report` draws and writes what
this package decided. The package itself imports nothing, so the runner can load
:mod:`.sequential.pools` without pandas.
"""
