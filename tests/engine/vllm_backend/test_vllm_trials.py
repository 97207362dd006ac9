"""The trainer side of the vLLM backend against the session's real server (``vllm_server``):
a LoRA policy published to it samples as the trainer would (greedy tokens, log-probs to vLLM's
rounding), the mismatch corrections act on what vLLM returns, and SmolLM2 trials with
``rollout.backend: vllm`` (on that server, ``rollout.vllm.url``) run to a completed result at
staleness 0 and 2 with their mismatch, staleness and sync cost logged, and evaluate as the hf
backend does on the same weights."""

from __future__ import annotations

import pytest
import torch

from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.mismatch import mismatch_measure
from harness.algorithms.objective import UpdateBatch, update_loss
from harness.algorithms.presets import resolve_algorithm
from harness.engine import generation
from harness.engine.evaluation import evaluate
from harness.engine.logprobs import completion_forward
from harness.engine.models import load_pretrained
from harness.engine.rollout import Rollout, prompt_token_ids, sample_groups
from harness.engine.samplers.policy_sync import PolicySync
from harness.engine.samplers.server_sampler import VllmSampler
from harness.engine.spec import ModelConfig, PromptScores, TrialSpec
from harness.engine.trial import run_trial
from harness.engine.vllm import evaluation as served_evaluation
from harness.engine.vllm.errors import VllmTiedHeadReload

pytestmark = pytest.mark.slow

PROMPTS = ["What is 2 + 3?", "Name a colour.", "Count from 1 to 5.", "Write one word."]
#: how far vLLM's CPU kernels (fp32) may be from the trainer's fp32 forward pass, per token log-prob
LOGPROB_TOLERANCE = 2e-3


@pytest.fixture(scope="module")
def policy(smollm2):
    """SmolLM2 with a LoRA adapter (all linear layers, rank 8) moved off its zero start, as a
    trained policy is: its samples are not the base model's."""
    config = ModelConfig(name=smollm2.folder, dtype="float32", device="cpu", lora={"r": 8, "alpha": 16})
    lm = load_pretrained(smollm2.folder, config, adapter_seed=0)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in lm.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
    return lm


@pytest.fixture
def sampler(vllm_server, policy, tmp_path):
    client = vllm_server.client(vocab_size=policy.model.config.vocab_size)
    sync = PolicySync(client, tmp_path, lora=True, served_model=vllm_server.model_name, prefix="test-policy")
    tokenizer = policy.tokenizer
    server_sampler = VllmSampler(client, sync, eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id)
    assert server_sampler.publish(policy, 0) > 0
    yield server_sampler
    server_sampler.close()


def test_a_published_lora_policy_samples_greedily_as_the_trainer_does(sampler, policy):
    served = sampler.sample_ids(prompt_token_ids(policy, PROMPTS), 1, max_new_tokens=16, temperature=0.0)
    own = sample_groups(policy, PROMPTS, 1, max_new_tokens=16, temperature=1.0, generator=None, greedy=True)
    assert torch.equal(served.prompt_ids, own.prompt_ids) and torch.equal(served.prompt_mask, own.prompt_mask)
    for i, prompt in enumerate(PROMPTS):
        mine = own.completion_ids[i, : int(own.completion_mask[i].sum())].tolist()
        theirs = served.completion_ids[i, : int(served.completion_mask[i].sum())].tolist()
        assert theirs == mine, f"greedy completions of {prompt!r} differ"
    assert served.policy_version.tolist() == [0] * len(PROMPTS)


def _sampled(sampler, policy) -> tuple[Rollout, torch.Tensor]:
    """Samples from the server at temperature 1, and the trainer's log-probs of them."""
    rollout = sampler.sample_ids(prompt_token_ids(policy, PROMPTS), 4, max_new_tokens=12, temperature=1.0)
    with torch.no_grad():
        return rollout, completion_forward(policy.model, rollout, temperature=1.0).logprobs


def _first_update_loss(cfg, rollout: Rollout, trainer: torch.Tensor) -> float:
    """The loss of the step's first update (the trainer's log-probs are the old ones: ratio 1), in float64."""
    advantages = torch.linspace(-1, 1, len(rollout.completion_ids), dtype=torch.float64)[:, None].expand_as(trainer)
    batch = UpdateBatch(
        logprobs=trainer.double(),
        old_logprobs=trainer.double(),
        ref_logprobs=trainer.double(),
        advantages=advantages,
        mask=rollout.completion_mask.double(),
        entropy=torch.zeros_like(trainer, dtype=torch.float64),
        sampler_logprobs=rollout.logprobs.double(),
    )
    return update_loss(batch, cfg, make_aggregator(cfg, 12))[0].item()


