"""The placebo arm trains on its rewards shuffled across the batch: same mean, no link to the text."""

import torch

from harness.algorithms import resolve_algorithm
from harness.engine.generation import Generation
from harness.engine.learner import Learner, training_scores
from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer
from harness.engine.spec import ModelConfig, TrainConfig
from harness.engine.tasks.base import Item, Task


def learner(placebo: bool, seed: int = 0) -> Learner:
    tokenizer = char_tokenizer("0123456789+=")
    model = build_tiny_model(ModelConfig(), len(tokenizer), tokenizer, seed=0)
    lm = LoadedModel(model, tokenizer, torch.device("cpu"), use_chat_template=False)
    return Learner(
        lm=lm,
        reference=None,
        critic=None,
        optimizer=None,
        algorithm=resolve_algorithm("grpo", {"group_size": 4}),
        train=TrainConfig(placebo_reward=placebo),
        generator=torch.Generator().manual_seed(seed),
    )


ITEMS = [Item(prompt=f"{i}+1=", answer=str(i + 1)) for i in range(4)]
COMPLETIONS = [str(i + 1) if j % 2 == 0 else "x" for i in range(4) for j in range(4)]


def exact(item, text):
    return float(text == item.answer)


TASK = Task("toy", (), (), exact)
GENERATION = Generation(rollout=None, texts=COMPLETIONS)


def trained_on(learner_):
    values, _ = training_scores(learner_, TASK, ITEMS, GENERATION)
    return values


def test_the_control_scores_each_completion():
    scores = trained_on(learner(False))
    assert scores.tolist() == [1.0, 0.0] * 8


def test_the_placebo_keeps_the_scores_but_not_their_order():
    shuffled = trained_on(learner(True))
    assert sorted(shuffled.tolist()) == sorted([1.0, 0.0] * 8)  # the same mean and spread
    assert shuffled.tolist() != [1.0, 0.0] * 8
    again = trained_on(learner(True))
    assert torch.equal(shuffled, again)  # seeded by the trial's generator
    assert not torch.equal(shuffled, trained_on(learner(True, seed=1)))
