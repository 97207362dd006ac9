"""Tool tokens are context, never loss: for every RL preset, the loss's gradient with respect to
the logits at tool-token positions is exactly zero, changing the log-probs (old, reference,
current) at those positions changes nothing, and aggregation counts only the policy's tokens."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from harness.algorithms import PRESETS, resolve_algorithm
from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.objective import UpdateBatch, update_loss

RL_PRESETS = [name for name in PRESETS if resolve_algorithm(name, {}).kind == "rl"]
ROWS, WIDTH, VOCAB = 4, 10, 7
#: per row: 1 on the policy's tokens; a tool's response sits in the middle (columns 3-5 of rows 0-2)
POLICY = torch.tensor(
    [
        [1, 1, 1, 0, 0, 0, 1, 1, 0, 0],
        [1, 1, 1, 0, 0, 0, 1, 1, 1, 1],
        [1, 1, 1, 0, 0, 0, 1, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0, 0, 0, 0],  # answered directly: padding only
    ],
    dtype=torch.float,
)
TOOL = torch.zeros_like(POLICY)
TOOL[:3, 3:6] = 1.0


def config(name: str):
    """The preset, with every term of the loss on: KL in the loss, an entropy bonus."""
    cfg = resolve_algorithm(name, {"group_size": 2})
    return cfg.model_copy(update={"entropy_coef": 0.01, "kl_coef": 0.05})


def batch_of(logits: torch.Tensor, tokens: torch.Tensor, *, seed: int, values: bool) -> UpdateBatch:
    gen = torch.Generator().manual_seed(seed)
    logp_all = F.log_softmax(logits, dim=-1)
    logprobs = logp_all.gather(-1, tokens[..., None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    noise = lambda: torch.randn(ROWS, WIDTH, generator=gen) * 0.1  # noqa: E731
    return UpdateBatch(
        logprobs=logprobs,
        old_logprobs=logprobs.detach() + noise(),
        ref_logprobs=logprobs.detach() + noise(),
        advantages=torch.randn(ROWS, WIDTH, generator=gen),
        mask=POLICY,
        entropy=entropy,
        values=(torch.randn(ROWS, WIDTH, generator=gen) if values else None),
        old_values=(torch.randn(ROWS, WIDTH, generator=gen) if values else None),
        returns=(torch.randn(ROWS, WIDTH, generator=gen) if values else None),
        teacher_logprobs=logprobs.detach() + noise(),  # drawn last: the other draws stay as they were
    )


def loss_and_grad(name: str, perturb_tool_positions: bool = False):
    torch.manual_seed(0)
    logits = torch.randn(ROWS, WIDTH, VOCAB, requires_grad=True)
    tokens = torch.randint(VOCAB, (ROWS, WIDTH), generator=torch.Generator().manual_seed(1))
    cfg = config(name)
    batch = batch_of(logits, tokens, seed=2, values=cfg.critic != "none")
    if perturb_tool_positions:  # other log-probs (old, reference) and advantages where a tool wrote
        shift = TOOL * 5.0
        batch = UpdateBatch(
            **{
                **vars(batch),
                "old_logprobs": batch.old_logprobs - shift,
                "ref_logprobs": batch.ref_logprobs + shift,
                "teacher_logprobs": batch.teacher_logprobs + shift,
                "advantages": batch.advantages + shift,
            }
        )
    loss, metrics = update_loss(batch, cfg, make_aggregator(cfg, WIDTH))
    loss.backward()
    return loss.detach(), metrics, logits.grad


@pytest.mark.parametrize("name", RL_PRESETS)
def test_the_loss_has_no_gradient_at_tool_tokens(name):
    _, _, grad = loss_and_grad(name)
    at_tools = grad[TOOL.bool()]
    assert torch.count_nonzero(at_tools) == 0  # exactly zero, not small
    assert torch.count_nonzero(grad[POLICY.bool()]) > 0  # the policy's tokens do get a gradient


@pytest.mark.parametrize("name", RL_PRESETS)
def test_what_a_tool_token_holds_changes_nothing(name):
    loss, metrics, grad = loss_and_grad(name)
    loss2, metrics2, grad2 = loss_and_grad(name, perturb_tool_positions=True)
    assert torch.equal(loss, loss2) and torch.equal(grad, grad2)
    assert {k: float(v) for k, v in metrics.items()} == {k: float(v) for k, v in metrics2.items()}


@pytest.mark.parametrize("name", RL_PRESETS)
def test_aggregation_counts_only_policy_tokens(name):
    cfg = config(name)
    aggregate = make_aggregator(cfg, WIDTH)
    ones = torch.ones(ROWS, WIDTH)
    with_tools_as_padding = aggregate(ones + 7 * TOOL, POLICY)  # what sits at tool positions is not read
    assert torch.equal(with_tools_as_padding, aggregate(ones, POLICY))
    # the count it divides by is the policy tokens' (or the rows', or the constant): a tool token
    # made a policy token changes it
    assert not torch.equal(
        aggregate(torch.rand(ROWS, WIDTH, generator=torch.Generator().manual_seed(3)), POLICY),
        aggregate(torch.rand(ROWS, WIDTH, generator=torch.Generator().manual_seed(3)), torch.maximum(POLICY, TOOL)),
    )
