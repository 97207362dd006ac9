"""The path real users take: a model folder with its tokenizer (and chat template), LoRA through
peft, and a GSM8K-style JSONL task scored by its boxed answer. The model is tiny and saved to a
temporary folder, since nothing can be downloaded here."""

import json
import string

import pytest
import torch

from harness.algorithms import resolve_algorithm
from harness.engine.models import build_tiny_model, char_tokenizer, load_pretrained
from harness.engine.reference import Reference
from harness.engine.spec import ModelConfig, TrialSpec
from harness.engine.trial import run_trial
from harness.errors import ConfigError

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-chat-model")
    tokenizer = char_tokenizer(string.printable.strip() + " ")
    tokenizer.chat_template = CHAT_TEMPLATE
    config = ModelConfig(tiny={"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64})
    build_tiny_model(config, len(tokenizer), tokenizer, seed=0).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def gsm_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "gsm.jsonl"
    rows = [
        {"question": f"Tom has {i} apples and buys 2. How many?", "answer": f"{i}+2={i + 2} #### {i + 2}"}
        for i in range(40)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


def _spec(model_dir, gsm_file, cache_dir, lora=True, warm_steps=0, algorithm="grpo"):
    return TrialSpec(
        arm=algorithm,
        algorithm=resolve_algorithm(algorithm, {"group_size": 2}),
        model={"name": model_dir, "lora": {"r": 4, "alpha": 8} if lora else None},
        task={"name": "gsm8k_jsonl", "path": gsm_file, "n_train": 30, "n_eval": 4},
        warmstart={"enabled": warm_steps > 0, "steps": warm_steps, "batch_size": 4},
        train={"steps": 2, "prompts_per_step": 2, "max_new_tokens": 6, "eval_every": 0, "eval_samples": 1},
        cache_dir=cache_dir,
    )


def test_loading_a_model_folder_uses_its_chat_template(model_dir):
    lm = load_pretrained(model_dir, ModelConfig(name=model_dir))
    assert lm.use_chat_template
    assert lm.format_prompt("2+2?") == "<|user|>2+2?<|assistant|>"
    assert lm.tokenizer.padding_side == "left"
    plain = load_pretrained(model_dir, ModelConfig(name=model_dir, chat_template=False))
    assert plain.format_prompt("2+2?") == "2+2?"


def test_lora_trains_only_the_adapter_and_the_reference_is_the_base(model_dir):
    lm = load_pretrained(model_dir, ModelConfig(name=model_dir, lora={"r": 4, "alpha": 8}))
    trainable = [n for n, p in lm.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    reference = Reference(lm.model)
    assert reference._model is lm.model  # no copy: the adapter is switched off instead


def test_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot load it"):
        load_pretrained(str(tmp_path / "nope"), ModelConfig(name=str(tmp_path / "nope")))


@pytest.mark.parametrize("lora", [True, False])
def test_trial_on_a_model_folder_with_a_jsonl_task(model_dir, gsm_file, cache_dir, lora):
    result = run_trial(_spec(model_dir, gsm_file, cache_dir, lora=lora))
    assert result.status == "completed"
    assert {"eval/accuracy", "train/kl_ref", "train/loss"} <= set(result.final)


def test_warm_start_of_a_lora_model_is_merged_and_cached(model_dir, gsm_file, cache_dir):
    from pathlib import Path

    from harness.engine.warmstart_key import WarmStartInputs, cache_key

    spec = _spec(model_dir, gsm_file, cache_dir, warm_steps=3)
    result = run_trial(spec)
    assert result.final["warmstart/steps"] == 3
    folder = Path(cache_dir) / "warmstart" / cache_key(WarmStartInputs.of(spec))
    assert (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file()
    assert not (folder / "adapter_config.json").exists(), "the adapter is merged into a full model"
    reloaded = load_pretrained(str(folder), spec.model)
    assert reloaded.use_chat_template  # the template travels with the cached tokenizer


def _adapter(lm) -> dict:
    return {name: p.detach().clone() for name, p in lm.model.named_parameters() if "lora_A" in name}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_lora_adapter_starts_from_its_seed_whatever_the_global_generator_holds(model_dir):
    config = ModelConfig(name=model_dir, lora={"r": 4, "alpha": 8})
    first = _adapter(load_pretrained(model_dir, config, adapter_seed=3))
    torch.rand(1000)  # anything drawn before must not change the adapter
    state = torch.get_rng_state()
    again = _adapter(load_pretrained(model_dir, config, adapter_seed=3))
    assert torch.equal(torch.get_rng_state(), state)  # and the load leaves the generator as it was
    other = _adapter(load_pretrained(model_dir, config, adapter_seed=4))
    assert first and _same(first, again)
    assert all(not torch.equal(first[k], other[k]) for k in first)


def test_a_trial_gets_the_adapter_of_its_seed_whether_it_built_the_warm_start_or_found_it(
    model_dir, gsm_file, cache_dir
):
    from harness.engine.tasks import build_task
    from harness.engine.warmstart import load_policy

    spec = _spec(model_dir, gsm_file, cache_dir, warm_steps=2)
    task = build_task(spec.task, cache_dir=spec.cache_dir)
    built = _adapter(load_policy(spec, task)[0])  # builds the warm start (SFT draws from the generator)
    found = _adapter(load_policy(spec, task)[0])  # finds it cached
    other_seed = _adapter(load_policy(spec.model_copy(update={"seed": spec.seed + 1}), task)[0])
    assert built and _same(built, found)
    assert all(not torch.equal(built[k], other_seed[k]) for k in built)


def test_lora_on_the_tiny_model_without_a_warm_start_trains_the_adapter_only(cache_dir):
    from harness.engine.tasks import build_task
    from harness.engine.warmstart import load_policy

    spec = TrialSpec(
        arm="grpo",
        algorithm=resolve_algorithm("grpo", {"group_size": 2}),
        model={"lora": {"r": 4, "alpha": 8}},
        warmstart={"enabled": False},
        cache_dir=cache_dir,
    )
    lm = load_policy(spec, build_task(spec.task))[0]
    trainable = [n for n, p in lm.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert _same(_adapter(lm), _adapter(load_policy(spec, build_task(spec.task))[0]))
