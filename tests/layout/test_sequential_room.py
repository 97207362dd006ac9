"""Sequential decisions live in one package: ``harness.decide.sequential``. The runner reaches it
through its API only (what is due, the rule check), and the fixed rules' table is reached from
it through one module (or read by the results loader), so no other part fixes or reads a rule."""

from test_import_graph import MODULES, harness_imports, module_name

SEQUENTIAL = "harness.decide.sequential"
#: what the runner may ask: what is due (the schedule; a compute-look study's), whether the study file
#: keeps the rule, and a compute-look study's segments (each one's phase, all of them)
RUNNER_API = {
    f"{SEQUENTIAL}.schedule",
    f"{SEQUENTIAL}.compute_schedule",
    f"{SEQUENTIAL}.versions",
    f"{SEQUENTIAL}.segments",
}
#: who may reach the fixed rules' table: the package's one door, and the results loader (it
#: hands the stored versions to every reader with the study's meta)
RULE_TABLE_READERS = {f"{SEQUENTIAL}.rule_store", "harness.tracking.results"}


def imports_of(prefix: str) -> dict[str, set[str]]:
    """module -> the harness modules it imports that start with ``prefix``."""
    found = {module_name(p): {t for _, t in harness_imports(p) if t.startswith(prefix)} for p in MODULES}
    return {m: targets for m, targets in found.items() if targets}


def test_the_runner_asks_the_sequential_package_through_its_api_only():
    runner = {m: t for m, t in imports_of(SEQUENTIAL).items() if m.startswith("harness.runner")}
    assert runner, "the runner asks the sequential package what is due"
    assert {m: t - RUNNER_API for m, t in runner.items() if t - RUNNER_API} == {}


def test_only_the_packages_door_reaches_the_fixed_rules_table():
    readers = set(imports_of("harness.store.rules"))
    assert f"{SEQUENTIAL}.rule_store" in readers and readers <= RULE_TABLE_READERS
