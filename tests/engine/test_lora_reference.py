"""With LoRA the reference policy is the policy's own network with its adapter switched off: no
second copy of the weights comes to exist, and its log-probs are the base model's, before any
update and after updates have changed the adapter. (Without LoRA the reference is a frozen copy,
which the same memory count sees.)"""

from __future__ import annotations

import copy
import gc

import pytest
import torch

from harness.engine.learner import make_optimizer
from harness.engine.logprobs import completion_forward
from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer, with_lora
from harness.engine.reference import Reference
from harness.engine.rollout import sample_groups
from harness.engine.spec import ModelConfig

TINY = {"hidden_size": 32, "layers": 2, "heads": 2, "intermediate_size": 64}
PROMPTS = ["1+2=", "12+34=", "5+5="]  # different lengths: left padding
TEMPERATURE = 0.7


def _policy(lora: bool) -> tuple[LoadedModel, torch.nn.Module]:
    """A tiny Llama policy (wrapped in a LoRA adapter, or not) and a copy of its base model as it
    was, outside peft: what the reference must equal."""
    tok = char_tokenizer("0123456789+=")
    config = ModelConfig(tiny=TINY, lora={"r": 4, "alpha": 8} if lora else None)
    base = build_tiny_model(config, len(tok), tok, seed=0)
    twin = copy.deepcopy(base).eval()
    model = with_lora(base, config, seed=0) if lora else base
    return LoadedModel(model.eval(), tok, torch.device("cpu"), use_chat_template=False), twin


def _rollout(lm: LoadedModel):
    generator = torch.Generator().manual_seed(1)
    return sample_groups(lm, PROMPTS, 3, max_new_tokens=6, temperature=TEMPERATURE, generator=generator)


def _live_tensor_bytes() -> int:
    """The bytes of every tensor storage alive in this process, each storage once."""
    gc.collect()
    storages = {}
    for obj in gc.get_objects():
        if issubclass(type(obj), torch.Tensor) and obj.device.type != "meta":  # type(): no __class__ lookups
            storages[obj.untyped_storage().data_ptr()] = obj.untyped_storage().nbytes()
    return sum(storages.values())


def _weight_bytes(model: torch.nn.Module) -> int:
    return sum(t.untyped_storage().nbytes() for t in (*model.parameters(), *model.buffers()))


@pytest.mark.slow
def test_the_lora_reference_adds_no_copy_of_the_weights_where_a_full_model_gets_one():
    lm, _ = _policy(lora=True)
    before = _live_tensor_bytes()
    reference = Reference(lm.model)
    assert _live_tensor_bytes() == before
    assert reference.logprobs(_rollout(lm), TEMPERATURE).abs().sum() > 0  # it is a working reference

    full, _ = _policy(lora=False)
    before = _live_tensor_bytes()
    copied = Reference(full.model)
    assert _live_tensor_bytes() - before >= _weight_bytes(full.model)  # the frozen copy: the count sees one
    del copied


def _base_logprobs(twin: torch.nn.Module, rollout) -> torch.Tensor:
    with torch.no_grad():
        return completion_forward(twin, rollout, temperature=TEMPERATURE).logprobs


def test_the_lora_reference_is_the_base_model_before_and_after_updates_change_the_adapter():
    lm, twin = _policy(lora=True)
    reference = Reference(lm.model)
    rollout = _rollout(lm)
    base = _base_logprobs(twin, rollout)
    torch.testing.assert_close(reference.logprobs(rollout, TEMPERATURE), base, atol=1e-6, rtol=0)

    weights = {name: p.detach().clone() for name, p in lm.model.named_parameters()}
    optimizer = make_optimizer([p for p in lm.model.parameters() if p.requires_grad], lm.device)
    lm.model.train()
    for _ in range(3):  # updates that raise the sampled tokens' log-probs: the policy moves
        loss = -completion_forward(lm.model, rollout, temperature=TEMPERATURE).logprobs.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    lm.model.eval()

    changed = {name for name, p in lm.model.named_parameters() if not torch.equal(p, weights[name])}
    assert changed and all("lora_" in name for name in changed)  # the adapter moved, the base did not
    with torch.no_grad():
        policy = completion_forward(lm.model, rollout, temperature=TEMPERATURE).logprobs
    assert (policy - base).abs().max() > 1e-3
    torch.testing.assert_close(reference.logprobs(rollout, TEMPERATURE), base, atol=1e-6, rtol=0)
    torch.testing.assert_close(_base_logprobs(twin, rollout), base, atol=0, rtol=0)  # the twin stood still
