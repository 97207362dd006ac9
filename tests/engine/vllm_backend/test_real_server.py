"""A real vLLM server of SmolLM2-135M-Instruct (one per session, ``vllm_server``) against the
harness's own fp32 model on the same prompts: the sampler's log-probs are the temperature-scaled
ones the ``hf`` backend uses, greedy decoding gives the same tokens, a LoRA adapter loaded at run
time and a full model reloaded in place are what the server then samples from."""

from __future__ import annotations

import pytest
import torch

from harness.engine.models import load_pretrained
from harness.engine.rollout import prompt_token_ids
from harness.engine.spec import ModelConfig
from harness.engine.vllm.errors import VllmRequestError, VllmTiedHeadReload

pytestmark = pytest.mark.slow

PROMPTS = ["What is 2 + 3?", "Name a colour.", "Count from 1 to 5.", "Write one word."]
#: how far vLLM's CPU kernels (fp32) may be from transformers' fp32 forward pass, per token log-prob
LOGPROB_TOLERANCE = 2e-3


@pytest.fixture(scope="module")
def hf(smollm2):
    return load_pretrained(smollm2.folder, ModelConfig(name=smollm2.folder, dtype="float32", device="cpu"))


def hf_logprobs(model, prompt: list[int], completion: tuple[int, ...], temperature: float) -> list[float]:
    """The fp32 model's log-probs of ``completion`` after ``prompt``, from logits / temperature."""
    ids = torch.tensor([prompt + list(completion)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(-1, torch.tensor(completion)[:, None]).squeeze(-1).tolist()


def test_sampled_logprobs_are_the_temperature_scaled_ones_of_the_hf_backend(vllm_server, hf):
    client = vllm_server.client(vocab_size=len(hf.tokenizer))
    prompts = prompt_token_ids(hf, PROMPTS)
    temperature = 0.7
    rows = client.complete(prompts, n=3, max_tokens=12, temperature=temperature, model=vllm_server.model_name)
    assert [len(r) for r in rows] == [3] * len(PROMPTS)
    gaps, unscaled_gaps = [], []
    for prompt, samples in zip(prompts, rows):
        for s in samples:
            assert len(s.token_ids) == len(s.logprobs) >= 1
            assert s.finish_reason == ("stop" if s.token_ids[-1] == hf.tokenizer.eos_token_id else "length")
            ref = hf_logprobs(hf.model, prompt, s.token_ids, temperature)
            gaps += [abs(a - b) for a, b in zip(s.logprobs, ref)]
            raw = hf_logprobs(hf.model, prompt, s.token_ids, 1.0)
            unscaled_gaps += [abs(a - b) for a, b in zip(s.logprobs, raw)]
    assert max(gaps) < LOGPROB_TOLERANCE, f"vLLM vs hf log-probs differ by up to {max(gaps):.3g}"
    # the check can tell: the unscaled distribution's log-probs are far from what came back
    assert max(unscaled_gaps) > 50 * LOGPROB_TOLERANCE


def test_greedy_completions_are_the_hf_backends_and_keep_their_eos(vllm_server, hf):
    from harness.engine.rollout import sample_groups

    client = vllm_server.client(vocab_size=len(hf.tokenizer))
    rows = client.complete(
        prompt_token_ids(hf, PROMPTS), n=1, max_tokens=16, temperature=0.0, model=vllm_server.model_name
    )
    rollout = sample_groups(hf, PROMPTS, 1, max_new_tokens=16, temperature=1.0, generator=None, greedy=True)
    for i, ((s,), mask) in enumerate(zip(rows, rollout.completion_mask)):
        hf_tokens = tuple(rollout.completion_ids[i, : int(mask.sum())].tolist())
        assert s.token_ids == hf_tokens, f"prompt {PROMPTS[i]!r}"
        ref = rollout.logprobs[i, : len(hf_tokens)].tolist()
        assert max(abs(a - b) for a, b in zip(s.logprobs, ref)) < LOGPROB_TOLERANCE


def _save_random_adapter(hf, path, seed: int) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(hf.model.name_or_path, dtype=torch.float32)
    torch.manual_seed(seed)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = get_peft_model(base, config)
    model.save_pretrained(path)
    return model


def test_a_lora_adapter_loaded_at_run_time_is_what_the_server_samples_from(vllm_server, hf, tmp_path):
    adapter = _save_random_adapter(hf, tmp_path / "adapter", seed=1)
    client = vllm_server.client(vocab_size=len(hf.tokenizer))
    prompts = prompt_token_ids(hf, PROMPTS[:2])
    client.load_adapter("step-1", str(tmp_path / "adapter"))
    assert "step-1" in client.served_models()
    tuned = client.complete(prompts, n=2, max_tokens=10, temperature=1.0, model="step-1")
    base = client.complete(prompts, n=2, max_tokens=10, temperature=1.0, model=vllm_server.model_name)
    gaps, base_gaps = [], []
    for prompt, samples, base_samples in zip(prompts, tuned, base):
        for s in samples:
            gaps += [abs(a - b) for a, b in zip(s.logprobs, hf_logprobs(adapter, prompt, s.token_ids, 1.0))]
        for s in base_samples:
            base_gaps += [abs(a - b) for a, b in zip(s.logprobs, hf_logprobs(adapter, prompt, s.token_ids, 1.0))]
    assert max(gaps) < LOGPROB_TOLERANCE, f"adapter log-probs differ from peft's by up to {max(gaps):.3g}"
    assert max(base_gaps) > 50 * LOGPROB_TOLERANCE  # the base model's are not the adapter's
    client.unload_adapter("step-1")
    with pytest.raises(VllmRequestError, match="HTTP 404"):
        client.complete(prompts, n=1, max_tokens=2, temperature=1.0, model="step-1")


def _server_reload(client, folder) -> None:
    """vLLM's own in-place reload, without the client's refusal of a tied LM head."""
    client._post(
        "/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": str(folder)}}, expect_json=False
    )
    client._post("/reset_prefix_cache", None, expect_json=False)


