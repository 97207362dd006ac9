"""Trial specs become records, on any number of machines: the trial queue on the study
database, worker processes per GPU or CPU slot, one child process per trial, tuning, outcomes.
"""
