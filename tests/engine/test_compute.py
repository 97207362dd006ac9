"""The compute axis: the FLOPs estimate on hand-worked numbers, and a real trial's history, whose
every row carries the compute spent so far."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from harness.engine.compute import (
    STEP_FLOPS,
    ComputeTotals,
    ModelSize,
    PassTokens,
    StepTokens,
    episode_sampling_pass,
    hidden_pass,
    logprob_pass,
    model_size,
    sampling_pass,
    step_flops,
)
from harness.engine.episodes import Episode
from harness.engine.logprobs import completion_forward, completion_hidden
from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer
from harness.engine.rollout import Rollout, sample
from harness.engine.spec import COMPUTE_METRICS, ModelConfig
from harness.engine.trial import run_trial, start_policy


class TinyLM(nn.Module):
    """An embedding of 10 x 4 (40), a body of 4 x 4 + 4 (20) and a head of 4 x 10 (40, or the
    embedding's own weight when tied)."""

    def __init__(self, tied: bool = False):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 10, bias=False)
        if tied:
            self.head.weight = self.embed.weight

    def get_input_embeddings(self):
        return self.embed

    def get_output_embeddings(self):
        return self.head


def test_the_matmul_parameters_leave_out_the_lookup_table_and_count_the_head_apart():
    assert model_size(TinyLM()) == ModelSize(trunk=20, head=40, trunk_trainable=20, head_trainable=40)
    assert model_size(TinyLM(tied=True)) == ModelSize(20, 40, 20, 40)  # the shared weight is the head
    assert model_size(TinyLM()).matmul == 60  # 100 - the 40 of the lookup
    assert model_size(TinyLM(), head=False) == ModelSize(20, 0, 20, 0)  # a critic's trunk: the body only
    assert model_size(TinyLM(tied=True), head=False) == ModelSize(20, 0, 20, 0)
    lora_like = TinyLM()
    lora_like.requires_grad_(False)
    lora_like.body.bias.requires_grad_(True)  # 4 trained parameters, as an adapter's few
    assert model_size(lora_like, checkpointed=True) == ModelSize(20, 40, 4, 0, checkpointed=True)


def test_an_update_token_costs_a_forward_a_backward_and_the_trained_weights_gradients():
    full = ModelSize(trunk=20, head=40, trunk_trainable=20, head_trainable=40)
    assert full.trunk_update_flops == 6 * 20  # 2 N forward, 2 N backward, 2 N weight gradients
    assert full.head_update_flops == 8 * 40  # and the head's chunked logits once more in the backward pass
    lora_like = ModelSize(20, 40, 4, 0)
    assert lora_like.trunk_update_flops == 4 * 20 + 2 * 4 and lora_like.head_update_flops == 6 * 40
    assert ModelSize(20, 40, 20, 40, checkpointed=True).trunk_update_flops == 8 * 20  # the forward again
    assert ModelSize(20, 40, 20, 40, head_recomputed=False).head_update_flops == 6 * 40  # logits kept (TRL)


def test_a_steps_flops_add_up_its_passes():
    policy = ModelSize(trunk=20, head=40, trunk_trainable=20, head_trainable=40)
    tokens = StepTokens(sampled=PassTokens(10, 6), forward=PassTokens(20, 8), updated=PassTokens(30, 12))
    # trunk: 2 x 20 x (10 + 20) + 120 x 30; head: 2 x 40 x (6 + 8) + 320 x 12
    assert step_flops(tokens, policy) == 1_200 + 3_600 + 1_120 + 3_840 == 9_760
    critic = ModelSize(20, 0, 20, 0)  # its own trunk: 5 no-grad tokens at 2 N_c, 7 update tokens at 6 N_c
    with_critic = StepTokens(tokens.sampled, tokens.forward, tokens.updated, PassTokens(5), PassTokens(7))
    assert step_flops(with_critic, policy, critic) == 9_760 + 2 * 20 * 5 + 120 * 7 == 10_800
    counted = StepTokens(sampled=PassTokens(torch.tensor(10.0, dtype=torch.float64), 2.0))
    assert float(step_flops(counted, policy)) == 2 * 20 * 10 + 2 * 40 * 2


