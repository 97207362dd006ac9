"""Multi-turn tool-calling episodes: what the sampler writes into a rollout (policy turns, the
tools' tokens between them, the masks), the turn limit, finished episodes waiting, the warm
start's demonstrations, and an RL step on episodes with the tool mask on and off."""

from __future__ import annotations

import pytest
import torch

from harness.algorithms import resolve_algorithm
from harness.engine import episodes as episodes_module
from harness.engine.episodes import demonstration, format_of, sample_episodes
from harness.engine.episodes.turn_format import RESPONSE_CLOSE, RESPONSE_OPEN
from harness.engine.learner import Learner, make_optimizer
from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer
from harness.engine.reference import Reference
from harness.engine.rl_step import rl_step
from harness.engine.spec import ModelConfig, TinyModelConfig, TrainConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import with_tools
from harness.engine.tasks.base import Item, Task
from harness.engine.tasks.rewards import exact_match
from harness.engine.tasks.tool_tasks import TOOL_ALPHABET, call_text
from harness.engine.warmstart import _sft_batch

pytestmark = pytest.mark.slow  # the module's model memorises its demonstrations first (about 15 s)

CALL = call_text("calculator", {"expression": "12*3"})
ITEMS = (Item("12*3=", "36", turns=(CALL, "36")), Item("7*2=", "14", turns=("14",)))


def tool_task(**config) -> Task:
    task = Task("toy", ITEMS, (Item("9*9=", "81"),), exact_match, alphabet=TOOL_ALPHABET)
    return with_tools(task, TaskConfig(tools=["calculator"], describe_tools=False, **config))


@pytest.fixture(scope="module")
def lm() -> LoadedModel:
    """A tiny model that has memorised the two demonstrations: it calls the calculator on 12*3
    and answers 7*2 directly."""
    torch.manual_seed(0)
    tok = char_tokenizer(TOOL_ALPHABET)
    config = ModelConfig(tiny=TinyModelConfig(hidden_size=48, layers=2, heads=4, intermediate_size=96))
    model = build_tiny_model(config, len(tok), tok, seed=0)
    lm = LoadedModel(model, tok, torch.device("cpu"), use_chat_template=False)
    task = tool_task()
    optimizer = make_optimizer([{"params": list(model.parameters()), "lr": 5e-3}], lm.device)
    ids, attention, loss_mask = _sft_batch(lm, task, list(ITEMS))
    for _ in range(300):
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1]
        loss = (
            torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none") * loss_mask[:, 1:]
        ).sum() / loss_mask[:, 1:].sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return lm


def greedy(lm, task, prompts, group=1, **kw):
    return sample_episodes(
        lm, task.tool_use, prompts, group, max_new_tokens=96, temperature=1.0, generator=None, greedy=True, **kw
    )


def test_the_demonstration_masks_the_tools_tokens_out_of_the_warm_start(lm):
    tool_use = tool_task().tool_use
    prompt, ids, mask = demonstration(format_of(lm, tool_use), tool_use, "12*3=", (CALL, "36"))
    text = lm.tokenizer.decode(ids, skip_special_tokens=True)
    assert text == f"{CALL}{RESPONSE_OPEN}36{RESPONSE_CLOSE}36"  # the result comes from the real calculator
    policy = lm.tokenizer.decode([t for t, m in zip(ids, mask) if m], skip_special_tokens=True)
    assert policy == CALL + "36" and ids[-1] == lm.tokenizer.eos_token_id and mask[-1] == 1.0
    assert lm.tokenizer.decode(prompt, skip_special_tokens=True) == "12*3="


