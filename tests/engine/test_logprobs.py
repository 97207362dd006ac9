"""Chunked completion log-probs against the full-logits computation they replace (values and
gradients, plain and LoRA), the logit post-processing they respect or refuse, and that an RL step
never builds the full-vocabulary logits of its batch."""

import math
import weakref

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import Gemma2Config, Gemma2ForCausalLM

import harness.engine.logprobs as logprobs
from harness.algorithms import resolve_algorithm
from harness.engine.compute import STEP_FLOPS
from harness.engine.learner import Learner, make_optimizer
from harness.engine.logprobs import completion_forward
from harness.engine.models import (
    LoadedModel,
    build_tiny_model,
    char_tokenizer,
    enable_gradient_checkpointing,
    with_lora,
)
from harness.engine.reference import Reference
from harness.engine.rl_step import rl_step
from harness.engine.rollout import position_ids_of, sample_groups
from harness.engine.spec import ModelConfig, TrainConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import build_task
from harness.errors import ConfigError

PROMPTS = ["1+2=", "12+34=", "5+5=", "123+456="]  # different lengths: left padding
TINY = {"hidden_size": 32, "layers": 2, "heads": 2, "intermediate_size": 64}
TEMPERATURE = 0.7


def _lm(seed: int = 0, lora: bool = False) -> LoadedModel:
    tok = char_tokenizer("0123456789+=")
    config = ModelConfig(tiny=TINY, lora={"r": 4, "alpha": 8} if lora else None)
    model = build_tiny_model(config, len(tok), tok, seed=seed)
    if lora:
        model = with_lora(model, config, seed=seed)
        for name, p in model.named_parameters():  # LoRA's B starts at 0: give the adapter an effect
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.1)
    return LoadedModel(model.eval(), tok, torch.device("cpu"), use_chat_template=False)


def _rollout(lm, group=3, tokens=6, seed=1):
    return sample_groups(
        lm,
        PROMPTS,
        group,
        max_new_tokens=tokens,
        temperature=TEMPERATURE,
        generator=torch.Generator().manual_seed(seed),
    )


def _full_logits(model, rollout):
    """The old computation: every position's full-vocabulary logits, fp32 log-softmax."""
    attention = rollout.attention_mask
    out = model(input_ids=rollout.input_ids, attention_mask=attention, position_ids=position_ids_of(attention))
    width, start = rollout.completion_ids.shape[1], rollout.prompt_ids.shape[1] - 1
    logp_all = F.log_softmax(out.logits[:, start : start + width].float() / TEMPERATURE, dim=-1)
    mask = rollout.completion_mask
    logprobs = logp_all.gather(-1, rollout.completion_ids[..., None]).squeeze(-1) * mask
    return logprobs, -(logp_all.exp() * logp_all).sum(-1) * mask


def _grads(model, terms):
    """Gradients of a fixed weighting of (log-probs, entropies) w.r.t. the trainable weights."""
    model.zero_grad(set_to_none=True)
    weights = torch.Generator().manual_seed(7)
    loss = sum((t * torch.randn(t.shape, generator=weights)).sum() for t in terms)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 4 tokens at the testbed's 15-token vocabulary, so every pass has many."""
    monkeypatch.setattr(logprobs, "LOGIT_CHUNK_ELEMENTS", 4 * 15)


@pytest.mark.parametrize("lora", [False, True])
def test_chunked_logprobs_and_entropy_equal_the_full_logits_values_and_gradients(small_chunks, lora):
    lm = _lm(lora=lora)
    rollout = _rollout(lm)
    lm.model.train()
    expected = _full_logits(lm.model, rollout)
    expected_grads = _grads(lm.model, expected)
    got = completion_forward(lm.model, rollout, temperature=TEMPERATURE, want_entropy=True, entropy_grad=True)
    for ours, theirs in zip((got.logprobs, got.entropy), expected):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0)
    grads = _grads(lm.model, (got.logprobs, got.entropy))
    assert grads.keys() == expected_grads.keys() and (not lora or all("lora" in n for n in grads))
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected_grads[name], atol=1e-6, rtol=1e-5, msg=name)


def test_chunked_sum_of_squared_probabilities_equals_the_full_logits(small_chunks):
    # what verl's optimal token baseline reads (its sum_pi_squared): sum over the vocabulary of p^2
    lm = _lm()
    rollout = _rollout(lm)
    with torch.no_grad():
        got = completion_forward(lm.model, rollout, temperature=TEMPERATURE, want_sum_pi_squared=True)
        attention = rollout.attention_mask
        out = lm.model(input_ids=rollout.input_ids, attention_mask=attention, position_ids=position_ids_of(attention))
    width, start = rollout.completion_ids.shape[1], rollout.prompt_ids.shape[1] - 1
    probs = torch.softmax(out.logits[:, start : start + width].float() / TEMPERATURE, dim=-1)
    torch.testing.assert_close(got.sum_pi_squared, (probs**2).sum(-1) * rollout.completion_mask, atol=1e-6, rtol=0)
    real = rollout.completion_mask.bool()
    assert torch.all(got.sum_pi_squared[real] >= got.logprobs[real].exp() ** 2 - 1e-6)  # p_t^2 is one of its terms


