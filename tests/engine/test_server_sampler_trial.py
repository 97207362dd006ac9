"""A trial with ``rollout.backend: vllm`` end to end against a stand-in server: what the trial
sends, syncs and logs, without vLLM (the real server: tests/engine/vllm_backend/test_vllm_trials.py).

The stand-in answers as the server does: it reloads the published weights into a model of its
own (full fine-tuning's in-place reload), samples with it (``harness.engine.rollout.sample``, a
generator of its own) and returns each token's log-prob minus ``OFFSET``: a planted
sampler-trainer mismatch of exactly ``OFFSET`` per token where the weights are the same."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from transformers import AutoModelForCausalLM

from harness.engine.models import LoadedModel
from harness.engine.rollout import pad_rows, sample
from harness.engine.samplers import backend
from harness.engine.trial import run_trial
from harness.engine.vllm.client import SampledCompletion
from harness.engine.vllm.serving import Served

OFFSET = 0.05


class StandInServer:
    def __init__(self, lm: LoadedModel):
        self.tokenizer, self.device = lm.tokenizer, lm.device
        self.model = None
        self.reloads: list[str] = []
        self.lock = threading.Lock()
        self.generator = torch.Generator().manual_seed(0)

    def reload_weights(self, folder: str) -> None:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        with self.lock:
            self.model = model
            self.reloads.append(Path(folder).name)

    def complete(self, prompt_token_ids, *, n, max_tokens, temperature, model, top_p=1.0, stop_token_ids=()):
        assert model == "base" and top_p == 1.0 and list(stop_token_ids) == [self.tokenizer.eos_token_id]
        with self.lock:
            policy = LoadedModel(self.model, self.tokenizer, self.device, use_chat_template=False)
            ids, mask = pad_rows([list(p) for p in prompt_token_ids], self.tokenizer.pad_token_id, left=True)
            rollout = sample(
                policy,
                ids,
                mask,
                max_new_tokens=max_tokens,
                temperature=temperature,
                generator=self.generator,
                group_size=n,
            )
        out = []
        for i in range(len(prompt_token_ids)):
            per = []
            for row in range(i * n, i * n + n):
                length = int(rollout.completion_mask[row].sum())
                tokens = tuple(rollout.completion_ids[row, :length].tolist())
                logprobs = tuple((rollout.logprobs[row, :length] - OFFSET).tolist())
                per.append(SampledCompletion(tokens, logprobs, "stop" if length < max_tokens else "length"))
            out.append(per)
        return out


@pytest.fixture
def stand_in(monkeypatch):
    servers: list[StandInServer] = []

    @contextmanager
    def server(folder, *, vocab_size, **settings):
        assert Path(folder, "config.json").is_file()  # the warm start's folder, which the server would load
        servers.append(StandInServer(policy[0]))
        yield Served(servers[-1], "base")

    policy = []
    base_folder = backend.base_folder

    def remembered(lm):
        policy.append(lm)
        return base_folder(lm)

    monkeypatch.setattr(backend, "served", server)
    monkeypatch.setattr(backend, "base_folder", remembered)
    return servers


@pytest.mark.parametrize("k", [0, 2])
def test_a_server_backed_trial_syncs_every_step_and_logs_its_mismatch_and_staleness(make_spec, stand_in, k):
    spec = make_spec("grpo", seed=1, rollout={"backend": "vllm", "max_staleness": k}, train={"steps": 4})
    result = run_trial(spec)
    assert result.status == "completed" and [row["step"] for row in result.history] == [0, 1, 2, 3, 4]
    (server,) = stand_in
    # the starting policy, then the one after every step, each saved and reloaded once
    assert [name.rsplit("-", 1)[1] for name in server.reloads] == ["v0", "v1", "v2", "v3", "v4"]
    for row in result.history[1:]:
        assert row["time/weight_sync_s"] > 0
        assert 0 <= row["rollout/staleness_mean"] <= row["rollout/staleness_max"] <= k
        assert row["mismatch/abs_logp_max"] >= row["mismatch/abs_logp_mean"] > 0
        assert row["mismatch/kl_k3"] > 0 and row["mismatch/ratio_p05"] <= row["mismatch/ratio_p95"]
        if k == 0:  # the same weights on both sides: the planted offset alone, to rounding
            assert row["rollout/staleness_max"] == 0
            assert row["mismatch/abs_logp_mean"] == pytest.approx(OFFSET, abs=1e-5)
            assert row["mismatch/ratio_p50"] == pytest.approx(2.718281828**OFFSET, abs=1e-5)
    assert spec.trial_id != make_spec("grpo", seed=1, train={"steps": 4}).trial_id


def test_the_server_backend_is_refused_in_one_line_where_it_cannot_sample(make_spec):
    for sections, reason in [
        ({"task": {"tools": ["calculator"]}}, "tool-calling episodes"),
        ({"algorithm": "dpo"}, "a dpo arm samples its pairs"),
        ({"warmstart": {"enabled": False}}, "tiny model without a warm start"),
    ]:
        algorithm = sections.pop("algorithm", "grpo")
        with pytest.raises(ValidationError, match=reason):
            make_spec(algorithm, rollout={"backend": "vllm"}, **sections)
    with pytest.raises(ValidationError, match="needs rollout.backend: vllm"):
        make_spec("grpo", rollout={"max_staleness": 1})