def test_an_episode_calls_the_tool_reads_its_result_and_answers(lm):
    rollout, (called, direct) = greedy(lm, tool_task(), ["12*3=", "7*2="])
    assert called.turns == [CALL, "36"] and called.outcomes[0].text == "36" and called.outcomes[0].ok
    assert direct.turns == ["14"] and not direct.outcomes and not direct.hit_turn_limit
    tok = lm.tokenizer
    row = rollout.completion_ids[0]
    attention, policy = rollout.completion_attention[0].bool(), rollout.completion_mask[0].bool()
    assert tok.decode(row[attention], skip_special_tokens=True) == f"{CALL}{RESPONSE_OPEN}36{RESPONSE_CLOSE}36"
    assert tok.decode(row[policy], skip_special_tokens=True) == CALL + "36"
    tool_span = attention & ~policy
    assert tok.decode(row[tool_span]) == f"{RESPONSE_OPEN}36{RESPONSE_CLOSE}"
    assert torch.count_nonzero(rollout.logprobs[0][tool_span]) == 0  # no sampled log-prob where a tool wrote
    assert torch.all(rollout.logprobs[0][policy] <= 0)
    assert torch.equal(rollout.sampled, rollout.completion_mask)
    assert int(rollout.completion_mask[1].sum()) == len("14") + 1  # the direct answer and its EOS
    assert not rollout.unsampled_in_loss


def test_without_the_mask_the_tools_tokens_are_in_the_loss_and_need_their_log_probs(lm):
    rollout, _ = greedy(lm, tool_task(), ["12*3=", "7*2="], mask_tool_tokens=False)
    assert torch.equal(rollout.completion_mask, rollout.completion_attention)
    assert rollout.unsampled_in_loss  # rl_step recomputes the old log-probs for them


def test_the_turn_limit_ends_an_episode_mid_call(lm):
    _, (called,) = greedy(lm, tool_task(max_turns=1), ["12*3="])
    assert called.turns == [CALL] and called.hit_turn_limit and called.final == CALL


def test_a_finished_episode_waits_out_of_the_batch(lm, monkeypatch):
    rows = []
    real = episodes_module.sampler.sample

    def counting(lm_, ids, mask, **kw):
        rows.append(ids.shape[0] * kw.get("group_size", 1))
        return real(lm_, ids, mask, **kw)

    monkeypatch.setattr(episodes_module.sampler, "sample", counting)
    _, episodes = greedy(lm, tool_task(), ["12*3=", "7*2="], group=2)
    assert rows == [4, 2]  # turn 2 samples only the two episodes that called the tool
    assert [len(e.turns) for e in episodes] == [2, 2, 1, 1]


@pytest.mark.parametrize("mask_tool_tokens", [True, False])
def test_an_rl_step_on_episodes_trains_on_the_policys_tokens(lm, mask_tool_tokens):
    task = tool_task()
    policy = LoadedModel(
        build_tiny_model(
            ModelConfig(tiny=TinyModelConfig(hidden_size=48, layers=2, heads=4, intermediate_size=96)),
            len(lm.tokenizer),
            lm.tokenizer,
            seed=0,
        ),
        lm.tokenizer,
        lm.device,
        False,
    )
    policy.model.load_state_dict(lm.model.state_dict())
    cfg = resolve_algorithm("grpo", {"group_size": 2})
    train = TrainConfig(prompts_per_step=2, max_new_tokens=96, mask_tool_tokens=mask_tool_tokens)
    learner = Learner(
        lm=policy,
        reference=Reference(policy.model),
        critic=None,
        optimizer=make_optimizer(policy.model.parameters(), policy.device),
        algorithm=cfg,
        train=train,
        generator=torch.Generator().manual_seed(0),
        turns=task.tool_use.max_turns,
    )
    metrics = rl_step(learner, task, list(ITEMS))
    assert metrics["tokens/tool"] > 0 and metrics["tools/calls_per_episode"] > 0
    assert metrics["tokens/generated"] == metrics["tokens/policy"]  # what the policy wrote
    trained_per_epoch = metrics["tokens/trained"] / cfg.epochs  # every row kept: the loss mask's tokens
    assert trained_per_epoch == metrics["tokens/policy"] + (0 if mask_tool_tokens else metrics["tokens/tool"])
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
    if not mask_tool_tokens:  # the tool tokens' old log-probs came from a forward pass
        assert "train/old_logprob_gap" in metrics