def test_lora_reference_is_the_base_model_with_the_adapter_off():
    lm = _lm(lora=True)
    rollout = _rollout(lm)
    with torch.no_grad():
        with lm.model.disable_adapter():
            expected, _ = _full_logits(lm.model, rollout)
        adapted = completion_forward(lm.model, rollout, temperature=TEMPERATURE).logprobs
    torch.testing.assert_close(
        Reference(lm.model).logprobs(rollout, TEMPERATURE, micro_batch_size=5), expected, atol=1e-6, rtol=0
    )
    assert (adapted - expected).abs().max() > 1e-3  # the adapter does change them


def test_only_what_is_asked_for_is_computed():
    lm = _lm()
    rollout = _rollout(lm)
    with torch.no_grad():
        plain = completion_forward(lm.model, rollout, temperature=TEMPERATURE)
        full = completion_forward(lm.model, rollout, temperature=TEMPERATURE, want_entropy=True, want_hidden=True)
    assert plain.entropy is None and plain.hidden is None and plain.sum_pi_squared is None
    assert full.hidden.shape == (*rollout.completion_ids.shape, TINY["hidden_size"])
    assert torch.equal(plain.logprobs, full.logprobs)


class _VocabWideBytes(TorchDispatchMode):
    """The most bytes that tensors as wide as the vocabulary held at any one time (but the head's
    weight and its gradient: [hidden, vocab] as the matmul sees them)."""

    def __init__(self, vocab: int, hidden: int):
        super().__init__()
        self.vocab, self.hidden, self.live, self.refs, self.peak = vocab, hidden, {}, {}, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            wide = isinstance(t, torch.Tensor) and t.dim() >= 2 and t.shape[-1] == self.vocab
            if wide and t.shape[-2] != self.hidden:
                key = t.untyped_storage().data_ptr()
                self.live[key], self.refs[key] = t.untyped_storage().nbytes(), self.refs.get(key, 0) + 1
                weakref.finalize(t, self._gone, key)
                self.peak = max(self.peak, sum(self.live.values()))
        return out

    def _gone(self, key):
        self.refs[key] -= 1
        if not self.refs[key]:
            del self.live[key], self.refs[key]


@pytest.mark.parametrize("entropy_grad", [False, True])
def test_the_backward_pass_holds_a_few_chunks_of_logits_not_every_chunk(small_chunks, entropy_grad):
    lm = _lm()
    rollout = _rollout(lm, group=4, tokens=8)
    lm.model.train()
    chunk_bytes = logprobs.LOGIT_CHUNK_ELEMENTS * 4
    chunks = int(rollout.completion_mask.sum()) * 15 * 4 / chunk_bytes
    with _VocabWideBytes(vocab=15, hidden=TINY["hidden_size"]) as seen:
        forward = completion_forward(
            lm.model, rollout, temperature=TEMPERATURE, want_entropy=True, entropy_grad=entropy_grad
        )
        (forward.logprobs.sum() + (forward.entropy.sum() if entropy_grad else 0)).backward()
    assert chunks > 20
    assert seen.peak <= 8 * chunk_bytes  # one chunk's logits and their few intermediates
    assert forward.entropy.requires_grad == entropy_grad


def _gemma(softcap: float) -> Gemma2ForCausalLM:
    config = Gemma2Config(
        vocab_size=20,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        final_logit_softcapping=softcap,
    )
    torch.manual_seed(0)
    model = Gemma2ForCausalLM(config).eval()
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(200)  # logits well past the cap
    return model


def test_softcapped_logits_are_reproduced():
    model = _gemma(softcap=3.0)
    lm = LoadedModel(model, char_tokenizer("0123456789+="), torch.device("cpu"), use_chat_template=False)
    rollout = _rollout(lm)
    with torch.no_grad():
        expected, _ = _full_logits(model, rollout)
        got = completion_forward(model, rollout, temperature=TEMPERATURE).logprobs
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_a_model_whose_logits_the_head_does_not_reproduce_is_refused():
    lm = _lm()
    rollout = _rollout(lm)
    lm.model.config.logit_scale = 0.0625  # named in the config, not applied by Llama's forward
    with pytest.raises(ConfigError, match="changes the logits after the LM head"):
        completion_forward(lm.model, rollout, temperature=TEMPERATURE)


