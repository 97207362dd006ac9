"""The sampler against plain references: a loop without a cache, a training forward pass, one
prefill per sample, and a batch that never drops its finished rows."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from transformers import Cache, DynamicCache, LlamaConfig, MistralConfig

from harness.engine import rollout
from harness.engine.logprobs import completion_forward
from harness.engine.models import (
    LoadedModel,
    build_tiny_model,
    char_tokenizer,
    with_lora,
)
from harness.engine.rollout import (
    InPlaceLayer,
    encode_prompts,
    kv_cache,
    sample,
    sample_groups,
)
from harness.engine.spec import ModelConfig

PROMPTS = ["1+2=", "12+34=", "5+5=", "123+456="]  # different lengths: left padding
TINY = {"hidden_size": 32, "layers": 2, "heads": 2, "intermediate_size": 64}


def _lm(lora: bool = False, eos_shift: float | None = None) -> LoadedModel:
    """The tiny Llama, optionally LoRA-wrapped (the adapter not a no-op). With ``eos_shift`` the
    EOS logit gets a term of its own, a random direction of the last hidden state less
    ``eos_shift``, so that rows end at different lengths, greedy ones too (the near-uniform
    testbed ends all of them or none)."""
    tok = char_tokenizer("0123456789+=")
    model = build_tiny_model(ModelConfig(tiny=TINY), len(tok), tok, seed=0)
    if lora:
        model = with_lora(model, ModelConfig(lora={"r": 4, "alpha": 8}), seed=3)
        gen = torch.Generator().manual_seed(1)
        for name, weight in model.named_parameters():
            if "lora_B" in name:  # peft starts B at 0, where the adapter changes nothing
                weight.data.normal_(0.0, 0.1, generator=gen)
    if eos_shift is not None:
        direction = torch.randn(TINY["hidden_size"], generator=torch.Generator().manual_seed(0))
        eos = F.one_hot(torch.tensor(tok.eos_token_id), len(tok)).float()

        def eos_term(module, args, logits):
            return logits + ((args[0] @ direction) / TINY["hidden_size"] ** 0.5 - eos_shift)[..., None] * eos

        model.get_output_embeddings().register_forward_hook(eos_term)
    return LoadedModel(model.eval(), tok, torch.device("cpu"), use_chat_template=False)


def _sample(lm, prompts=PROMPTS, *, seed=0, group_size=1, max_new_tokens=20, **kw):
    ids, mask = encode_prompts(lm, prompts)
    kw.setdefault("temperature", 1.0)
    gen = torch.Generator().manual_seed(seed)
    return sample(lm, ids, mask, max_new_tokens=max_new_tokens, generator=gen, group_size=group_size, **kw)


def _greedy_without_cache(lm, prompts, max_new_tokens):
    """Greedy decoding by a full forward pass over the whole sequence at every token."""
    ids, mask = encode_prompts(lm, prompts)
    eos, pad = lm.tokenizer.eos_token_id, lm.tokenizer.pad_token_id
    done = torch.zeros(len(prompts), dtype=torch.bool)
    tokens, logps = [], []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = lm.model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, -1]
            logp_all = F.log_softmax(logits.float(), dim=-1)
            token = logp_all.argmax(-1)
            tokens.append(torch.where(done, pad, token))
            logps.append(torch.where(done, 0.0, logp_all.gather(-1, token[:, None]).squeeze(-1)))
            done = done | (token == eos)
            if done.all():
                break
            ids, mask = torch.cat([ids, token[:, None]], 1), torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
    return torch.stack(tokens, 1), torch.stack(logps, 1)


@pytest.fixture
def drop_often(monkeypatch):
    """Check for finished rows at every token, so the batch compacts many times."""
    monkeypatch.setattr(rollout, "CHECK_EVERY", 1)


@pytest.mark.parametrize("lora", [False, True])
@pytest.mark.parametrize("preallocate", [True, False])
def test_greedy_completions_equal_a_loop_without_cache(lora, preallocate, drop_often):
    lm = _lm(lora=lora, eos_shift=-0.5)
    tokens, logps = _greedy_without_cache(lm, PROMPTS, max_new_tokens=12)
    got = _sample(lm, greedy=True, max_new_tokens=12, preallocate=preallocate)
    assert torch.equal(got.completion_ids, tokens)
    torch.testing.assert_close(got.logprobs, logps, atol=1e-5, rtol=0)
    assert got.completion_mask.sum(1).unique().numel() > 1  # rows ended at different lengths


@pytest.mark.parametrize("lora", [False, True])
def test_sampled_logprobs_equal_a_training_forward_pass(lora, drop_often):
    lm = _lm(lora=lora, eos_shift=0.5)
    got = _sample(lm, seed=1, group_size=4, temperature=0.7)
    assert got.completion_mask.sum(1).unique().numel() > 1
    with torch.no_grad():
        recomputed = completion_forward(lm.model, got, temperature=0.7).logprobs
    torch.testing.assert_close(recomputed, got.logprobs, atol=1e-5, rtol=0)


def test_same_seed_same_tokens_and_logprobs_bitwise(drop_often):
    lm = _lm(eos_shift=0.5)
    a, b, c = (_sample(lm, seed=s, group_size=8) for s in (3, 3, 4))
    assert torch.equal(a.completion_ids, b.completion_ids) and torch.equal(a.logprobs, b.logprobs)
    assert not torch.equal(a.completion_ids, c.completion_ids)


def test_dropping_finished_rows_changes_no_draw(monkeypatch):
    """Each row's draws are its own: a batch that compacts whenever it can and one that never
    does give the same tokens."""
    lm = _lm(eos_shift=0.5)
    reorders, reorder = [], Cache.reorder_cache

    def counted(cache, index):
        reorders.append(len(index))
        reorder(cache, index)

    monkeypatch.setattr(Cache, "reorder_cache", counted)
    monkeypatch.setattr(rollout, "CHECK_EVERY", 1)
    dropping = _sample(lm, seed=5, group_size=8)
    assert len(reorders) > 2  # the expansion to groups, then compactions
    monkeypatch.setattr(rollout, "DROP_SHARE", 2.0)  # never
    reorders.clear()
    keeping = _sample(lm, seed=5, group_size=8)
    assert reorders == [len(PROMPTS) * 8]  # the expansion only
    assert torch.equal(dropping.completion_ids, keeping.completion_ids)
    assert torch.equal(dropping.completion_mask, keeping.completion_mask)
    torch.testing.assert_close(dropping.logprobs, keeping.logprobs, atol=1e-6, rtol=0)


def test_one_prefill_per_group_equals_one_prefill_per_sample():
    lm = _lm(eos_shift=0.5)
    repeated = [p for p in PROMPTS for _ in range(3)]
    for kw in ({"greedy": True}, {"seed": 6}):
        grouped = _sample(lm, group_size=3, **kw)
        alone = _sample(lm, repeated, group_size=1, **kw)
        assert torch.equal(grouped.prompt_ids, alone.prompt_ids)
        assert torch.equal(grouped.prompt_mask, alone.prompt_mask)
        assert torch.equal(grouped.completion_ids, alone.completion_ids)
        torch.testing.assert_close(grouped.logprobs, alone.logprobs, atol=1e-5, rtol=0)


def test_rows_after_eos_are_pad_with_mask_zero(drop_often):
    lm = _lm(eos_shift=0.5)
    got = _sample(lm, seed=7, group_size=16, max_new_tokens=24)
    eos, pad = lm.tokenizer.eos_token_id, lm.tokenizer.pad_token_id
    lengths = got.completion_mask.sum(1).long()
    assert (lengths < got.completion_ids.shape[1]).any() and lengths.max() == got.completion_ids.shape[1]
    for ids, mask, logps, n in zip(got.completion_ids, got.completion_mask, got.logprobs, lengths):
        assert mask[:n].eq(1).all() and mask[n:].eq(0).all()
        assert ids[n:].eq(pad).all() and logps[n:].eq(0).all()
        assert (ids[: n - 1] != eos).all() and (ids[n - 1] == eos or n == got.completion_ids.shape[1])


def test_sample_groups_of_one_is_one_row_per_prompt():
    lm = _lm()
    gen = torch.Generator().manual_seed(8)
    got = sample_groups(lm, PROMPTS, 1, max_new_tokens=6, temperature=1.0, generator=gen, greedy=True)
    assert got.completion_ids.shape[0] == len(PROMPTS)
    assert torch.equal(got.completion_ids, _greedy_without_cache(lm, PROMPTS, 6)[0])


def test_models_with_other_layer_kinds_fall_back_to_the_dynamic_cache():
    plain = SimpleNamespace(config=LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2))
    sliding = SimpleNamespace(
        config=MistralConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, sliding_window=8)
    )
    assert all(isinstance(layer, InPlaceLayer) for layer in kv_cache(plain, 16).layers)
    assert isinstance(kv_cache(plain, 16, preallocate=False), DynamicCache)
    assert isinstance(kv_cache(sliding, 16), DynamicCache)
