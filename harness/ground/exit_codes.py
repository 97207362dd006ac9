"""The exit codes of every ``harness`` command and of the runner's summaries, defined once."""

EXIT_OK = 0  # everything asked for was done
EXIT_SOME_FAILED = 1  # it ran, and some trials (or checks) failed: see the summary
EXIT_BAD_INPUT = 2  # nothing was started: bad input, named in one line
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C or SIGTERM; what finished is kept
