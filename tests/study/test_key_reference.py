"""The study-file reference: generated from the schema, committed as docs/study-reference.md and
kept in sync with it; its examples are valid studies; the real-model example validates and plans
against a tiny saved model."""

from __future__ import annotations

import json
import shutil
import string
from pathlib import Path

import pytest
import yaml
from cli_main import run_main

from harness.algorithms.config import CONFIG_TYPES
from harness.engine.models import build_tiny_model, char_tokenizer, load_pretrained
from harness.engine.spec import LoraConfig, ModelConfig, TinyModelConfig, TrainConfig, WarmStartConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks.jsonl import read_jsonl
from harness.study import key_reference
from harness.study.expand import expand
from harness.study.load import INCLUDE_MEANING, load_study
from harness.study.overrides import override_keys
from harness.study.schema import Study

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "study-reference.md"
EXAMPLE = REPO / "studies" / "real_model_example.yaml"
MODELS = {
    m.__name__: m
    for m in (
        TaskConfig,
        TinyModelConfig,
        LoraConfig,
        ModelConfig,
        WarmStartConfig,
        TrainConfig,
        *CONFIG_TYPES.values(),
    )
}


def by_path() -> dict[str, key_reference.Key]:
    return {key.path: key for key in key_reference.keys()}  # noqa: SIM118 - a function, not a dict


def test_the_committed_reference_is_the_generated_one():
    assert DOC.is_file(), f"{DOC} is missing: run `{key_reference.COMMAND}`"
    assert DOC.read_text(encoding="utf-8") == key_reference.markdown(), (
        f"docs/study-reference.md is out of date with the schema: run `{key_reference.COMMAND}`"
    )


def test_every_key_is_listed_with_a_type_a_reader_and_a_meaning():
    keys = by_path()
    expected = {"include", *Study.model_fields}
    expected |= {
        f"{section}.{field}"
        for section in ("task", "model", "warmstart", "train")
        for field in Study.model_fields[section].annotation.model_fields
    }
    expected |= {f"model.tiny.{f}" for f in TinyModelConfig.model_fields} | {
        f"model.lora.{f}" for f in LoraConfig.model_fields
    }
    expected |= {f"arms[].set.{k}" for k in override_keys() if not k.startswith("train.")}
    assert expected <= set(keys), sorted(expected - set(keys))
    blank = [k.path for k in keys.values() if not (k.type and k.read_by and k.meaning)]
    assert not blank, f"keys without a type, reader or meaning: {blank}"


def test_the_real_model_keys_say_what_they_take():
    keys = by_path()
    assert (keys["model.lora.r"].type, keys["model.lora.r"].default) == ("int > 0", 8)
    assert keys["model.lora.alpha"].default == 16
    assert keys["model.lora.target_modules"].type == "list of str | str"
    assert keys["model.lora.target_modules"].default == "all-linear"
    assert keys["model.lora"].type == "section | null" and keys["model.lora"].default is None
    assert (keys["model.chat_template"].type, keys["model.chat_template"].default) == ("auto | bool", "auto")
    assert keys["model.dtype"].type == "one of auto, float32, bfloat16, float16"
    assert keys["model.device"].type == "one of auto, cpu, cuda"
    assert keys["task.path"].type == "str | null" and "gsm8k_jsonl" in keys["task.path"].meaning
    assert "gsm8k_jsonl" in keys["task.name"].type
    assert keys["name"].required and keys["seeds"].required and not keys["grid"].required


def test_algorithm_keys_name_the_parts_that_read_them():
    keys = by_path()
    assert keys["arms[].set.lam"].read_by == "advantage=gae"
    assert keys["arms[].set.dual_clip"].read_by == "policy_loss=clipped"
    assert keys["arms[].set.dual_clip"].type == "float > 1 | null"
    assert keys["arms[].set.kl_coef"].read_by == "kl_placement=reward or kl_placement=loss"
    assert keys["arms[].set.lr"].read_by == "every algorithm"
    assert keys["arms[].set.whiten_advantages"].read_by == "every RL algorithm"
    assert keys["arms[].set.dpo_beta"].read_by == "DPO"
    assert keys["arms[].set.advantage"].type.startswith("one of group_zscore, ")