# The passes as they run, counted on a tiny Llama: hidden 8, 1 layer of 2 heads, MLP 16, a
# character vocabulary of 15 (pad, bos, eos and "0123456789+="), the head tied to the embedding.
#   trunk: q, k, v, o 4 x 8 x 8 = 256; gate, up, down 3 x 8 x 16 = 384; the layer's two norms and
#          the final one 3 x 8 = 24 (counted as matmul parameters: 2 FLOPs a weight for 1)  -> 664
#   head:  15 x 8 = 120 (the embedding's weight; its lookup is not a matmul)
TRUNK, HEAD = 664, 120


def _tiny_llama():
    tok = char_tokenizer("0123456789+=")
    tiny = {"hidden_size": 8, "layers": 1, "heads": 2, "intermediate_size": 16}
    return build_tiny_model(ModelConfig(tiny=tiny), len(tok), tok, seed=0).eval()


class _Counted:
    """Positions that went through the trunk (its final norm) and through the LM head."""

    def __init__(self, model):
        self.trunk = self.head = 0
        width = model.config.hidden_size
        self._hooks = [
            model.get_decoder().norm.register_forward_hook(partial(self._add, "trunk", width)),
            model.get_output_embeddings().register_forward_hook(partial(self._add, "head", model.config.vocab_size)),
        ]

    def _add(self, part: str, width: int, module, args, out) -> None:
        setattr(self, part, getattr(self, part) + out.numel() // width)

    def close(self) -> PassTokens:
        for hook in self._hooks:
            hook.remove()
        return PassTokens(float(self.trunk), float(self.head))


def _rollout(completion_mask: list[list[float]], attention: list[list[float]] | None = None) -> Rollout:
    """Two rows of 3-token prompts and 4-column completions (no padding the passes compute)."""
    rows = len(completion_mask)
    return Rollout(
        prompt_ids=torch.tensor([[1, 4, 5]] * rows),
        prompt_mask=torch.ones(rows, 3, dtype=torch.long),
        completion_ids=torch.tensor([[6, 7, 8, 9]] * rows),
        completion_mask=torch.tensor(completion_mask),
        logprobs=torch.zeros(rows, 4),
        completion_attention=None if attention is None else torch.tensor(attention),
    )


def test_the_tiny_llamas_size_is_the_hand_count():
    assert model_size(_tiny_llama()) == ModelSize(TRUNK, HEAD, TRUNK, HEAD)


def test_sampling_prefills_each_prompt_once_for_its_group_and_feeds_back_all_but_the_last_token():
    """2 prompts of 3 tokens, a group of 2, 4 tokens each (EOS never drawn: every row runs the
    budget). Trunk: each prompt once, 2 x 3 = 6, then 3 tokens fed back in each of 4 rows, 12: 18.
    Head: each prompt's last position, 2, then the 12 fed back: 14."""
    model = _tiny_llama()
    lm = LoadedModel(model, SimpleNamespace(eos_token_id=-1, pad_token_id=0), torch.device("cpu"), False)
    counted = _Counted(model)
    rollout = sample(
        lm,
        torch.tensor([[1, 4, 5], [1, 6, 7]]),
        torch.ones(2, 3, dtype=torch.long),
        max_new_tokens=4,
        temperature=1.0,
        generator=torch.Generator().manual_seed(0),
        group_size=2,
    )
    ran = counted.close()
    assert ran == PassTokens(18.0, 14.0)
    assert sampling_pass(rollout, group_size=2) == ran
    assert float(step_flops(StepTokens(sampled=ran), model_size(model))) == 2 * TRUNK * 18 + 2 * HEAD * 14


def test_a_no_grad_log_prob_pass_runs_the_head_only_on_the_loss_masks_completion_tokens():
    """2 rows of 3 prompt and 4 completion tokens, one token of the second row out of the loss
    mask (a tool's): the trunk reads 2 x 7 = 14 tokens, the head 4 + 3 = 7 positions."""
    model = _tiny_llama()
    rollout = _rollout([[1, 1, 1, 1], [1, 0, 1, 1]], attention=[[1, 1, 1, 1]] * 2)
    with torch.no_grad():
        completion_forward(model, rollout, temperature=1.0)  # the model's one-off head check, not counted
        counted = _Counted(model)
        completion_forward(model, rollout, temperature=1.0)
    assert counted.close() == logprob_pass(rollout) == PassTokens(14.0, 7.0)
    counted = _Counted(model)
    with torch.no_grad():
        completion_hidden(model, rollout)  # a critic's values on the policy's trunk
    assert counted.close() == hidden_pass(rollout) == PassTokens(14.0, 0.0)
    assert step_flops(StepTokens(forward=logprob_pass(rollout)), model_size(model)) == 2 * TRUNK * 14 + 2 * HEAD * 7


def test_an_update_pass_computes_the_heads_logits_twice_and_the_trunk_once():
    """The same 2 rows with gradient: the trunk's forward over 14 tokens, the head's over the 8
    completion positions and again in the backward pass (its chunks are checkpointed), 16.
    FLOPs: 6 x 664 x 14 for the trunk, (2 + 2 + 2 + 2) x 120 x 8 for the head."""
    model = _tiny_llama().train()
    rollout = _rollout([[1, 1, 1, 1]] * 2)
    with torch.no_grad():
        completion_forward(model, rollout, temperature=1.0)
    counted = _Counted(model)
    completion_forward(model, rollout, temperature=1.0).logprobs.sum().backward()
    ran = counted.close()
    assert ran == PassTokens(14.0, 16.0)
    assert logprob_pass(rollout) == PassTokens(14.0, ran.head / 2)
    assert step_flops(StepTokens(updated=logprob_pass(rollout)), model_size(model)) == 6 * TRUNK * 14 + 8 * HEAD * 8


def test_a_tool_episodes_later_turns_prefill_the_conversation_again():
    """2 prompts (4 and 2 tokens), a group of 2. Episode 0: a turn of 3 tokens, a tool's 2, a
    turn of 2; the others one turn of 3, 1 and 2 tokens.
    First turns: prompts 4 + 2 = 6 through the trunk and 2 last positions through the head, then
    2 + 0 + 2 + 1 fed back = 5 (trunk and head). Episode 0's second turn: its conversation so far
    4 + 3 + 2 = 9 through the trunk and 1 position through the head, then 1 fed back.
    Trunk 6 + 5 + 9 + 1 = 21; head 2 + 5 + 1 + 1 = 9."""

    def episode(prompt: int, *pieces: tuple[int, bool]) -> Episode:
        e = Episode(prompt, ids=[1] * (4 if prompt == 0 else 2), history=[])
        e.pieces = [([5] * n, [0.0] * n if policy else None) for n, policy in pieces]
        return e

    episodes = [
        episode(0, (3, True), (2, False), (2, True)),
        episode(0, (3, True)),
        episode(1, (1, True)),
        episode(1, (2, True)),
    ]
    assert episode_sampling_pass(episodes, group_size=2) == PassTokens(21.0, 9.0)


def test_the_totals_add_each_steps_compute_and_take_its_flops_out_of_its_metrics():
    totals = ComputeTotals()
    assert totals.totals == dict.fromkeys(COMPUTE_METRICS, 0.0)
    step = {STEP_FLOPS: 100.0, "tokens/generated": 8.0, "tokens/trained": 6.0, "time/step_s": 0.5}
    assert totals.add(dict(step)) == {
        "compute/flops": 100.0,
        "compute/generated_tokens": 8.0,
        "compute/trained_tokens": 6.0,
        "compute/wall_s": 0.5,
    }
    taken = dict(step)
    assert totals.add(taken)["compute/flops"] == 200.0 and STEP_FLOPS not in taken


def _columns(result, name: str) -> list[float]:
    return [row[name] for row in result.history]


def test_every_history_row_of_a_trial_carries_the_compute_spent_so_far(make_spec):
    result = run_trial(make_spec("grpo", train={"steps": 4, "eval_every": 2}))
    history = result.history
    assert history[0]["step"] == 0 and all(history[0][m] == 0.0 for m in COMPUTE_METRICS)
    for metric in COMPUTE_METRICS:
        values = _columns(result, metric)
        assert all(b >= a for a, b in zip(values, values[1:])), metric
    flops = _columns(result, "compute/flops")
    assert all(b > a for a, b in zip(flops, flops[1:]))
    eval_rows = [row for row in history if "eval/accuracy" in row]
    assert [row["step"] for row in eval_rows] == [0, 2, 4]
    assert all(set(COMPUTE_METRICS) <= set(row) for row in eval_rows)
    steps = history[1:]
    assert _columns(result, "compute/generated_tokens")[1:] == pytest.approx(
        torch.tensor([r["tokens/generated"] for r in steps]).cumsum(0).tolist()
    )
    assert history[-1]["compute/trained_tokens"] == sum(r["tokens/trained"] for r in steps)
    assert history[-1]["compute/wall_s"] == pytest.approx(sum(r["time/step_s"] for r in steps))
    assert all(STEP_FLOPS not in row for row in history)


def test_the_flops_count_the_passes_each_arm_runs(make_spec):
    """On the same seed the first step samples the same rollout: B rows of P prompt tokens in
    all (P / G per prompt), K completion tokens, C = P + K, every row kept. So the arms'
    first-step FLOPs differ only by their passes (N_t the trunk, N_h the head):
    a value head on the policy's trunk (PPO, no recompute) adds a trunk pass for the old
    values, 2 N_t C; recomputing the old log-probs adds a log-prob pass, 2 N_t C + 2 N_h K; a
    second epoch adds an update, 6 N_t C + 8 N_h K; a critic with its own trunk adds its old
    values and its update, 8 N_t C. And GRPO's own step is its sampling, 2 N_t (P / G + K - B)
    + 2 N_h (B / G + K - B), the reference's pass and one update."""

    def first_step(name: str = "grpo", **overrides) -> dict[str, float]:
        return run_trial(make_spec(name, overrides=overrides, train={"steps": 1})).history[1]

    row = first_step()
    grpo = row["compute/flops"]
    _, lm, _, _ = start_policy(make_spec("grpo"))
    size = model_size(lm.model)
    t, h = size.trunk, size.head
    context = (first_step("ppo")["compute/flops"] - grpo) / (2 * t)  # C, from the old values' trunk pass
    completion = row["tokens/generated"]  # K
    assert row["tokens/trained"] == completion and context == pytest.approx(round(context))
    assert first_step(old_logprobs="recompute")["compute/flops"] - grpo == pytest.approx(
        2 * t * context + 2 * h * completion
    )
    assert first_step(epochs=2)["compute/flops"] - grpo == pytest.approx(6 * t * context + 8 * h * completion)
    assert first_step("ppo", critic="value_model")["compute/flops"] - grpo == pytest.approx(8 * t * context)
    group = make_spec("grpo").algorithm.group_size
    rows = make_spec("grpo").train.prompts_per_step * group
    prompt_once = (context - completion) / group
    sampling = 2 * t * (prompt_once + completion - rows) + 2 * h * (rows / group + completion - rows)
    reference = 2 * t * context + 2 * h * completion
    update = 6 * t * context + 8 * h * completion
    assert grpo == pytest.approx(sampling + reference + update)


def test_a_dpo_trial_fills_the_compute_axis_from_its_own_passes(make_spec):
    """DPO samples its groups, runs the reference over its pairs and updates on them: each step
    at least the FLOPs of the tokens its sampling fed back (all but each row's last, 2 N a
    token), and the trained tokens are its pairs' completion tokens."""
    result = run_trial(make_spec("dpo", train={"steps": 2}))
    spec = make_spec("dpo")
    _, lm, _, _ = start_policy(spec)
    n = model_size(lm.model).matmul
    rows = spec.train.prompts_per_step * spec.algorithm.group_size
    steps = result.history[1:]
    assert result.history[-1]["compute/trained_tokens"] == sum(r["tokens/trained"] for r in steps)
    flops = [b["compute/flops"] - a["compute/flops"] for a, b in zip(result.history, steps)]
    assert all(f >= 2 * n * (r["tokens/generated"] - rows) > 0 for f, r in zip(flops, steps))
