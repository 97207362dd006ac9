"""A small stored study in the working folder: ``studies/small.yaml`` and, in ``runs/small``, a
completed record of every trial (written directly: no trial runs, nothing imports torch)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from harness.engine.spec import TrialResult
from harness.study.expand import expand
from harness.study.load import load_study
from harness.tracking import records

STUDY = textwrap.dedent("""\
    name: small
    control: grpo
    seeds: 3
    train: {steps: 2, prompts_per_step: 2, max_new_tokens: 4, eval_every: 1, eval_samples: 1}
    task: {n_eval: 8}
    arms:
      - {name: grpo, algorithm: grpo}
      - {name: rloo, algorithm: rloo}
    """)


def write_study(text: str = STUDY, name: str = "small") -> Path:
    """``studies/<name>.yaml`` in the working folder."""
    path = Path("studies") / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def write_records(path: Path) -> None:
    """A completed record of every trial of the study at ``path``, in its folder ``runs/<name>``."""
    study = load_study(path)
    for i, spec in enumerate(expand(study)):
        final = {
            "eval/accuracy": 0.4 + 0.01 * i,
            "eval/mean_reward": 0.3,
            "tokens/total": 100.0,
            "time/total_s": 2.0 + i,
        }
        result = TrialResult(trial_id=spec.trial_id, final=final, wall_time_s=2.0 + i)
        records.write_record(Path("runs") / study.name, records.make_record(spec, result, finished_at=1.8e9 + i))
