"""SmolLM2's BPE tokenizer and ChatML template through the harness, on the real model prepared
from its GGUF file (``smollm2``: once a session, in a cache of its own).

The template's generation prompt is what the model continues; no character of a reasoning-gym
task is lost; and EOS (``<|im_end|>``, which is also this tokenizer's pad token) ends a
completion, is counted as its last token, never reaches the verifier, and is trained once by the
warm start, while the padding of the same id changes no row's tokens or log-probs."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from harness.engine.evaluation import item_rewards
from harness.engine.logprobs import completion_forward
from harness.engine.models import check_tokenizer, load_pretrained, lost_characters, task_tokenizer
from harness.engine.rollout import decode_completions, encode_prompts, sample_groups
from harness.engine.spec import ModelConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task
from harness.engine.tasks.coverage import task_texts
from harness.engine.warmstart import _sft_batch

pytestmark = pytest.mark.slow
pytest.importorskip("reasoning_gym", reason="the reasoning_gym task needs: pip install reasoning-gym")

GENERATION_PROMPT = "<|im_start|>assistant\n"
EOS = "<|im_end|>"
#: prompts of different lengths (left padding), each of which the model answers within the budget
OTHER_PROMPTS = ["Say only the word yes.", "What is 2+2? Answer with one number."]
BUDGET = 24


def _model_config(smollm2) -> ModelConfig:
    return ModelConfig(name=smollm2.name, dtype="float32", device="cpu")


@pytest.fixture(scope="module")
def lm(smollm2):
    return load_pretrained(smollm2.folder, _model_config(smollm2))


@pytest.fixture(scope="module")
def task():
    small = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 2}
    return build_task(TaskConfig(reasoning_gym={"dataset": "chain_sum", "config": small}, n_train=40, n_eval=8))


def _prompts(task) -> list[str]:
    return [item.prompt for item in task.eval[:2]] + OTHER_PROMPTS


def _greedy(lm, prompts: list[str], budget: int = BUDGET):
    return sample_groups(lm, prompts, 1, max_new_tokens=budget, temperature=1.0, generator=None, greedy=True)


@pytest.fixture(scope="module")
def together(lm, task):
    """The greedy completions of ``_prompts``, sampled as one left-padded batch."""
    return _greedy(lm, _prompts(task))


def test_this_tokenizer_pads_with_its_eos(lm):
    tok = lm.tokenizer
    assert tok.eos_token == EOS and tok.pad_token_id == tok.eos_token_id  # what the tests below guard
    assert lm.use_chat_template and tok.padding_side == "left"


def test_the_model_continues_the_templates_generation_prompt(lm, task):
    prompts = _prompts(task)
    ids, mask = encode_prompts(lm, prompts)
    assert len({int(n) for n in mask.sum(1)}) > 1  # different lengths: left-padded
    for prompt, row, real in zip(prompts, ids, mask.bool()):
        text = lm.format_prompt(prompt)
        assert text.endswith(f"<|im_start|>user\n{prompt}{EOS}\n{GENERATION_PROMPT}")
        tokens = row[real].tolist()
        assert lm.tokenizer.decode(tokens) == text  # what the model reads, to the character (no BOS added)


@pytest.fixture(scope="module")
def trial_tokenizer(smollm2, task):
    """The tokenizer as a trial loads it for its checks, from the prepared folder."""
    return task_tokenizer(_model_config(smollm2), task, smollm2.cache_dir)


@pytest.mark.parametrize(
    "dataset", ["chain_sum", "basic_arithmetic", "gsm_symbolic", "spell_backward", "caesar_cipher", "emoji_mystery"]
)
def test_no_character_of_a_reasoning_gym_task_is_lost(smollm2, trial_tokenizer, dataset):
    task = build_task(TaskConfig(reasoning_gym={"dataset": dataset}, n_train=40, n_eval=10))
    config, tok = _model_config(smollm2), trial_tokenizer
    texts = task_texts(task)
    for text in texts:
        assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    assert lost_characters(tok, texts) == ([], 0.0)
    check_tokenizer(config, task, tok)  # the trial's refusal has nothing to refuse


def test_a_completion_ends_at_eos_which_is_counted_once_and_never_decoded(lm, task, together):
    eos, prompts, rollout = lm.tokenizer.eos_token_id, _prompts(task), together
    texts = decode_completions(lm, rollout)
    lengths = rollout.completion_mask.sum(1).long().tolist()
    assert max(lengths) < BUDGET and min(lengths) < max(lengths)  # every row stopped itself, at different lengths
    assert not rollout.cut_off(eos).any()
    for row, n, text in zip(range(len(prompts)), lengths, texts):
        tokens = rollout.completion_ids[row].tolist()
        assert tokens[n - 1] == eos and eos not in tokens[: n - 1]  # EOS is the last counted token, once
        assert rollout.completion_mask[row, :n].eq(1).all() and rollout.completion_mask[row, n:].eq(0).all()
        assert rollout.logprobs[row, n - 1] < 0 and rollout.logprobs[row, n:].eq(0).all()
        assert tokens[n:] == [lm.tokenizer.pad_token_id] * (len(tokens) - n)  # the padding: the same id, masked
        assert text == lm.tokenizer.decode(tokens[: n - 1]) and EOS not in text and text.strip()

    cut = _greedy(lm, prompts, budget=2)
    assert cut.cut_off(eos).all() and cut.completion_mask.eq(1).all()  # the budget, not EOS, ended these


def test_the_verifier_reads_the_completion_without_eos(lm, task):
    seen: list[str] = []

    def recording(item, completion: str) -> float:
        seen.append(completion)
        return task.reward(item, completion)

    items = list(task.eval[:2])
    scores = item_rewards(lm, replace(task, reward=recording), items, samples=1, max_new_tokens=BUDGET, greedy=True)
    assert seen == decode_completions(lm, _greedy(lm, [i.prompt for i in items]))
    assert not any(EOS in text or "<|im_start|>" in text for text in seen)
    assert [s for (s,) in scores] == [task.reward(i, text) for i, text in zip(items, seen)]


def test_padding_with_the_eos_id_changes_no_row(lm, task, together):
    for row, prompt in enumerate(_prompts(task)):
        alone = _greedy(lm, [prompt])
        n = int(alone.completion_mask.sum())
        assert together.completion_ids[row, :n].tolist() == alone.completion_ids[0, :n].tolist()
        assert together.completion_mask[row].sum() == n
        torch.testing.assert_close(together.logprobs[row, :n], alone.logprobs[0, :n], atol=1e-4, rtol=0)
    with torch.no_grad():  # the training pass reads the same tokens, EOS included, and no padding
        recomputed = completion_forward(lm.model, together, temperature=1.0).logprobs
    torch.testing.assert_close(recomputed, together.logprobs, atol=1e-4, rtol=0)
    assert recomputed[together.completion_mask == 0].eq(0).all()


def test_the_warm_start_trains_each_target_and_one_eos_but_no_padding(lm, task):
    items = sorted(task.train, key=lambda i: len(i.answer))
    items = [items[0], items[-1]]  # targets of different lengths: the shorter one is right-padded
    ids, attention, loss_mask = _sft_batch(lm, task, items)
    eos = lm.tokenizer.eos_token_id
    for item, row, real, trained in zip(items, ids, attention.bool(), loss_mask.bool()):
        assert lm.tokenizer.decode(row[trained]) == item.target + EOS  # the target, then EOS once
        assert lm.tokenizer.decode(row[real & ~trained]) == lm.format_prompt(item.prompt)
        assert row[~real].eq(eos).all() and not trained[~real].any()  # padding: the EOS id, neither read nor trained
    assert (~attention.bool()).any()
