"""Hostile or absurd study files fail fast, in bounded memory, with one line and exit code 2.

Each case was once a leak, a hang or a crash: an included ``/etc/shadow`` echoed in the error;
a 560-byte alias bomb (67 s, 1.7 GB); ``task.max_digits: 4`` enumerating 10^8 prompts (23 GB);
an include chain 1,000 deep (RecursionError); ``/dev/zero`` (MemoryError) and a named pipe
(hangs forever) as the study path.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task
from harness.engine.tasks.synthetic import MAX_DIGITS, MAX_PROMPTS, prompt_space
from harness.errors import ConfigError
from harness.ground.exit_codes import EXIT_BAD_INPUT
from harness.study.load import (
    MAX_INCLUDE_DEPTH,
    MAX_STUDY_BYTES,
    MAX_STUDY_FILES,
    MAX_YAML_ALIASES,
    MAX_YAML_DEPTH,
    check_task,
    load_study,
    read_study_data,
)

STUDY = """\
name: s
control: grpo
seeds: 3
arms:
  - {name: grpo, algorithm: grpo}
  - {name: rloo, algorithm: rloo}
"""

#: Stands in for /etc/shadow: its first line parses as a YAML mapping with one odd key.
SHADOW = "root:$6$SECRETHASH$xyz:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n"


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    """Errors name files relative to the working folder: make that tmp_path."""
    monkeypatch.chdir(tmp_path)


def within(seconds: float, fn, *args):
    """``fn(*args)``'s result or exception, failing the test if it takes longer than ``seconds``
    (in a daemon thread, so a call that would hang forever cannot hang the suite)."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as err:  # noqa: BLE001 (handed back to the test)
            box["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    box["seconds"] = time.monotonic() - start
    return box


def fails_within(seconds: float, path: Path) -> str:
    box = within(seconds, load_study, path)
    assert isinstance(box.get("error"), ConfigError), box
    message = str(box["error"])
    assert "\n" not in message
    return message


def validate(path: Path | str, seconds: float = 30):
    """``harness validate PATH`` in-process: (exit code, stdout, stderr)."""
    box = within(seconds, CliRunner().invoke, app, ["validate", str(path)])
    result = box["value"]
    return result.exit_code, result.stdout, result.stderr


def assert_one_line_error(path: Path | str, *expected: str, seconds: float = 30) -> str:
    code, out, err = validate(path, seconds)
    assert code == EXIT_BAD_INPUT, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for text in expected:
        assert text in lines[0]
    assert out == ""
    return lines[0]


def study_with(tmp_path: Path, head: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(head + STUDY)
    return path


# --------------------------------------------------------------------------------------------
# 1. an included file's content never reaches the error


NOT_STUDY_FILES = {
    "shadow": SHADOW.encode(),
    "plain_text": b"SECRETHASH is the password\nsecond line\n",
    "a_list": b"- SECRETHASH\n- two\n",
    "bad_yaml": b"key: [unclosed SECRETHASH\n",
    "undefined_alias": b"name: *SECRETHASH\n",
    "python_tag": b"name: !!python/name:SECRETHASH ''\n",
    "duplicate_key": b"seeds: 1\nseeds: SECRETHASH\n",
    "other_keys": b"seeds: 3\nSECRETHASH: 1\n",
    "int_key": b"1: SECRETHASH\n",
    "not_utf8": b"name: \xff\xfeSECRETHASH\n",
    "empty": b"",
}


@pytest.mark.parametrize("kind", sorted(NOT_STUDY_FILES))
def test_an_included_non_study_file_is_named_never_echoed(tmp_path, kind):
    (tmp_path / "secret.txt").write_bytes(NOT_STUDY_FILES[kind])
    path = study_with(tmp_path, "include: secret.txt\n")
    message = fails_within(5, path)
    assert message.startswith("include[0]: secret.txt (from s.yaml): "), message
    assert "SECRETHASH" not in message and "root" not in message and "password" not in message
    line = assert_one_line_error(path, "include[0]: secret.txt (from s.yaml): ")
    assert "SECRETHASH" not in line


def test_shadow_like_include_names_the_line_and_what_to_do(tmp_path):
    (tmp_path / "shadow").write_text(SHADOW)
    path = study_with(tmp_path, "include: [shadow]\n")
    message = fails_within(5, path)
    assert message.startswith("include[0]: shadow (from s.yaml): not a study file (line 1 holds ")
    assert "include only YAML files of study fields" in message


def test_the_second_include_and_a_nested_include_are_named_by_their_place(tmp_path):
    (tmp_path / "base.yaml").write_text("seeds: 3\n")
    (tmp_path / "mid.yaml").write_text("include: [base.yaml, shadow]\n")
    (tmp_path / "shadow").write_text(SHADOW)
    path = study_with(tmp_path, "include: [base.yaml, mid.yaml]\n")
    message = fails_within(5, path)
    assert message.startswith("include[1]: shadow (from mid.yaml): not a study file"), message
    assert "SECRETHASH" not in message


def test_an_unreadable_include_is_named_with_the_reason(tmp_path, monkeypatch):
    (tmp_path / "locked.yaml").write_text("seeds: 3\n")
    path = study_with(tmp_path, "include: locked.yaml\n")
    real_open = os.open

    def denied(file, *args, **kwargs):
        if str(file).endswith("locked.yaml"):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    message = fails_within(5, path)
    assert message == "include[0]: locked.yaml (from s.yaml): cannot read (Permission denied)"


def test_a_missing_include_names_its_place(tmp_path):
    path = study_with(tmp_path, "include: [nope.yaml]\n")
    assert fails_within(5, path) == "include[0]: nope.yaml (from s.yaml): file not found"


def test_an_include_cycle_names_the_include_that_closes_it(tmp_path):
    (tmp_path / "b.yaml").write_text("include: [s.yaml]\n")
    path = study_with(tmp_path, "include: b.yaml\n")
    assert fails_within(5, path) == (
        "include[0]: s.yaml (from b.yaml): include cycle s.yaml -> b.yaml -> s.yaml; remove one of these includes"
    )


def test_study_files_may_still_be_included(tmp_path):
    (tmp_path / "base.yaml").write_text("seeds: 4\ntrain: {steps: 7}\n<<: {direction: maximize}\n")
    study = load_study(study_with(tmp_path, "include: base.yaml\n"))
    assert study.train.steps == 7


# --------------------------------------------------------------------------------------------
# 2. alias bombs and other YAML that expands or nests without bound


def billion_laughs(levels: int = 9) -> str:
    """The classic: each level lists the one before nine times; 9 levels, 9^9 values, ~560 bytes."""
    lines = ["  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "grid:\n" + "\n".join(lines) + "\n"


def test_billion_laughs_is_refused_in_milliseconds(tmp_path):
    text = billion_laughs()
    assert 500 < len(text) < 600
    path = study_with(tmp_path, text)
    box = within(10, load_study, path)
    message = str(box["error"])
    assert "expands to more than 100,000 YAML values" in message and box["seconds"] < 2
    assert "a study and its includes may hold at most 100,000" in message
    assert_one_line_error(path, "s.yaml: expands to more than 100,000 YAML values", seconds=10)


def test_more_than_the_alias_limit_is_refused(tmp_path):
    aliases = ", ".join(["*a"] * (MAX_YAML_ALIASES + 1))
    path = tmp_path / "many.yaml"
    path.write_text(f"x: &a 1\ny: [{aliases}]\n")
    with pytest.raises(ConfigError, match=f"more than {MAX_YAML_ALIASES} YAML aliases") as info:
        read_study_data(path)
    assert f"at most {MAX_YAML_ALIASES}" in str(info.value)
    path.write_text(f"x: &a 1\ny: [{', '.join(['*a'] * MAX_YAML_ALIASES)}]\n")
    assert len(read_study_data(path)["y"]) == MAX_YAML_ALIASES


def test_aliases_are_counted_across_includes(tmp_path):
    half = MAX_YAML_ALIASES // 2 + 1
    (tmp_path / "base.yaml").write_text(f"description: &d x\ngrid: {{lr: [{', '.join(['*d'] * half)}]}}\n")
    path = tmp_path / "s.yaml"
    path.write_text(f"include: base.yaml\nname: &n s\narms: [{', '.join(['*n'] * half)}]\n")
    with pytest.raises(ConfigError, match="YAML aliases"):
        read_study_data(path)


def test_a_recursive_alias_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("grid: &g {lr: [*g]}\n")
    with pytest.raises(ConfigError, match="refers to a value that contains it"):
        read_study_data(path)


@pytest.mark.parametrize("depth", [MAX_YAML_DEPTH + 1, 100_000])
def test_deep_nesting_is_refused(tmp_path, depth):
    path = tmp_path / "deep.yaml"
    path.write_text("x: " + "[" * depth + "]" * depth + "\n")
    box = within(10, read_study_data, path)
    assert f"nested more than {MAX_YAML_DEPTH} deep" in str(box["error"])


def test_nesting_up_to_the_limit_loads(tmp_path):
    path = tmp_path / "deep.yaml"
    depth = MAX_YAML_DEPTH - 1  # lists, inside the top-level mapping
    path.write_text("x: " + "[" * depth + "]" * depth + "\n")
    value, levels = read_study_data(path)["x"], 1
    while value:
        value, levels = value[0], levels + 1
    assert levels == depth


def test_a_file_over_the_size_limit_is_refused_and_one_at_it_loads(tmp_path):
    text = STUDY + "#" * (MAX_STUDY_BYTES - len(STUDY) - 1) + "\n"
    path = tmp_path / "big.yaml"
    path.write_text(text)
    assert path.stat().st_size == MAX_STUDY_BYTES
    assert load_study(path).name == "s"
    path.write_text(text + "\n")
    assert_one_line_error(path, "big.yaml: larger than 1,000,000 bytes, the most a study file may hold")
    (tmp_path / "s.yaml").write_text("include: big.yaml\n" + STUDY)
    assert_one_line_error(tmp_path / "s.yaml", "include[0]: big.yaml (from s.yaml): larger than 1,000,000")


# --------------------------------------------------------------------------------------------
# 3. synthetic task sizes are arithmetic, bounded, and the defaults unchanged


def test_prompt_spaces_are_counted_not_enumerated():
    assert prompt_space(TaskConfig(name="addition")) == 10**4
    assert prompt_space(TaskConfig(name="addition", min_digits=2, max_digits=2)) == 90**2
    assert prompt_space(TaskConfig(name="addition", max_digits=4)) == 10**8
    assert prompt_space(TaskConfig(name="addition", max_digits=MAX_DIGITS)) == 10 ** (2 * MAX_DIGITS)
    assert prompt_space(TaskConfig(name="sorting")) == 10**3 + 10**4
    assert prompt_space(TaskConfig(name="sorting", min_digits=3, max_digits=2)) == 0


@pytest.mark.parametrize("name", ["addition", "sorting"])
@pytest.mark.parametrize("max_digits", [4, 12, MAX_DIGITS])
def test_large_digit_counts_are_sampled_quickly(tmp_path, name, max_digits):
    path = study_with(tmp_path, f"task: {{name: {name}, max_digits: {max_digits}}}\n")
    box = within(30, lambda: check_task(load_study(path)))
    assert box["value"] == (2000, 128) and box["seconds"] < 10
    task = build_task(TaskConfig(name=name, max_digits=max_digits, n_train=300, n_eval=30))
    again = build_task(TaskConfig(name=name, max_digits=max_digits, n_train=300, n_eval=30))
    assert task.train == again.train and task.eval == again.eval
    assert len({i.prompt for i in (*task.train, *task.eval)}) == 330
    for item in task.train:
        assert task.reward(item, item.answer) == 1.0
        if name == "addition":
            a, b = item.prompt.rstrip("=").split("+")
            assert len(a) == len(b) == max_digits and item.answer == f"{int(a) + int(b):0{max_digits + 1}d}"


def test_validate_max_digits_4_is_fast(tmp_path):
    code, out, err = validate(study_with(tmp_path, "task: {max_digits: 4}\n"))
    assert code == 0, err
    assert "task addition: 2000 train / 128 held-out prompts" in out


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        (
            {"max_digits": MAX_DIGITS + 1},
            f"task.max_digits is {MAX_DIGITS + 1}; synthetic tasks take at most {MAX_DIGITS}",
        ),
        ({"name": "sorting", "max_digits": 10**9}, f"synthetic tasks take at most {MAX_DIGITS} digits"),
        ({"max_digits": 8, "n_train": 10**9}, f"a synthetic task gives at most {MAX_PROMPTS:,} in all"),
        ({"name": "sorting", "min_digits": 3}, "task.min_digits (3) is above task.max_digits (2)"),
        ({"min_digits": 3}, "task.min_digits (3) is above task.max_digits (2)"),
        ({"max_digits": 1, "n_train": 100}, "only 100 distinct prompts exist"),
        ({"name": "sorting", "max_digits": 1, "n_train": 1000}, "only 1000 distinct prompts exist"),
    ],
)
def test_impossible_or_unreasonable_task_sizes_are_one_line(tmp_path, task, expected):
    path = study_with(tmp_path, f"task: {json.dumps(task)}\n")
    line = assert_one_line_error(path, "error: task: ", expected, seconds=10)
    assert "Traceback" not in line


def _digest(task) -> str:
    data = [[(i.prompt, i.answer) for i in task.train], [(i.prompt, i.answer) for i in task.eval]]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


@pytest.mark.parametrize(
    ("config", "digest"),
    [  # computed with the tasks as they were before sizes were bounded: same prompts, same order
        ({"name": "addition"}, "7296d6affea4a072fa44c856164648489eb68e1438be9891dbb720d14d43be87"),
        ({"name": "sorting"}, "d1f0fe0567d30ce63359d564109815ea4870f1f96612c1ea5edcb89050a86e5a"),
        (
            {"name": "addition", "max_digits": 3, "n_train": 500, "n_eval": 50},
            "2f6af615b3a4b5e8260026712f4fdcdf2755f4b7f8a9131f6ab44d27bba76058",
        ),
    ],
)
def test_enumerated_tasks_are_unchanged(config, digest):
    assert _digest(build_task(TaskConfig(**config))) == digest


# --------------------------------------------------------------------------------------------
# 4. include chains


def chain(tmp_path: Path, depth: int) -> Path:
    """s.yaml includes f1.yaml includes ... f{depth}.yaml, which holds the seeds."""
    for i in range(1, depth + 1):
        body = f"include: f{i + 1}.yaml\n" if i < depth else "seeds: 4\n"
        (tmp_path / f"f{i}.yaml").write_text(body)
    path = tmp_path / "s.yaml"
    path.write_text("include: f1.yaml\n" + STUDY.replace("seeds: 3\n", ""))
    return path


def test_includes_up_to_the_depth_limit_load(tmp_path):
    assert load_study(chain(tmp_path, MAX_INCLUDE_DEPTH)).seeds == [0, 1, 2, 3]


@pytest.mark.parametrize("depth", [MAX_INCLUDE_DEPTH + 1, 1000])
def test_deeper_include_chains_are_one_line(tmp_path, depth):
    path = chain(tmp_path, depth)
    message = fails_within(10, path)
    expected = (
        f"include[0]: f{MAX_INCLUDE_DEPTH + 1}.yaml (from f{MAX_INCLUDE_DEPTH}.yaml): includes nest "
        f"more than {MAX_INCLUDE_DEPTH} deep (starting at s.yaml)"
    )
    assert message.startswith(expected), message
    assert_one_line_error(path, expected, seconds=10)


def test_include_fan_out_is_bounded(tmp_path):
    (tmp_path / "base.yaml").write_text("seeds: 3\n")
    (tmp_path / "wide.yaml").write_text(f"include: {json.dumps(['base.yaml'] * 9)}\n")
    path = tmp_path / "s.yaml"
    path.write_text(f"include: {json.dumps(['wide.yaml'] * 9)}\n" + STUDY)
    message = fails_within(10, path)
    assert f"a study may read at most {MAX_STUDY_FILES} files with its includes" in message


# --------------------------------------------------------------------------------------------
# 5. only regular files are read


def test_dev_zero_is_refused_before_reading():
    assert_one_line_error("/dev/zero", "/dev/zero: not a regular file (a character device)", seconds=10)


def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    assert_one_line_error(fifo, "pipe.yaml: not a regular file (a named pipe)", seconds=10)
    path = study_with(tmp_path, "include: pipe.yaml\n")
    assert_one_line_error(path, "include[0]: pipe.yaml (from s.yaml): not a regular file (a named pipe)", seconds=10)


def test_a_folder_is_refused(tmp_path):
    (tmp_path / "folder.yaml").mkdir()
    assert_one_line_error(tmp_path / "folder.yaml", "folder.yaml: not a regular file (a folder)")


def test_an_included_device_is_refused(tmp_path):
    path = study_with(tmp_path, "include: /dev/zero\n")
    assert_one_line_error(path, "include[0]: /dev/zero (from s.yaml): not a regular file (a character device)")


# --------------------------------------------------------------------------------------------
# 6. a task file's problems are validate's errors


def gsm_study(tmp_path: Path, rows: list, model: str = "tiny") -> Path:
    (tmp_path / "gsm.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return study_with(tmp_path, f"task: {{name: gsm8k_jsonl, path: gsm.jsonl}}\nmodel: {{name: {model}}}\n")


GSM_ROWS = [
    {"question": f"Tom has {i} apples and buys 2. How many?", "answer": f"{i}+2={i + 2} #### {i + 2}"}
    for i in range(20)
]


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("3+2=5 ####", "gsm.jsonl:3: the final answer after '####' is empty"),
        (None, "gsm.jsonl:3: 'answer' must be a non-empty string, not null"),
    ],
)
def test_validate_refuses_a_task_line_without_an_answer(tmp_path, answer, expected):
    """An empty or null answer made the reference '' or 'None', which \\boxed{} matched: validate
    passed a task whose dirty lines paid full reward."""
    rows = [*GSM_ROWS[:2], {"question": "Tom has 3 apples and buys 2. How many?", "answer": answer}, *GSM_ROWS[2:]]
    assert_one_line_error(gsm_study(tmp_path, rows, model="gpt2"), expected)


