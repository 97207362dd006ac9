"""Any trainer: the trial function the runner's trial process calls (``dispatch.run_trial``).

A builtin trial runs the harness's own loop (``harness.engine.trial``). A program trial (``trainer:
{kind: command}`` or ``trl``) follows the contract of docs/trainers.md: the harness writes the
trial's inputs (``trial_inputs``), runs the program in the trial's process group (``program``),
then is the one judge of every arm: it loads the checkpoints the program wrote (``checkpoints``)
and scores them with the engine's own evaluator (``checkpoint_eval``), or checks the scores the program
handed in (``handed_scores``), and merges the program's metrics into the history
(``program_metrics``): the same ``TrialResult`` a builtin trial gives (``program_trial``).
"""
