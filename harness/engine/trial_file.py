"""The trial file a program trainer reads (``<output_dir>/trial.json``) and the templates of its
command line, which name that file's fields (docs/trainers.md is the contract).

The layout is built here, from the spec alone, so a study can check its templates when it is
validated (a placeholder naming no field is a ``ConfigError`` before anything runs) against the
same document the trial process later writes. A placeholder is ``{dotted.name}``, replaced by
regex over whole placeholders (never ``str.format``, which would read attributes and indexes).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from harness.engine.spec import TrialSpec
from harness.errors import ConfigError

CONTRACT_VERSION = 1
TRIAL_FILE = "trial.json"
#: the files and folders of a trial's output folder, by their field in the trial file
OUTPUT_PATHS = {
    "trial_file": TRIAL_FILE,
    "train_prompts": "train_prompts.jsonl",
    "eval_prompts": "eval_prompts.jsonl",
    "checkpoint_dir": "checkpoint",
    "checkpoints_dir": "checkpoints",
    "metrics_file": "metrics.jsonl",
    "scores_file": "scores.jsonl",
}
#: a periodic checkpoint's folder under checkpoints_dir
STEP_FOLDER = re.compile(r"step-([0-9]+)")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")


def trial_document(spec: TrialSpec, output_dir: Path, start: str, devices: list[str]) -> dict[str, Any]:
    """The trial file of ``spec`` run in ``output_dir`` from the start model folder ``start``."""
    dump = spec.model_dump(mode="json")
    return {
        "contract": CONTRACT_VERSION,
        "trial_id": spec.trial_id,
        "study": spec.study,
        "arm": spec.arm,
        "seed": spec.seed,
        "algorithm": dump["algorithm"],
        "train": dump["train"],
        "model": {**dump["model"], "start": start},
        "task": dump["task"],
        "benchmarks": [b["name"] for b in dump.get("benchmarks", [])],
        "trainer": spec.trainer.model_dump(mode="json"),
        "output_dir": str(output_dir),
        **{field: str(output_dir / name) for field, name in OUTPUT_PATHS.items()},
        "devices": devices,
        "python": sys.executable,  # the harness's own interpreter: `command: [{python}, train.py, ...]`
        "mlflow": None,  # the program's metrics reach the trial's MLflow run through its record
    }


def _lookup(document: dict[str, Any], dotted: str, where: str) -> Any:
    value: Any = document
    done: list[str] = []
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            if not done:
                valid = f"valid top-level fields: {', '.join(document)}"
            elif isinstance(value, dict):
                valid = f"{'.'.join(done)} has: {', '.join(value) or 'no fields'}"
            else:
                valid = f"{'.'.join(done)} is a value, not a mapping"
            raise ConfigError(f"{where}: {{{dotted}}} names no field of the trial file; {valid}")
        value = value[part]
        done.append(part)
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def fill(template: str, document: dict[str, Any], where: str = "trainer") -> str:
    """``template`` with each placeholder replaced by its field of ``document`` (a string as it
    is, anything else as JSON: 0.001, true, null)."""
    return PLACEHOLDER.sub(lambda found: _text(_lookup(document, found[1], where)), template)


def templates(spec: TrialSpec) -> list[tuple[str, str]]:
    """Every template of the spec's trainer, with where it is: ``(trainer.command[1], text)``."""
    trainer = spec.trainer
    return [(f"trainer.command[{i}]", text) for i, text in enumerate(trainer.command or [])] + [
        (f"trainer.env.{name}", text) for name, text in trainer.env.items()
    ]


def check_templates(spec: TrialSpec) -> None:
    """Every placeholder of the spec's trainer names a field of its trial file, or a ConfigError."""
    document = trial_document(spec, Path("OUTPUT_DIR"), "START", [])
    for where, text in templates(spec):
        fill(text, document, where)