def test_validate_refuses_a_task_the_testbed_model_cannot_read(tmp_path):
    """GSM8K on the tiny character model passed validate, then every trial failed on characters
    its tokenizer cannot encode."""
    line = assert_one_line_error(gsm_study(tmp_path, GSM_ROWS), "the tokenizer of model 'tiny' cannot encode")
    assert "model.name" in line


def test_validate_leaves_a_real_models_tokenizer_to_the_trial(tmp_path):
    code, out, err = validate(gsm_study(tmp_path, GSM_ROWS, model="gpt2"))
    assert code == 0 and out.startswith("ok: "), (out, err)


def test_validate_says_it_runs_the_code_a_study_names(tmp_path, monkeypatch):
    """A study's ``task.tools`` may name ``module:function``: validate imports that module and
    calls the factory (it checks the tool the factory makes), and its help says so."""
    marker = tmp_path / "ran"
    (tmp_path / "study_tool.py").write_text(
        "from pathlib import Path\n"
        "from harness.engine.tools import Tool\n"
        f"Path({str(marker)!r}).write_text('imported')\n"
        "def make(task):\n"
        "    return Tool('echo', 'echo', {'type': 'object'}, lambda arguments: 'x')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = study_with(tmp_path, "task: {name: addition, tools: ['study_tool:make']}\n")
    code, out, err = validate(path)
    assert code == 0 and marker.read_text() == "imported", (out, err)
    text = " ".join(CliRunner().invoke(app, ["validate", "--help"]).stdout.split())
    assert "validate imports the modules that task.tools and task.reward name as module:function" in text
    assert "calls each tool factory" in text and "Validate only study files whose code you trust" in text
