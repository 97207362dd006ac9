import torch

from harness.engine.logprobs import completion_forward
from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer
from harness.engine.rollout import (
    decode_completions,
    encode_prompts,
    sample,
)
from harness.engine.spec import ModelConfig


def _tiny_lm(seed=0) -> LoadedModel:
    tok = char_tokenizer("0123456789+=")
    config = ModelConfig(tiny={"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64})
    model = build_tiny_model(config, len(tok), tok, seed=seed).eval()
    return LoadedModel(model, tok, torch.device("cpu"), use_chat_template=False)


def _sample(lm, prompts, seed, **kw):
    ids, mask = encode_prompts(lm, prompts)
    gen = torch.Generator().manual_seed(seed)
    return sample(lm, ids, mask, max_new_tokens=6, temperature=kw.pop("temperature", 1.0), generator=gen, **kw)


def test_prompts_are_left_padded_with_bos():
    lm = _tiny_lm()
    ids, mask = encode_prompts(lm, ["1+2=", "12+34="])
    assert ids.shape == (2, 7)
    assert mask[0].tolist() == [0, 0, 1, 1, 1, 1, 1] and mask[1].tolist() == [1] * 7
    assert ids[0, 2] == lm.tokenizer.bos_token_id and ids[0, 0] == lm.tokenizer.pad_token_id


def test_mask_stops_after_eos_and_padding_is_pad():
    lm = _tiny_lm()
    torch.nn.init.zeros_(lm.model.lm_head.weight)  # uniform next-token distribution: EOS comes often
    rollout = _sample(lm, ["1+2="] * 64, seed=1)
    eos, pad = lm.tokenizer.eos_token_id, lm.tokenizer.pad_token_id
    ended = 0
    for ids, mask in zip(rollout.completion_ids, rollout.completion_mask):
        n = int(mask.sum())
        assert mask[:n].eq(1).all() and mask[n:].eq(0).all()
        assert ids[n:].eq(pad).all()
        if (ids[:n] == eos).any():
            ended += 1
            assert ids[n - 1] == eos and (ids[: n - 1] != eos).all()
    assert ended > 0
    assert rollout.logprobs[rollout.completion_mask == 0].eq(0).all()


def test_sampling_logprobs_equal_recomputed_logprobs():
    """At the sampling weights the importance ratio is exactly 1 (up to float error)."""
    lm = _tiny_lm()
    rollout = _sample(lm, ["1+2=", "12+34=", "5+5="] * 4, seed=2, temperature=0.7)
    with torch.no_grad():
        recomputed = completion_forward(lm.model, rollout, temperature=0.7).logprobs
    torch.testing.assert_close(recomputed, rollout.logprobs, atol=1e-5, rtol=0)


def test_left_padding_does_not_change_logprobs():
    lm = _tiny_lm()
    alone = _sample(lm, ["1+2="], seed=3, greedy=True)
    padded = _sample(lm, ["1+2=", "123+456="], seed=3, greedy=True)
    torch.testing.assert_close(padded.logprobs[0, : alone.logprobs.shape[1]], alone.logprobs[0], atol=1e-5, rtol=0)
    assert decode_completions(lm, alone)[0] == decode_completions(lm, padded)[0]


def test_same_generator_seed_same_tokens_and_other_seed_differs():
    lm = _tiny_lm()
    a, b, c = (_sample(lm, ["1+2="] * 16, seed=s) for s in (5, 5, 6))
    assert torch.equal(a.completion_ids, b.completion_ids) and torch.equal(a.logprobs, b.logprobs)
    assert not torch.equal(a.completion_ids, c.completion_ids)
