"""The one judge through vLLM scores a checkpoint as the ``hf`` judge does: the start model
(step 0) and a LoRA checkpoint of SmolLM2-135M-Instruct on reasoning-gym prompts get the same
per-prompt greedy scores either way, in the same records (prompt ids, samples, steps). The
server is the session's, reached by its URL as a user's server is."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from harness.algorithms import resolve_algorithm
from harness.engine.evaluation import evaluate
from harness.engine.models import load_pretrained
from harness.engine.spec import TrialSpec
from harness.engine.tasks import build_task
from harness.trainers.checkpoints import Reader, vocabulary
from harness.trainers.faults import ProgramTrialError
from harness.trainers.judge import judge_checkpoints
from harness.trainers.vllm_judge import judge_through_vllm

pytestmark = pytest.mark.slow
pytest.importorskip("reasoning_gym", reason="the reasoning_gym task needs: pip install reasoning-gym")


def _spec(smollm2) -> TrialSpec:
    return TrialSpec(
        arm="grpo",
        seed=0,
        algorithm=resolve_algorithm("grpo", {"group_size": 2}),
        model={"name": smollm2.name, "dtype": "float32", "device": "cpu", "lora": {"r": 8, "alpha": 16}},
        task={
            "reasoning_gym": {
                "dataset": "chain_sum",
                "config": {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
                "answer": "tag_or_last_number",
            },
            "n_train": 20,
            "n_eval": 6,
        },
        warmstart={"enabled": False},
        train={"steps": 1, "max_new_tokens": 24, "eval_every": 0, "eval_samples": 2, "threads": 1},
        cache_dir=smollm2.cache_dir,
    )


def _adapter(folder: str, path) -> None:
    """A LoRA checkpoint as a program saves one: a peft adapter of the start model, not zero."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    torch.manual_seed(3)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    with torch.no_grad():
        model = get_peft_model(base, config)
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.mul_(0.05)  # a checkpoint that moved the model, not one that broke it
    model.save_pretrained(path)


def test_judge_through_vllm_gives_the_hf_judges_greedy_scores(vllm_server, smollm2, tmp_path):
    spec = _spec(smollm2)
    read: list[str] = []  # every text the verifier scores, in order

    def recorded(item, text):
        read.append(text)
        return verifier(item, text)

    task = build_task(spec.task, cache_dir=smollm2.cache_dir)
    verifier, task = task.reward, replace(task, reward=recorded)
    (tmp_path / "final").mkdir()
    _adapter(smollm2.folder, tmp_path / "final")
    document = {
        "model": {"start": smollm2.folder},
        "checkpoint_dir": str(tmp_path / "final"),
        "checkpoints_dir": str(tmp_path / "periodic"),
    }
    start = load_pretrained(smollm2.folder, spec.model.model_copy(update={"lora": None}))
    reader = Reader(start.tokenizer, start.device, start.use_chat_template, vocabulary(start.model))
    hf = [evaluate(start, task, spec.train, 0), *judge_checkpoints(spec, reader, document, task, {})]
    hf_read, read[:] = list(read), []
    served = judge_through_vllm(
        spec, reader, document, task, {}, log_path=tmp_path / "vllm.log", url=vllm_server.base_url
    )
    assert [s.step for s in served] == [s.step for s in hf] == [0, 1]
    n = len(task.eval)
    per_evaluation = n * (1 + spec.train.eval_samples)  # the greedy texts, then the samples'
    for e, (ours, theirs) in enumerate(zip(served, hf)):
        assert ours.prompt_ids == theirs.prompt_ids and ours.samples == theirs.samples == 2
        greedy = slice(e * per_evaluation, e * per_evaluation + n)
        differ = [pid for pid, a, b in zip(ours.prompt_ids, read[greedy], hf_read[greedy]) if a != b]
        assert not differ, f"step {ours.step}: greedy completions differ on prompts {differ}"
        assert ours.greedy == theirs.greedy
        assert all(0.0 <= v <= 1.0 for v in ours.sampled_mean)
    # the checkpoint is not the start model: its greedy completions differ from the start model's
    assert read[:n] != read[per_evaluation : per_evaluation + n]


def _bare_reader(folder: str) -> Reader:
    from transformers import AutoConfig, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    return Reader(tokenizer, torch.device("cpu"), True, AutoConfig.from_pretrained(folder).vocab_size)


def test_an_adapter_of_another_model_is_refused_before_a_server_starts(smollm2, tmp_path):
    spec = _spec(smollm2)
    (tmp_path / "final").mkdir()
    (tmp_path / "final" / "adapter_config.json").write_text('{"base_model_name_or_path": "/elsewhere", "r": 8}')
    document = {"model": {"start": smollm2.folder}, "checkpoint_dir": str(tmp_path / "final"), "checkpoints_dir": ""}
    with pytest.raises(ProgramTrialError, match="is of /elsewhere, not of the start model"):
        judge_through_vllm(spec, _bare_reader(smollm2.folder), document, None, {}, log_path=tmp_path / "log")
