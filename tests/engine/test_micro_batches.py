"""``micro_batch_size``: a step over micro-batches of rows gives the gradient and the metrics of
the same step over whole minibatches, for every aggregation, a critic on the policy's trunk or
its own, and DPO."""

import pytest
import torch

from harness.algorithms import AGGREGATIONS, resolve_algorithm
from harness.algorithms.config import RLConfig
from harness.algorithms.critic import build_critic
from harness.engine.dpo_step import dpo_step
from harness.engine.learner import Learner, make_optimizer
from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer
from harness.engine.reference import Reference
from harness.engine.rl_step import rl_step
from harness.engine.spec import ModelConfig, TrainConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task

TINY = {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}
PROMPTS = 4
ONE_UPDATE = {"minibatches": 1, "epochs": 1, "group_size": 4}  # p.grad is then the step's gradient

CASES = {
    **{f"grpo-{name}": ("grpo", {"aggregation": name, "old_logprobs": "recompute"}) for name in AGGREGATIONS.names()},
    "grpo-entropy": ("grpo", {"entropy_coef": 0.01}),  # the entropy term's gradient too
    "ppo": ("ppo", {}),  # token_mean, a value head on the policy's trunk
    "ppo-value_model": ("ppo", {"critic": "value_model", "aggregation": "seq_mean_token_mean"}),
    "dpo": ("dpo", {}),
}


def _step(preset: str, overrides: dict, micro_batch_size: int | None):
    """One step from a fixed start: the gradient of every trained weight, and the metrics."""
    task = build_task(TaskConfig(reward="partial_match"))
    tok = char_tokenizer(task.alphabet)
    lm = LoadedModel(
        build_tiny_model(ModelConfig(tiny=TINY), len(tok), tok, seed=0).eval(),
        tok,
        torch.device("cpu"),
        use_chat_template=False,
    )
    cfg = resolve_algorithm(preset, {**ONE_UPDATE, **overrides})
    critic = build_critic(cfg, lm.model) if isinstance(cfg, RLConfig) else None
    params = list(lm.model.parameters()) + ([] if critic is None else list(critic.parameters()))
    learner = Learner(
        lm=lm,
        reference=Reference(lm.model),
        critic=critic,
        optimizer=make_optimizer(params, lm.device),
        algorithm=cfg,
        train=TrainConfig(prompts_per_step=PROMPTS, max_new_tokens=6, micro_batch_size=micro_batch_size),
        generator=torch.Generator().manual_seed(0),
    )
    step = dpo_step if cfg.kind == "dpo" else rl_step
    metrics = step(learner, task, list(task.train[:PROMPTS]))
    return [p.grad.clone() for p in learner.parameters], {
        k: v for k, v in metrics.items() if not k.startswith(("time/", "compute/wall_s"))
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_micro_batches_give_the_whole_minibatch_gradient_and_metrics(case):
    preset, overrides = CASES[case]
    whole_grads, whole = _step(preset, overrides, None)
    assert whole.get("train/pairs", 2) > 1  # DPO: more than one pair, so there is something to split
    for size in (2, 3):  # 16 rows (DPO: 2 to 4 pairs), in even and uneven slices
        micro_grads, micro = _step(preset, overrides, size)
        for got, expected in zip(micro_grads, whole_grads):
            torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
        assert micro.keys() == whole.keys()
        assert micro == pytest.approx(whole, rel=1e-5, abs=1e-6, nan_ok=True)


def test_a_trial_with_micro_batches_and_checkpointing_matches_the_plain_trial(make_spec, monkeypatch):
    import harness.engine.trial as trial

    enabled, enable = [], trial.enable_gradient_checkpointing
    monkeypatch.setattr(trial, "enable_gradient_checkpointing", lambda model: enabled.append(enable(model)))
    plain = trial.run_trial(make_spec("ppo", train={"steps": 1}))
    lean = trial.run_trial(make_spec("ppo", train={"steps": 1, "micro_batch_size": 3, "gradient_checkpointing": True}))
    assert len(enabled) == 1 and plain.trial_id != lean.trial_id
    first = [{k: v for k, v in r.history[1].items() if not k.startswith(("time/", "compute/"))} for r in (plain, lean)]
    assert first[1] == pytest.approx(first[0], rel=1e-5, abs=1e-6, nan_ok=True)
    # the same tokens, and checkpointing's second forward pass of each update counted
    assert lean.history[1]["compute/generated_tokens"] == plain.history[1]["compute/generated_tokens"]
    assert lean.history[1]["compute/flops"] > plain.history[1]["compute/flops"]