def test_full_weights_reload_in_place_but_a_tied_lm_head_keeps_its_start(vllm_server, hf, tmp_path, smollm2):
    """Last in the file: it changes the session server's weights (and puts them back).

    vLLM's reload takes a changed ``down_proj`` exactly; a changed embedding matrix, which
    SmolLM2 ties to its LM head, leaves the server matching neither the new weights nor the old
    (it keeps the head it started with). That is why the client refuses to reload a tied model:
    when this test's second half fails, vLLM reloads tied heads and the refusal can go."""
    from transformers import AutoModelForCausalLM

    def changed(pick, name, scale):
        model = AutoModelForCausalLM.from_pretrained(smollm2.folder, dtype=torch.float32)
        with torch.no_grad():
            torch.manual_seed(2)
            for weight in pick(model):
                weight.add_(torch.randn_like(weight) * scale)
        model.save_pretrained(tmp_path / name)
        return model

    mlp = changed(lambda m: [layer.mlp.down_proj.weight for layer in m.model.layers], "mlp", 0.02)
    head = changed(lambda m: [m.model.embed_tokens.weight], "head", 0.002)
    client = vllm_server.client(vocab_size=len(hf.tokenizer))
    prompts = prompt_token_ids(hf, PROMPTS[:2])

    def worst_gap(reference) -> float:
        rows = client.complete(prompts, n=2, max_tokens=8, temperature=1.0, model=vllm_server.model_name)
        return max(
            abs(a - b)
            for prompt, samples in zip(prompts, rows)
            for s in samples
            for a, b in zip(s.logprobs, hf_logprobs(reference, prompt, s.token_ids, 1.0))
        )

    with pytest.raises(VllmTiedHeadReload):
        client.reload_weights(str(tmp_path / "mlp"))
    try:
        _server_reload(client, tmp_path / "mlp")
        assert worst_gap(mlp) < LOGPROB_TOLERANCE
        assert worst_gap(hf.model) > 10 * LOGPROB_TOLERANCE
        _server_reload(client, tmp_path / "head")
        assert worst_gap(head) > 10 * LOGPROB_TOLERANCE  # not the reloaded weights
        assert worst_gap(hf.model) > 10 * LOGPROB_TOLERANCE  # nor the start's
    finally:
        _server_reload(client, smollm2.folder)
    assert worst_gap(hf.model) < LOGPROB_TOLERANCE