def test_the_servers_log_probs_differ_from_the_trainers_and_the_corrections_act_on_them(sampler, policy):
    rollout, trainer = _sampled(sampler, policy)
    measured = {k: v.item() for k, v in mismatch_measure(trainer, rollout.logprobs, rollout.completion_mask).items()}
    assert 0 < measured["mismatch/abs_logp_mean"] <= measured["mismatch/abs_logp_max"] < LOGPROB_TOLERANCE
    plain = _first_update_loss(resolve_algorithm("grpo", {"kl_placement": "none"}), rollout, trainer)
    # the trainer's own log-probs as the sampler's: every correction an exact no-op (the hf backend's
    # cached decode differs from them by rounding, ~4e-6 per token on SmolLM2 in fp32)
    same = Rollout(**{**vars(rollout), "logprobs": trainer})
    # TIS per token and per sequence, IcePop's band: vLLM's ratios (1 +- 1e-4 here) are inside
    # every bound, so each weighs its tokens by pi/mu itself, not 1
    corrections = (
        {"mismatch": "token_truncate"},
        {"mismatch": "sequence_truncate"},
        {"mismatch": "token_mask", "mismatch_floor": 0.5, "mismatch_cap": 5.0},
    )
    for correction in corrections:
        cfg = resolve_algorithm("grpo", {"kl_placement": "none", **correction})
        assert _first_update_loss(cfg, rollout, trainer) != plain, correction
        assert _first_update_loss(cfg, same, trainer) == plain, correction


def _trial(
    smollm2, vllm_server, max_staleness: int, *, lora: bool = True, steps: int = 3, eval_every: int = 0
) -> TrialSpec:
    return TrialSpec(
        arm="grpo",
        algorithm=resolve_algorithm("grpo", {"group_size": 2, "entropy_coef": 0.01}),
        model={
            "name": smollm2.name,
            "dtype": "float32",
            "device": "cpu",
            "lora": {"r": 4, "alpha": 8} if lora else None,
        },
        task={"name": "addition", "max_digits": 1, "n_train": 20, "n_eval": 4},
        warmstart={"enabled": False},
        train={
            "steps": steps,
            "prompts_per_step": 2,
            "max_new_tokens": 8,
            "eval_every": eval_every,
            "eval_samples": 1,
        },
        rollout={"backend": "vllm", "max_staleness": max_staleness, "vllm": {"url": vllm_server.base_url}},
        cache_dir=smollm2.cache_dir,
    )


@pytest.mark.parametrize("k", [0, 2])
def test_a_lora_trial_samples_at_staleness_k_and_evaluates_as_the_hf_backend_would(
    smollm2, vllm_server, monkeypatch, k
):
    """A LoRA trial on the server at staleness k: every step samples at most k versions behind, with
    its mismatch and sync cost logged. Every evaluation (the start, each step) reads the same greedy
    completions, and so the same per-prompt greedy scores, as the hf evaluation of the policy the
    trainer holds at that moment: the version the step published, however stale the samples."""
    texts: dict[str, list[list[str]]] = {"vllm": [], "hf": []}

    def recording(backend: str, score_groups):
        def scored(items, completions, group_size, reward):
            if group_size == 1:  # the greedy completions (the samples: eval_samples 1 too, in a second call)
                texts[backend].append(list(completions))
            return score_groups(items, completions, group_size, reward)

        return scored

    monkeypatch.setattr(served_evaluation, "score_groups", recording("vllm", served_evaluation.score_groups))
    monkeypatch.setattr(generation, "score_groups", recording("hf", generation.score_groups))
    by_hf: list[PromptScores] = []
    served_evaluate = VllmSampler.evaluate

    def both(self, lm, task, train, step, *, benchmark=None):
        scores = served_evaluate(self, lm, task, train, step, benchmark=benchmark)
        by_hf.append(evaluate(lm, task, train, step, benchmark=benchmark))
        return scores

    monkeypatch.setattr(VllmSampler, "evaluate", both)
    result = run_trial(_trial(smollm2, vllm_server, k, steps=3, eval_every=1))
    assert result.status == "completed" and [row["step"] for row in result.history] == [0, 1, 2, 3]
    for row in result.history[1:]:
        assert row["time/weight_sync_s"] > 0
        assert 0 <= row["rollout/staleness_mean"] <= row["rollout/staleness_max"] <= k
        assert row["mismatch/abs_logp_max"] >= row["mismatch/abs_logp_mean"] > 0
        assert row["tokens/generated"] > 0
    if k == 0:  # the sampler held the trained weights: the mismatch is vLLM's rounding alone
        assert all(row["mismatch/abs_logp_max"] < LOGPROB_TOLERANCE for row in result.history[1:])
    client = vllm_server.client(vocab_size=1)
    assert not [name for name in client.served_models() if name.startswith("policy-")]  # its adapters unloaded

    assert [s.step for s in result.prompts] == [s.step for s in by_hf] == [0, 1, 2, 3]
    # per evaluation: the server's greedy texts, its samples', then the hf greedy texts and samples'
    assert len(texts["vllm"]) == len(texts["hf"]) == 2 * len(by_hf)
    for e, (ours, theirs) in enumerate(zip(result.prompts, by_hf)):
        assert texts["vllm"][2 * e] == texts["hf"][2 * e], f"step {ours.step}: greedy completions differ"
        assert ours.prompt_ids == theirs.prompt_ids and ours.greedy == theirs.greedy


def test_a_full_fine_tuning_trial_of_a_tied_model_is_refused_in_one_line(smollm2, vllm_server):
    """SmolLM2 ties its LM head to its input embeddings, and vLLM's in-place reload keeps the head
    it started with (test_real_server.py shows it): the trial stops with that reason before the
    server's weights are touched."""
    spec = _trial(smollm2, vllm_server, 0, lora=False, steps=1)
    with pytest.raises(VllmTiedHeadReload, match="ties its LM head to its input embeddings") as refused:
        run_trial(spec)
    assert "\n" not in str(refused.value)  # the runner records it as the trial's one-line reason