def _counted(forward, calls: list):
    """``forward``, appending to ``calls`` on each call (a forward hook misses the recomputation)."""

    def counted(*args, **kwargs):
        calls.append(1)
        return forward(*args, **kwargs)

    return counted


@pytest.mark.parametrize("lora", [False, True])
def test_gradient_checkpointing_recomputes_the_layers_and_keeps_the_gradients(lora):
    rollouts, grads, calls = [], [], []
    for checkpointing in (False, True):
        lm = _lm(lora=lora)
        if checkpointing:
            enable_gradient_checkpointing(lm.model)
        rollout = rollouts[0] if rollouts else _rollout(lm)
        rollouts.append(rollout)
        mlp, count = lm.model.get_decoder().layers[0].mlp, []  # a module inside a checkpointed layer
        mlp.forward = _counted(mlp.forward, count)
        lm.model.train()
        forward = completion_forward(lm.model, rollout, temperature=TEMPERATURE, want_entropy=True, entropy_grad=True)
        grads.append(_grads(lm.model, (forward.logprobs, forward.entropy)))
        calls.append(len(count))
    assert calls[1] == calls[0] + 1  # the backward pass ran the layer again
    for name, grad in grads[1].items():
        torch.testing.assert_close(grad, grads[0][name], atol=1e-6, rtol=1e-5, msg=name)


def test_an_estimator_that_reads_the_policys_token_probabilities_gets_its_own_pass():
    # optimal_token_baseline with the sampler's old log-probs: the policy's pass runs for the
    # estimator (its FLOPs counted) but does not replace the old log-probs (no mismatch measured)
    task = build_task(TaskConfig(reward="partial_match"))
    train = TrainConfig(prompts_per_step=2, max_new_tokens=6, temperature=TEMPERATURE)
    flops = {}
    for advantage in ("optimal_token_baseline", "group_zscore"):
        overrides = {"group_size": 4, "old_logprobs": "sampler", "advantage": advantage}
        lm = _lm()
        learner = Learner(
            lm=lm,
            reference=Reference(_lm().model),
            critic=None,
            optimizer=make_optimizer(lm.model.parameters(), lm.device),
            algorithm=resolve_algorithm("optimal_token_baseline", overrides),
            train=train,
            generator=torch.Generator().manual_seed(0),
        )
        metrics = rl_step(learner, task, list(task.train[:2]))
        assert "train/old_logprob_gap" not in metrics and math.isfinite(metrics["train/loss"])
        flops[advantage] = metrics[STEP_FLOPS]
    assert flops["optimal_token_baseline"] > flops["group_zscore"]


def test_an_rl_step_never_builds_the_full_vocabulary_logits_of_its_batch(small_chunks):
    lm = _lm()
    task = build_task(TaskConfig(reward="partial_match"))
    cfg = resolve_algorithm("grpo", {"group_size": 4, "old_logprobs": "recompute"})
    train = TrainConfig(prompts_per_step=4, max_new_tokens=6, temperature=TEMPERATURE)
    shapes = []
    lm.model.get_output_embeddings().register_forward_hook(lambda module, args, out: shapes.append(out.shape))
    learner = Learner(
        lm=lm,
        reference=Reference(lm.model),
        critic=None,  # the reference's copy keeps the hook
        optimizer=make_optimizer(lm.model.parameters(), lm.device),
        algorithm=cfg,
        train=train,
        generator=torch.Generator().manual_seed(0),
    )
    vocab = lm.model.get_output_embeddings().weight.shape[0]
    prompt_width = int(max(len(i.prompt) for i in task.train[:4])) + 1  # + BOS
    metrics = rl_step(learner, task, list(task.train[:4]))
    rows = 4 * cfg.group_size
    chunks = [s for s in shapes if len(s) == 2]  # the log-prob passes: [tokens, vocab]
    sampler = [s for s in shapes if len(s) == 3]  # the model's own forward: sampling, and the one check
    assert chunks and all(s[0] * s[1] <= logprobs.LOGIT_CHUNK_ELEMENTS for s in chunks)
    # the old-log-prob, reference and update passes each score every generated token once, and
    # the update's backward pass once more (it recomputes each chunk's logits)
    assert sum(s[0] for s in chunks) == 4 * metrics["tokens/generated"]
    assert all(s[1] <= max(prompt_width, logprobs.CHECK_TOKENS) for s in sampler)
    assert not any(s[0] == rows and s[1] > prompt_width for s in sampler), "logits of whole rollout rows"
    assert all(s[-1] == vocab for s in shapes)
