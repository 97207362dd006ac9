"""The step's hooks for the sampling-side and mismatch parts: dynamic sampling, truncated
completions, the sampler's log-probs against the trainer's (a mismatch planted, as fp32 on the
CPU has almost none), and the rollout pieces they use."""

import math

import pytest
import torch

import harness.engine.group_sampling as group_sampling
from harness.engine.logprobs import completion_forward
from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer
from harness.engine.rollout import encode_prompts, join_rollouts, sample
from harness.engine.spec import ModelConfig
from harness.engine.trial import run_trial


def _tiny_lm() -> LoadedModel:
    tok = char_tokenizer("0123456789+=")
    config = ModelConfig(tiny={"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64})
    return LoadedModel(
        build_tiny_model(config, len(tok), tok, seed=0).eval(), tok, torch.device("cpu"), use_chat_template=False
    )


def _sample(lm, prompts, seed, max_new_tokens=6):
    ids, mask = encode_prompts(lm, prompts)
    return sample(
        lm, ids, mask, max_new_tokens=max_new_tokens, temperature=1.0, generator=torch.Generator().manual_seed(seed)
    )


def test_cut_off_rows_are_those_whose_last_sampled_token_is_not_eos():
    lm = _tiny_lm()
    torch.nn.init.zeros_(lm.model.lm_head.weight)  # uniform: some rows end with EOS, some run out
    rollout = _sample(lm, ["1+2="] * 32, seed=3, max_new_tokens=3)
    eos = lm.tokenizer.eos_token_id
    lengths = rollout.completion_mask.sum(1).long()
    last = rollout.completion_ids[torch.arange(32), lengths - 1]
    assert rollout.cut_off(eos).tolist() == (last != eos).tolist()
    assert 0 < int(rollout.cut_off(eos).sum()) < 32


def test_joined_rollouts_keep_every_rows_tokens_and_log_probs():
    lm = _tiny_lm()
    short = _sample(lm, ["1+2="] * 2, seed=1, max_new_tokens=2)
    wide = _sample(lm, ["12+34="] * 3, seed=2, max_new_tokens=5)
    joined = join_rollouts([short, wide], lm.tokenizer.pad_token_id)
    assert joined.prompt_ids.shape[1] == wide.prompt_ids.shape[1]
    assert joined.completion_ids.shape[1] == max(short.completion_ids.shape[1], wide.completion_ids.shape[1])
    for part, rows in ((short, slice(0, 2)), (wide, slice(2, 5))):
        width = part.completion_ids.shape[1]
        assert torch.equal(joined.completion_ids[rows, :width], part.completion_ids)
        assert torch.equal(joined.logprobs[rows, :width], part.logprobs)
        assert joined.completion_mask[rows, width:].sum() == 0
        assert torch.equal(joined.prompt_ids[rows, -part.prompt_ids.shape[1] :], part.prompt_ids)
    # the extra left padding changes no log-prob of the joined rows (to float error)
    with torch.no_grad():
        recomputed = completion_forward(lm.model, joined, temperature=1.0).logprobs
    torch.testing.assert_close(recomputed * joined.completion_mask, joined.logprobs, atol=1e-5, rtol=0)


def test_dynamic_sampling_fills_the_batch_with_groups_that_have_a_spread(make_spec):
    spec = make_spec("dapo", overrides={"sampling": "dynamic", "max_draws": 6}, train={"steps": 3})
    once = run_trial(make_spec("dapo", train={"steps": 3}))
    result = run_trial(spec)
    rows = spec.train.prompts_per_step * spec.algorithm.group_size
    for row in result.history[1:]:
        assert 1 <= row["train/sampling_draws"] <= 6
        if row["train/sampling_draws"] < 6:  # it stopped because the batch was full
            assert row["train/frac_degenerate"] == 0 and row["train/rows_updated"] == rows
    assert any(row["train/sampling_draws"] > 1 for row in result.history[1:])
    # the tokens of every draw are counted: the first step's first draw is the once-arm's whole step
    first, alone = result.history[1], once.history[1]
    if first["train/sampling_draws"] == 1:
        assert first["tokens/generated"] == alone["tokens/generated"]
    else:
        assert first["tokens/generated"] > alone["tokens/generated"]
    assert "train/sampling_draws" not in alone  # an arm that draws once logs no draws


def test_dynamic_sampling_first_draw_is_the_steps_own_prompts(make_spec, monkeypatch):
    drawn = []
    original = group_sampling.draw_samples

    def spy(learner, task, prompts):
        drawn.append([item.prompt for item in prompts])
        return original(learner, task, prompts)

    monkeypatch.setattr(group_sampling, "draw_samples", spy)
    spec = make_spec("dapo", overrides={"sampling": "dynamic"}, train={"steps": 1})
    run_trial(spec)
    from harness.engine.tasks import build_task
    from harness.engine.trial import prompt_batches

    task = build_task(spec.task, cache_dir=spec.cache_dir)
    own = prompt_batches(task.train, spec.train.prompts_per_step, 1, spec.seed)[0]
    assert drawn[0] == [item.prompt for item in own]
    assert all(len(prompts) == spec.train.prompts_per_step for prompts in drawn)


def test_masked_truncated_completions_leave_the_loss(make_spec):
    result = run_trial(make_spec("grpo", overrides={"truncated": "mask"}, train={"max_new_tokens": 2}))
    rows = 4 * 8
    for row in result.history[1:]:
        assert 0 < row["train/frac_truncated"] <= 1
        assert row["train/rows_updated"] == pytest.approx(rows * (1 - row["train/frac_truncated"]))
    assert "train/frac_truncated" not in run_trial(make_spec("grpo", train={"max_new_tokens": 2})).history[1]


@pytest.mark.parametrize("shift, cap, weight, frac", [(-0.1, 2.0, math.exp(0.1), 0.0), (-1.0, 2.0, 2.0, 1.0)])
def test_a_planted_sampler_mismatch_is_measured_and_corrected(make_spec, monkeypatch, shift, cap, weight, frac):
    # the sampler's log-probs moved by `shift` on every sampled token: log(pi_old / mu) = -shift
    original = group_sampling.draw_samples

    def planted(learner, task, prompts):
        generation = original(learner, task, prompts)
        rollout = generation.rollout
        rollout.logprobs = rollout.logprobs + shift * rollout.sampled
        return generation

    monkeypatch.setattr(group_sampling, "draw_samples", planted)
    spec = make_spec("grpo", overrides={"mismatch": "token_truncate", "mismatch_cap": cap}, train={"steps": 1})
    step = run_trial(spec).history[1]
    assert step["train/old_logprob_gap"] == pytest.approx(abs(shift), abs=1e-4)  # recomputed, though fp32
    assert step["train/mismatch_kl"] == pytest.approx(shift, abs=1e-4)
    assert step["train/mismatch_weight_mean"] == pytest.approx(weight, rel=1e-4)
    assert step["train/mismatch_frac"] == frac
