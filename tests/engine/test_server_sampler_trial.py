"""A trial with ``rollout.backend: vllm`` end to end against a stand-in server: what the trial
sends, syncs, evaluates and logs, without vLLM (the real server:
tests/engine/vllm_backend/test_vllm_trials.py).

The stand-in answers as the server does: it serves the base model folder, reloads the published
weights into a model of its own (full fine-tuning's in-place reload) or loads a LoRA adapter
under its name, samples with the weights a request names (``harness.engine.rollout.sample``, a
generator of its own; temperature 0 is greedy) and returns each token's log-prob minus
``OFFSET``: a planted sampler-trainer mismatch of exactly ``OFFSET`` per token where the weights
are the same. It keeps every policy version it held, and each request with the version it was
answered by."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest
import torch
from peft import PeftModel
from pydantic import ValidationError
from transformers import AutoModelForCausalLM

from harness.engine.evaluation import evaluate
from harness.engine.models import LoadedModel
from harness.engine.rollout import pad_rows, prompt_token_ids, sample
from harness.engine.samplers import backend
from harness.engine.tasks import build_task
from harness.engine.trial import run_trial
from harness.engine.vllm.client import SampledCompletion
from harness.engine.vllm.serving import Served

OFFSET = 0.05


class Request(NamedTuple):
    model: str  # the name the request gave: "base", or an adapter's
    version: str  # the policy version that answered: the adapter's name, or the reloaded folder's
    prompts: tuple[tuple[int, ...], ...]
    n: int
    temperature: float


def _load(folder: str):
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


class StandInServer:
    def __init__(self, lm: LoadedModel, folder: str):
        self.tokenizer, self.device, self.folder = lm.tokenizer, lm.device, folder
        self.served = {"base": _load(folder)}  # the name a request gives -> the weights it samples with
        self.held = {"base": self.served["base"]}  # every version ever served, by its name
        self.weights = "base"  # the version "base" names now (full fine-tuning reloads it)
        self.reloads: list[str] = []
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.generator = torch.Generator().manual_seed(0)

    def reload_weights(self, folder: str) -> None:
        model = _load(folder)
        with self.lock:
            self.served["base"] = self.held[Path(folder).name] = model
            self.weights = Path(folder).name
            self.reloads.append(self.weights)

    def load_adapter(self, name: str, path: str) -> None:
        model = PeftModel.from_pretrained(_load(self.folder), path).eval()
        with self.lock:
            assert name not in self.served
            self.served[name] = self.held[name] = model

    def unload_adapter(self, name: str) -> None:
        with self.lock:
            del self.served[name]

    def complete(self, prompt_token_ids, *, n, max_tokens, temperature, model, top_p=1.0, stop_token_ids=()):
        assert top_p == 1.0 and list(stop_token_ids) == [self.tokenizer.eos_token_id]
        with self.lock:
            version = self.weights if model == "base" else model
            self.requests.append(Request(model, version, tuple(map(tuple, prompt_token_ids)), n, temperature))
            policy = LoadedModel(self.served[model], self.tokenizer, self.device, use_chat_template=False)
            ids, mask = pad_rows([list(p) for p in prompt_token_ids], self.tokenizer.pad_token_id, left=True)
            rollout = sample(
                policy,
                ids,
                mask,
                max_new_tokens=max_tokens,
                temperature=temperature or 1.0,
                greedy=temperature == 0,
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


class StandIns(NamedTuple):
    servers: list[StandInServer]  # every stand-in a trial started, in order
    policies: list[LoadedModel]  # the policy of each of those trials (its tokenizer and prompt format)


@pytest.fixture
def stand_in(monkeypatch):
    servers: list[StandInServer] = []

    @contextmanager
    def server(folder, *, vocab_size, **settings):
        assert Path(folder, "config.json").is_file()  # the warm start's folder, which the server would load
        servers.append(StandInServer(policy[0], folder))
        yield Served(servers[-1], "base")

    policy = []
    base_folder = backend.base_folder

    def remembered(lm):
        policy.append(lm)
        return base_folder(lm)

    monkeypatch.setattr(backend, "served", server)
    monkeypatch.setattr(backend, "base_folder", remembered)
    return StandIns(servers, policy)


@pytest.mark.parametrize("k", [0, 2])
def test_a_server_backed_trial_syncs_every_step_and_logs_its_mismatch_and_staleness(make_spec, stand_in, k):
    spec = make_spec("grpo", seed=1, rollout={"backend": "vllm", "max_staleness": k}, train={"steps": 4})
    result = run_trial(spec)
    assert result.status == "completed" and [row["step"] for row in result.history] == [0, 1, 2, 3, 4]
    (server,) = stand_in.servers
    # the starting policy, then the one after every step, each saved and reloaded once
    assert [name.rsplit("-", 1)[1] for name in server.reloads] == ["v0", "v1", "v2", "v3", "v4"]
    assert {request.version.rsplit("-", 1)[1] for request in server.requests if request.temperature == 0} == {
        "v0",
        "v4",
    }  # the evaluations, at the start and after the last step
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


@pytest.mark.parametrize(("lora", "k"), [(False, 0), (True, 0), (True, 2)])
def test_every_evaluation_goes_to_the_server_with_the_policy_of_its_step(make_spec, stand_in, lora, k):
    """The start, every eval_every-th step and the last are evaluated by the server, each with the
    version its step published (the adapter of that name, or the weights reloaded from it), the
    greedy completion alone (temperature 0) and the k samples at the training temperature, on the
    held-out prompts' token ids; the greedy scores are the hf evaluation's of the same weights."""
    model = {"lora": {"r": 4, "alpha": 8}} if lora else {}
    train = {"steps": 4, "eval_every": 2, "eval_samples": 3}
    spec = make_spec("grpo", seed=2, rollout={"backend": "vllm", "max_staleness": k}, train=train, model=model)
    result = run_trial(spec)
    (server,) = stand_in.servers
    assert [scores.step for scores in result.prompts] == [0, 2, 4]
    task = build_task(spec.task, cache_dir=spec.cache_dir)
    (lm,) = stand_in.policies
    items = list(task.eval[: spec.train.max_eval_prompts])
    held_out = tuple(map(tuple, prompt_token_ids(lm, [item.prompt for item in items])))
    evaluations = [r for r in server.requests if set(r.prompts) <= set(held_out)]
    for scores in result.prompts:
        ours = [r for r in evaluations if r.version.endswith(f"-v{scores.step}")]
        assert {(r.n, r.temperature) for r in ours} == {(1, 0.0), (3, spec.train.temperature)}
        for n in (1, 3):
            assert tuple(p for r in ours if r.n == n for p in r.prompts) == held_out
        (version,) = {r.version for r in ours}
        assert {r.model for r in ours} == {version if lora else "base"}  # the adapter by its name, or the reload
        weights = LoadedModel(server.held[version], lm.tokenizer, lm.device, lm.use_chat_template)
        assert scores.greedy == evaluate(weights, task, spec.train, scores.step).greedy
        assert len(scores.sampled_mean) == len(held_out) and scores.samples == 3
    assert len(evaluations) == 2 * len(result.prompts)  # no evaluation with any other version
    # the versions evaluated are not one policy: the last is the trained one, not the start
    start, last = server.held[evaluations[0].version], server.held[evaluations[-1].version]
    assert any(not torch.equal(a, b) for a, b in zip(start.parameters(), last.parameters()))


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
