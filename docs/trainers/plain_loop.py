"""A trial program in plain PyTorch: a short GRPO-style REINFORCE loop under the harness's
trial-program contract (docs/trainers.md). Run by a study as

    trainer: {kind: command, command: [python, docs/trainers/plain_loop.py, "{trial_file}"]}

It reads the trial file, loads the start model (``model.start``), and for ``train.steps`` steps
samples ``algorithm.group_size`` completions of ``train.prompts_per_step`` training prompts,
rewards each by exact match with the prompt's answer, and takes one Adam step on the
group-normalised advantage times the completion's log-probability (``algorithm.lr``). It writes
its final checkpoint to ``checkpoint_dir``, one to ``checkpoints_dir/step-N`` every
``train.eval_every`` steps, and its metrics to ``metrics_file``. Needs torch and transformers only.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def read_jsonl(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def prompt_ids(tokenizer, text: str) -> list[int]:
    """The ids the model reads: the text, after a BOS token when the tokenizer has one and the
    text does not start with it (a chat template usually brings its own)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    bos = tokenizer.bos_token_id
    return [bos, *ids] if bos is not None and ids[:1] != [bos] else ids


def sample(model, tokenizer, ids: list[int], group: int, max_new: int, temperature: float) -> torch.Tensor:
    """``group`` completions of one prompt (prompt ids first), padded after EOS."""
    prompt = torch.tensor([ids] * group)
    return model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        do_sample=True,
        temperature=temperature,
        max_new_tokens=max_new,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def completion_mask(tokens: torch.Tensor, start: int, eos: int) -> torch.Tensor:
    """1 on each completion token up to and including its first EOS, 0 elsewhere."""
    mask = torch.zeros_like(tokens, dtype=torch.float)
    for row in range(tokens.shape[0]):
        for col in range(start, tokens.shape[1]):
            mask[row, col] = 1.0
            if tokens[row, col].item() == eos:
                break
    return mask


def step_loss(model, tokens: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """REINFORCE: minus the advantage times the completion's log-probability, per token mean."""
    logits = model(tokens[:, :-1]).logits.float()
    logprobs = torch.log_softmax(logits, -1).gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)
    weights = mask[:, 1:]
    per_row = (logprobs * weights).sum(-1) / weights.sum(-1).clamp(min=1)
    return -(advantages * per_row).mean()


def main(trial_path: str) -> None:
    trial = json.loads(Path(trial_path).read_text(encoding="utf-8"))
    algorithm, train = trial["algorithm"], trial["train"]
    random.seed(trial["seed"])
    torch.manual_seed(trial["seed"])
    tokenizer = AutoTokenizer.from_pretrained(trial["model"]["start"])
    model = AutoModelForCausalLM.from_pretrained(trial["model"]["start"], dtype=torch.float32)
    optimizer = torch.optim.Adam(model.parameters(), lr=algorithm["lr"])
    prompts = read_jsonl(trial["train_prompts"])
    group = algorithm.get("group_size") or 4
    generated = trained = 0
    started = time.perf_counter()
    with open(trial["metrics_file"], "a", encoding="utf-8") as metrics:
        for step in range(1, train["steps"] + 1):
            clock = time.perf_counter()
            losses, rewards = [], []
            optimizer.zero_grad()
            for row in random.sample(prompts, min(train["prompts_per_step"], len(prompts))):
                ids = prompt_ids(tokenizer, row["text"])
                model.eval()
                with torch.no_grad():
                    tokens = sample(model, tokenizer, ids, group, train["max_new_tokens"], train["temperature"])
                model.train()
                texts = tokenizer.batch_decode(tokens[:, len(ids) :], skip_special_tokens=True)
                reward = torch.tensor([float(text.strip() == row["answer"]) for text in texts])
                advantage = (reward - reward.mean()) / (reward.std() + 1e-4) if group > 1 else reward
                mask = completion_mask(tokens, len(ids), tokenizer.eos_token_id)
                loss = step_loss(model, tokens, mask, advantage)
                loss.backward()
                losses.append(loss.item())
                rewards += reward.tolist()
                generated += int(mask.sum().item())
                trained += int(mask.sum().item())
            optimizer.step()
            row = {
                "step": step,
                "train/reward_mean": sum(rewards) / len(rewards),
                "train/loss": sum(losses) / len(losses),
                "time/step_s": time.perf_counter() - clock,
                "compute/generated_tokens": generated,
                "compute/trained_tokens": trained,
                "compute/wall_s": time.perf_counter() - started,
                "compute/gpus": 0,
            }
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()
            print(f"step {step}: reward {row['train/reward_mean']:.3f}", flush=True)
            if train["eval_every"] and step % train["eval_every"] == 0 and step < train["steps"]:
                model.save_pretrained(Path(trial["checkpoints_dir"]) / f"step-{step}")
    model.save_pretrained(trial["checkpoint_dir"])
    tokenizer.save_pretrained(trial["checkpoint_dir"])


if __name__ == "__main__":
    main(sys.argv[1])
