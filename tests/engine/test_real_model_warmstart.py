"""The warm start on a real BPE chat model (SmolLM2-135M-Instruct from its GGUF package): its
examples are the chat template's prompt with the generation prompt, then the answer and the
template's end-of-turn token; no character is lost on the way; the entry is built once and then
loaded from the cache."""

from __future__ import annotations

import pytest

from harness.algorithms import resolve_algorithm
from harness.engine.spec import TrialSpec
from harness.engine.tasks import build_task
from harness.engine.warmstart import _sft_example, load_policy

pytestmark = pytest.mark.slow

GENERATION_PROMPT = "<|im_start|>assistant\n"


def _spec(smollm2) -> TrialSpec:
    return TrialSpec(
        arm="grpo",
        algorithm=resolve_algorithm("grpo"),
        cache_dir=smollm2.cache_dir,
        task={"reasoning_gym": {"dataset": "chain_sum", "config": {"max_terms": 2}}, "n_train": 12, "n_eval": 4},
        model={"name": smollm2.name, "dtype": "float32", "lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
        warmstart={"steps": 2, "batch_size": 4, "lr": 1e-4, "target_accuracy": 1.0},
        train={"max_new_tokens": 8, "threads": 2},
    )


def test_the_warm_start_trains_on_the_chat_template_and_is_cached(smollm2, capfd):
    spec = _spec(smollm2)
    task = build_task(spec.task)
    lm, info, _ = load_policy(spec, task)
    assert "building" in capfd.readouterr().err
    assert info["warmstart/steps"] == 2

    tok = lm.tokenizer
    assert tok.eos_token == "<|im_end|>"
    for item in task.train:
        prompt, target, mask = _sft_example(lm, task, item, None)
        shown = tok.decode(prompt)
        assert shown.endswith(GENERATION_PROMPT) and item.prompt in shown  # the whole prompt, then the turn
        assert target[-1] == tok.eos_token_id and len(mask) == len(target)
        assert tok.decode(target[:-1]) == item.target  # BPE loses no character of "<answer>-4</answer>"

    again, info_again, _ = load_policy(spec, task)
    assert "building" not in capfd.readouterr().err  # the checked cache entry, loaded as it is
    assert info_again == info
    assert again.use_chat_template
