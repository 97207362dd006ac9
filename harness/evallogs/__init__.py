"""Evaluation logs users already have, read into per-sample rows ``harness decide`` judges.

One module per tool: ``lm_eval`` (lm-evaluation-harness ``--log_samples`` output),
``lighteval`` (its per-sample details parquet files), ``inspect_logs`` (Inspect AI ``.eval`` /
``.json`` logs, through inspect-ai's own reader). Each returns :class:`~harness.evallogs.rows.LogRows`:
one row per scored sample, named by the run (the model) the tool recorded. :mod:`.naming` turns a
run's name into an arm and a seed; :mod:`.sources` picks the reader for a file.
"""
