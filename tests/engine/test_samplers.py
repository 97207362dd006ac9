"""The samplers without a server: the rollout built from a server's completions, the policy
sync's bookkeeping, and the staleness bound of sampling ahead, each against fakes whose every
call is recorded (the real server: tests/engine/vllm_backend/test_vllm_trials.py)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from harness.engine.rollout import Rollout
from harness.engine.samplers import HfSampler
from harness.engine.samplers.policy_sync import PolicySync
from harness.engine.samplers.server_sampler import completions_rollout
from harness.engine.samplers.staleness import StaleSampler

PAD = 0
WAIT_S = 60  # the longest any test waits for the background thread to do what it must (it takes ms)


@dataclass(frozen=True)
class Completion:
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str = "stop"


def test_completions_become_the_rollout_the_hf_sampler_would_build():
    prompts = [[5, 6, 7], [8]]
    completions = [
        [Completion((11, 2), (-0.5, -0.25)), Completion((12, 13, 2), (-1.0, -2.0, -0.125))],
        [Completion((14,), (-3.0,), "length"), Completion((15, 16), (-0.75, -0.5), "length")],
    ]
    rollout = completions_rollout(prompts, completions, PAD, version=3)
    # prompts left-padded (every completion starts at one column), each repeated for its samples
    assert rollout.prompt_ids.tolist() == [[5, 6, 7], [5, 6, 7], [0, 0, 8], [0, 0, 8]]
    assert rollout.prompt_mask.tolist() == [[1, 1, 1], [1, 1, 1], [0, 0, 1], [0, 0, 1]]
    # completions right-padded to the longest, the stop token kept; log-probs 0 on padding
    assert rollout.completion_ids.tolist() == [[11, 2, 0], [12, 13, 2], [14, 0, 0], [15, 16, 0]]
    assert rollout.completion_mask.tolist() == [[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 0]]
    assert rollout.logprobs.tolist() == [[-0.5, -0.25, 0], [-1, -2, -0.125], [-3, 0, 0], [-0.75, -0.5, 0]]
    assert rollout.completion_mask.dtype == torch.float32 and rollout.logprobs.dtype == torch.float32
    assert rollout.policy_version.tolist() == [3, 3, 3, 3]
    assert rollout.cut_off(eos_id=2).tolist() == [False, False, True, True]


def test_completions_of_the_wrong_shape_are_refused():
    with pytest.raises(ValueError, match="expected 1 completions for each of 2 prompts"):
        completions_rollout([[1], [2]], [[Completion((3,), (-1.0,))]], PAD, version=0)


class FakeModel:
    """What ``PolicySync.publish`` reads of a policy: ``save_pretrained`` (and LoRA's ``peft_config``)."""

    def __init__(self, lora: bool):
        if lora:
            self.peft_config = {}

    def save_pretrained(self, path):
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "weights").write_text("w")


@dataclass
class FakeLM:
    model: FakeModel
    tokenizer: FakeModel
    device: torch.device = torch.device("cpu")


class FakeClient:
    def __init__(self):
        self.calls: list[tuple] = []
        self.loaded: set[str] = set()

    def load_adapter(self, name, path):
        assert Path(path, "weights").is_file()
        self.calls.append(("load", name))
        self.loaded.add(name)

    def unload_adapter(self, name):
        self.calls.append(("unload", name))
        self.loaded.remove(name)

    def reload_weights(self, folder):
        assert Path(folder, "weights").is_file()
        self.calls.append(("reload", Path(folder).name))


