"""The package layout holds: every module imports on its own, and imports run one way.

The rule is written once, in ``MAY_IMPORT``: each part of ``harness`` lists the parts it may
import, and no two parts may import each other. A part may always import its own modules,
``harness.errors``, the ground floor ``harness.ground`` (the small tools every part shares) and
``harness.version`` (the release); no part imports the package root, which is the user's
shortcut to the results (it imports ``tracking``). The study database is ``store``: it owns the
harness's own tables and the statements on Optuna's, below every part that reads or writes them.
Deciding and drawing are two parts: ``decide`` turns records into verdicts and next looks (on
``stats``, the results frames of ``tracking`` and the study's design and trials of ``study``),
and ``report`` only draws and writes what ``decide`` worked out; the runner asks ``decide``
which looks of a sequential study are due, by a plain import. The engine is reached from outside
only through its spec and its tasks (the study checks task names), its warm-start key (the plan
says whether a study's warm start is cached; torch-free), its model sources (validate reads a GGUF
header or a model folder; torch-free) and, by a ``module:function`` string in
a child process, through the trainers' dispatcher (``harness.trainers.dispatch``: the builtin
loop of ``harness.engine.trial`` or a program under the trial-program contract; the trainers read
the engine and the study's metric ranges); ``harness reward-model train`` trains through
``harness.engine.reward_model`` (imported inside the command, so the CLI starts without torch),
and ``harness plan`` prices a real model's trial by ``harness.engine.cost_probe`` (the same way).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "harness"

#: part -> the parts it may import (besides itself and harness.errors)
MAY_IMPORT: dict[str, set[str]] = {
    "harness": {"tracking"},  # the root: the harness.results(...) shortcut
    "version": set(),
    "ground": set(),
    "store": set(),  # the study database: Optuna's tables and the harness's own; knows no other part
    "algorithms": set(),
    "stats": set(),
    "engine": {"algorithms", "stats.pass_at_k"},  # pass@k: the evaluation's metric, one implementation
    "study": {
        "algorithms",
        "engine.spec",
        "engine.tasks",
        "engine.warmstart_key",
        "engine.model_source",  # validate reads a GGUF header or a model folder (torch-free)
        "engine.vllm",  # validate checks the vLLM environment of rollout.backend vllm (torch-free)
        "engine.trainer_config",
        "engine.rollout_config",  # the rollout section of the spec, as trainer_config is the trainer section
        "engine.task_config",  # the task section of the spec
        "engine.trial_file",
        "trainers.trl_mapping",  # validate refuses a TRL arm's parts TRL lacks (pure: no TRL import)
        "stats.forecast_needs",  # validate warns of compute looks too early to forecast (pure constants)
    },
    "tracking": {"study", "engine.spec", "store", "stats.pass_at_k"},  # pass@k of a judged table's samples
    "decide": {"stats", "tracking", "study", "store"},  # store: a study database that cannot be read
    "runner": {"decide", "study", "tracking", "store", "engine.spec", "trainers.trial_dir"},
    # a program trial: the engine's policy, evaluator, trial file and metric ranges
    "trainers": {"algorithms", "engine"},  # algorithms: the TRL mapping reads the arm's parts
    "report": {"decide", "tracking"},  # tracking: the report is attached to the study's MLflow run
    "evallogs": set(),  # evaluation tools' logs, read into per-sample rows
    # engine.reward_model: `harness reward-model train` trains in its own process (imported lazily, in the command)
    "cli": {
        "algorithms",
        "decide",
        "engine.spec",
        "engine.task_config",  # `harness reward-model train`: the learned reward a task names
        "engine.reward_model",
        "engine.model_source",  # `harness prepare-model`: the GGUF source it names
        "engine.model_prepare",  # `harness prepare-model`: its conversion into the cache, in the command
        "evallogs",  # `harness decide` on an evaluation tool's logs
        "engine.cost_probe",  # `harness plan` of a real model: its trial's costs, probed (imported in the command)
        "trainers.dispatch",  # `harness trial`: one trial in this process, by its trainer
        "report",
        "runner",
        "study",
        "stats",
        "tracking",
    },
}


def module_name(path: Path) -> str:
    parts = path.relative_to(HARNESS.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    """``harness.runner.pool`` -> ``runner``; ``harness.errors`` -> ``errors``; the root -> ``harness``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "harness"


def allowed(importer: str, imported: str) -> bool:
    here, there = part_of(importer), part_of(imported)
    if there in (here, "errors", "ground", "version"):
        return True
    targets = MAY_IMPORT[here]
    sub = ".".join(imported.split(".")[1:3])  # e.g. engine.spec
    return there in targets or any(sub == t or sub.startswith(t + ".") for t in targets if "." in t)