def test_each_meaning_is_the_description_on_its_field():
    """A meaning is written once, on the field that holds the value: the reference copies it."""
    keys = by_path()
    for model in MODELS.values():
        for field, info in model.model_fields.items():
            if field != "kind":  # an algorithm config's type tag, set by its preset, never by a study
                assert info.description, f"{model.__name__}.{field} has no Field description"
    assert keys["model.lora.r"].meaning == LoraConfig.model_fields["r"].description
    assert keys["arms[].set.lam"].meaning == CONFIG_TYPES["rl"].model_fields["lam"].description
    assert keys["train.steps"].meaning == TrainConfig.model_fields["steps"].description
    assert keys["include"].meaning == INCLUDE_MEANING


@pytest.mark.parametrize("name", sorted(key_reference.EXAMPLES))
def test_the_examples_in_the_reference_are_valid_studies(tmp_path, name):
    path = tmp_path / f"{name}.yaml"
    path.write_text(key_reference.EXAMPLES[name])
    study = load_study(path)
    assert key_reference.EXAMPLES[name] in key_reference.markdown()
    if name == "grid":
        assert len(study.conditions()) == 8
        assert "gives 8 conditions x 3 seeds: `grpo[eps_high=0.2,train.temperature=0.7]`" in key_reference.markdown()
    elif name == "rollout":
        specs = {spec.arm: spec.rollout for spec in expand(study)}
        assert {arm: (r.backend, r.max_staleness) for arm, r in specs.items()} == {
            "sync": ("vllm", 0),
            "stale2": ("vllm", 2),
            "in_process": ("hf", 0),
        }
    else:
        assert set(study.tuning.search_space) == {"lr", "train.temperature"}


def test_the_jsonl_line_shown_is_one_the_task_reads(tmp_path):
    path = tmp_path / "one.jsonl"
    path.write_text(key_reference.JSONL_LINE + "\n")
    (item,) = read_jsonl(str(path))
    assert item.answer == "5" and item.target.endswith("\\boxed{5}")


def test_harness_schema_prints_the_markdown_or_json(monkeypatch, capsys):
    code, out, _ = run_main(monkeypatch, capsys, "schema")
    assert code == 0 and out == key_reference.markdown()
    code, out, _ = run_main(monkeypatch, capsys, "schema", "--json")
    rows = {row["path"]: row for row in json.loads(out)}
    assert code == 0 and rows["model.lora.r"]["default"] == 8 and rows["task"]["default"]["name"] == "addition"
    assert set(rows) == set(by_path())


# ---- the real-model example, against a tiny saved model --------------------------------------


@pytest.fixture
def tiny_model_dir(tmp_path):
    """A tiny Llama and a character tokenizer with a chat template, saved as a model folder."""
    folder = tmp_path / "tiny-llama"
    tokenizer = char_tokenizer(string.printable.strip() + " ")
    tokenizer.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    config = ModelConfig(tiny={"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64})
    build_tiny_model(config, len(tokenizer), tokenizer, seed=0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def copy_task_files(root: Path) -> None:
    """The example's shipped sample task files, where it looks for them (relative to the working folder)."""
    shutil.copytree(EXAMPLE.parent / "data", root / "studies" / "data")


@pytest.mark.slow
def test_the_real_model_example_validates_and_plans_on_a_saved_model(tmp_path, tiny_model_dir, monkeypatch, capsys):
    data = yaml.safe_load(EXAMPLE.read_text())
    assert data["task"]["name"] == "gsm8k_jsonl" and data["model"]["lora"] and data["model"]["chat_template"]
    copy_task_files(Path.cwd())
    data["model"]["name"] = str(tiny_model_dir)
    copy = tmp_path / "real_model_example.yaml"
    copy.write_text(yaml.safe_dump(data, sort_keys=False))

    code, out, err = run_main(monkeypatch, capsys, "validate", str(copy))
    assert code == 0, err
    assert "task gsm8k_jsonl: 24 train / 8 held-out prompts" in out and str(tiny_model_dir) in out
    code, out, err = run_main(monkeypatch, capsys, "plan", str(copy))
    assert code == 0, err
    assert "grpo (control)" in out and "dr_grpo" in out

    lm = load_pretrained(str(tiny_model_dir), load_study(copy).model)
    trainable = [name for name, p in lm.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable), "the LoRA target modules exist in a Llama"
    assert lm.use_chat_template
