"""The ground floor: the small tools every part of the harness shares, written once.

One file lock and one atomic write (:mod:`.files`), one way to say things on stderr
(:mod:`.console`), the exit codes (:mod:`.exit_codes`), the strict pydantic base
(:mod:`.strict`), the one ``module:attr`` resolver (:mod:`.dotted`), the checked-cache
protocol (:mod:`.checked_cache`), the masking of credentials in URLs and the file of a SQLite URL
(:mod:`.urls`), the CSV cells a spreadsheet opens as text (:mod:`.spreadsheet`) and the
reports folder the harness keeps (:mod:`.folders`). The
one-line error formatter and the typed error record that crosses process boundaries live beside
the error types, in :mod:`harness.errors`.

Every part may import this package; it imports nothing of the harness but ``harness.errors``.
"""