def harness_imports(path: Path) -> list[tuple[int, str]]:
    """Every ``harness`` module ``path`` imports, at any depth (function-level imports count)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "harness"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:  # noqa: SIM102 - reads as the rule
            if node.module.split(".")[0] == "harness":
                # `from harness.runner import queue` imports harness.runner.queue
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    where = HARNESS.parent / Path(*full.split("."))
                    is_module = where.with_suffix(".py").exists() or (where / "__init__.py").exists()
                    out.append((node.lineno, full if is_module else node.module))
    return out


MODULES = sorted(HARNESS.rglob("*.py"))


def test_every_part_is_listed_in_the_rule():
    parts = {part_of(module_name(p)) for p in MODULES} - {"errors"}
    assert parts == set(MAY_IMPORT)


def test_imports_run_one_way():
    offenders = [
        f"{module_name(path)}:{line} imports {target}"
        for path in MODULES
        for line, target in harness_imports(path)
        if not allowed(module_name(path), target)
    ]
    assert offenders == []


def test_the_rule_catches_a_backward_import():
    assert not allowed("harness.tracking.records", "harness.runner.queue.jobs")
    assert not allowed("harness.study.load", "harness.engine.rollout")
    assert not allowed("harness.stats.compare", "harness.report.tables")
    assert not allowed("harness.decide.analysis", "harness.report.tables")  # deciding never draws
    assert not allowed("harness.study.expand", "harness.decide.sequential.pools")  # decide reads the study
    assert allowed("harness.report.tables", "harness.decide.analysis")
    assert allowed("harness.runner.looks", "harness.decide.sequential.schedule")
    assert allowed("harness.cli.report_cmds", "harness.report.figures")  # the drawing, reached from the CLI
    assert allowed("harness.study.load", "harness.engine.spec")
    assert allowed("harness.runner.worker", "harness.tracking.records")
    assert not allowed("harness.trainers.handed_scores", "harness.study.schema")  # study reads trainers, not back
    assert not allowed("harness.tracking.records", "harness")  # the root imports tracking
    assert allowed("harness.tracking.records", "harness.version")
    assert not allowed("harness.store.records", "harness.tracking.records")  # the store knows rows, not records
    assert allowed("harness.tracking.shared_records", "harness.store.records")


def _parts(targets: set[str]) -> set[str]:
    return {t.split(".")[0] for t in targets}


def test_no_two_parts_may_import_each_other():
    """An arrow each way between two parts is a loop waiting for its first import."""
    both = {
        tuple(sorted((here, there)))
        for here, targets in MAY_IMPORT.items()
        for there in _parts(targets)
        if here in _parts(MAY_IMPORT.get(there, set()))
    }
    assert sorted(both) == []


#: entry points a trial's child process imports by a ``module:function`` string (the process boundary)
CHILD_ENTRY_POINTS = {"harness.trainers.dispatch", "harness.engine.seed_check"}
DOTTED = re.compile(r"(harness(?:\.\w+)+):[\w.]+")


def test_no_module_attr_string_crosses_a_layer():
    """A ``module:attr`` string of the harness's own is no way round the rule: it names a module
    its holder may import anyway, or a child process's entry point."""
    offenders = [
        f"{module_name(path)}:{node.lineno} names {node.value!r}"
        for path in MODULES
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (found := DOTTED.fullmatch(node.value))
        and found.group(1) not in CHILD_ENTRY_POINTS
        and not allowed(module_name(path), found.group(1))
    ]
    assert offenders == []


def test_no_module_shadows_the_standard_library():
    stdlib = set(sys.stdlib_module_names)
    assert [p for p in MODULES if p.stem in stdlib and p.stem != "__init__"] == []


@pytest.mark.slow
def test_every_module_imports_first_in_a_fresh_interpreter():
    """Import each module with no other harness module loaded: a cycle fails here whichever
    module a process happens to import first. One interpreter, harness modules dropped between."""
    names = [module_name(p) for p in MODULES]
    script = (
        "import importlib, sys\n"
        f"failed = []\nfor name in {names!r}:\n"
        "    for key in [k for k in sys.modules if k == 'harness' or k.startswith('harness.')]:\n"
        "        del sys.modules[key]\n"
        "    try:\n        importlib.import_module(name)\n"
        "    except Exception as err:\n        failed.append(f'{name}: {type(err).__name__}: {err}')\n"
        "print('\\n'.join(failed))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def import_cycles() -> list[list[str]]:
    """Every cycle of harness modules importing each other, each once (as its modules, first one
    last too). Imports at any depth count: inside a function or under ``TYPE_CHECKING``, a cycle
    is still two modules that each need the other."""
    graph = {module_name(p): {t for _, t in harness_imports(p)} for p in MODULES}
    cycles, done = [], set()

    def walk(module: str, path: list[str]) -> None:
        for target in sorted(graph.get(module, ())):
            if target in path:
                cycle = path[path.index(target) :]
                start = cycle.index(min(cycle))
                found = cycle[start:] + cycle[:start]
                if found not in cycles:
                    cycles.append(found)
            elif target not in done:
                walk(target, [*path, target])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            walk(module, [module])
    return [[*c, c[0]] for c in cycles]


def test_no_harness_modules_import_each_other_in_a_circle():
    assert [" -> ".join(c) for c in import_cycles()] == []
