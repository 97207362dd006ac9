"""Study files become trials: the schema, reading YAML (with ``include:``), checking every arm
against the presets, expanding arms x grid x seeds into ``TrialSpec``s, and the plan.
"""
