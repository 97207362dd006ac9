"""One trial, end to end: its spec, the model and task, the warm start, the RL or DPO loop and
the held-out evaluation. ``harness.engine.trial.run_trial(spec)`` is the entry point the runner
starts in a process of its own; nothing outside the engine needs more than that and the spec.
"""
