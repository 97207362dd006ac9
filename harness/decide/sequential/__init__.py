"""Sequential studies: every decision about their looks, in one place.

A sequential study (``sequential:``) buys seeds look by look and stops an arm as soon as its
comparison is decided. Everything about that lives here:

* :mod:`.pools`: which seeds each look reads and which trials it adds (light: no pandas);
* :mod:`.rule`: the decision rule the looks are read under, and the rule a study file sets;
* :mod:`.versions`: the rule fixed at the first look, checked by every reader, and the next
  version ``harness run --new-version`` starts (:func:`.versions.settle`, the one place a
  version is fixed); :mod:`.rule_store` is its one door to where fixed rules are kept;
* :mod:`.replay`: the comparisons replayed look by look on the stored trials (when each stops);
* :mod:`.compute`: looks over compute (``compute_looks:``) replayed on the stored trials: where
  each arm stopped along its budget, the verdicts at the budget, the compute spent, and which
  arms go on after a look;
* :mod:`.schedule`: the runner's question, what is due now (:func:`.schedule.look_state`,
  :class:`.schedule.Schedule`); the runner only queues what it says and tells it when the
  queue changed.

The boundaries themselves (alpha spending, repeated confidence intervals) are pure statistics,
in :mod:`harness.stats.sequential`. This package itself imports nothing, so the runner loads
only what it uses.
"""