def test_lora_sync_loads_each_version_and_unloads_an_old_one_once_no_request_uses_it(tmp_path):
    client = FakeClient()
    sync = PolicySync(client, tmp_path, lora=True, served_model="base", prefix="p")
    lm = FakeLM(FakeModel(lora=True), FakeModel(lora=False))
    with pytest.raises(RuntimeError, match="publish"):
        sync.serving().__enter__()
    assert sync.publish(lm, 0) >= 0
    with sync.serving() as in_use:  # a request samples with version 0 ...
        assert in_use == (0, "p-v0")
        sync.publish(lm, 1)  # ... while version 1 arrives: v0 stays loaded, its folder kept
        assert client.loaded == {"p-v0", "p-v1"} and (tmp_path / "p-v0").is_dir()
    assert client.loaded == {"p-v1"} and not (tmp_path / "p-v0").exists()  # retired when the request ended
    sync.publish(lm, 2)
    with sync.serving() as in_use:
        assert in_use == (2, "p-v2")
    assert client.calls == [
        ("load", "p-v0"),
        ("load", "p-v1"),
        ("unload", "p-v0"),
        ("load", "p-v2"),
        ("unload", "p-v1"),
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p-v2"]
    sync.close()  # the trial's end: nothing of it stays on the server
    assert client.calls[-1] == ("unload", "p-v2") and client.loaded == set()


def test_full_fine_tuning_sync_reloads_the_saved_weights_and_keeps_the_served_name(tmp_path):
    client = FakeClient()
    sync = PolicySync(client, tmp_path, lora=False, served_model="base", prefix="p")
    lm = FakeLM(FakeModel(lora=False), FakeModel(lora=False))
    sync.publish(lm, 0)
    sync.publish(lm, 1)
    with sync.serving() as in_use:
        assert in_use == (1, "base")
    assert client.calls == [("reload", "p-v0"), ("reload", "p-v1")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p-v1"]  # the weights the server no longer reads: gone


class RecordingSampler:
    """A server sampler whose requests are recorded (the batch's first prompt id, the version it
    sampled with) and answered with one-token rows of that version."""

    def __init__(self):
        self.version = -1
        self.requests: list[tuple[int, int]] = []
        self.arrived = threading.Condition()

    def sample_ids(self, prompts, group_size, *, max_new_tokens, temperature):
        with self.arrived:
            self.requests.append((prompts[0][0], self.version))
            self.arrived.notify_all()
        rows = [[Completion((1,), (-1.0,))] * group_size for _ in prompts]
        return completions_rollout(prompts, rows, PAD, self.version)

    def sample_groups(self, lm, prompts, group_size, **sampling):
        return self.sample_ids([[int(p)] for p in prompts], group_size, **sampling)

    def publish(self, lm, version):
        self.version = version
        return 0.0

    def close(self):
        pass

    def wait_for(self, n: int) -> None:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.requests) >= n, timeout=WAIT_S)


class TokenLM:
    """A policy whose prompt i tokenises to [i] (what ``prompt_token_ids`` reads)."""

    device = torch.device("cpu")
    use_chat_template = False

    class tokenizer:
        bos_token_id = None

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [int(text)]}

    tokenizer = tokenizer()

    def format_prompt(self, prompt):
        return prompt


def _stale(inner, k: int, steps: int = 6) -> StaleSampler:
    batches = [[str(10 * s), str(10 * s + 1)] for s in range(steps)]
    sampling = {"max_new_tokens": 1, "temperature": 1.0}
    inner.publish(None, 0)
    sampler = StaleSampler(inner, TokenLM(), batches, group_size=2, max_staleness=k, **sampling)
    sampler.publish(None, 0)
    return sampler


def _step(sampler: StaleSampler, step: int) -> Rollout:
    """Step ``step`` (from 1) as the trial runs it: take its batch, then publish the new policy."""
    rollout = sampler.sample_groups(TokenLM(), [str(10 * (step - 1)), str(10 * (step - 1) + 1)], 2)
    sampler.publish(None, step)
    return rollout


@pytest.mark.parametrize("k", [1, 2, 3])
def test_sampling_ahead_runs_k_batches_ahead_of_training_and_no_further(k):
    inner = RecordingSampler()
    sampler = _stale(inner, k)
    # before any step trains, batches 0..k are sampled with version 0; batch k+1 waits for version 1
    inner.wait_for(k + 1)
    assert inner.requests == [(10 * b, 0) for b in range(k + 1)]
    for step in range(1, 7):
        rollout = _step(sampler, step)
        # every row records its version: never more than k behind the trained one (step - 1), and
        # the newest published when its request started (the thread may start it late, not early)
        version = rollout.policy_version.unique().tolist()
        assert len(version) == 1 and max(0, step - 1 - k) <= version[0] <= step - 1
    assert [b for b, _ in inner.requests] == [10 * b for b in range(6)]
    sampler.close()


def test_staleness_zero_samples_each_batch_with_the_policy_of_the_step_before():
    inner = RecordingSampler()
    sampler = _stale(inner, 0)
    for step in range(1, 5):
        assert _step(sampler, step).policy_version.tolist() == [step - 1] * 4
    assert inner.requests == [(10 * b, b) for b in range(4)]
    sampler.close()


def test_a_draw_outside_the_schedule_is_sampled_now_with_the_newest_policy():
    inner = RecordingSampler()
    sampler = _stale(inner, 2)
    _step(sampler, 1)
    extra = sampler.sample_groups(
        TokenLM(), ["777", "778"], 2, max_new_tokens=1, temperature=1.0
    )  # dynamic sampling's more prompts
    assert extra.policy_version.tolist() == [1] * 4 and (777, 1) in inner.requests
    assert _step(sampler, 2).prompt_ids[:, -1].tolist() == [10, 10, 11, 11]  # the schedule goes on
    sampler.close()


def test_a_failed_request_fails_the_step_that_needs_its_batch():
    class Failing(RecordingSampler):
        def sample_ids(self, prompts, group_size, **sampling):
            raise ConnectionError("the server went away")

    sampler = _stale(Failing(), 1)
    with pytest.raises(ConnectionError, match="went away"):
        _step(sampler, 1)
    sampler.close()


def test_the_hf_sampler_is_the_policy_sampling_itself():
    assert HfSampler().publish(None, 3) is None
