"""The reward model as it scores: a causal LM's trunk with a scalar head, saved to and loaded from
its folder.

The score of a completion is a linear head (no bias: Bradley-Terry identifies only differences)
on the trunk's last, normed hidden state (``model.get_decoder()``, through a peft wrapper too) at
the last real token of prompt + completion + EOS. The folder holds the trunk (``save_pretrained``,
a LoRA adapter merged into it), its tokenizer and the head (``HEAD_FILE``); its manifest is
written by the cache (``training``). ``load_reward_model`` checks the files against the
manifest's checksums before it loads them.

Loading needs no task and no training code, so a task's learned reward (``scorer``) loads a
model without importing either.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from harness.engine.models import LoadedModel, load_pretrained, pick_device
from harness.engine.reward_model.key import HEAD_FILE, read_manifest
from harness.engine.rollout import pad_rows, position_ids_of
from harness.engine.spec import ModelConfig
from harness.errors import ConfigError, one_line
from harness.ground.checked_cache import Unusable, verify

SCORE_BATCH = 64  # rows per forward pass when measuring


class ScalarRewardModel(torch.nn.Module):
    """A causal LM's trunk and a linear head on the hidden state of each row's last real token."""

    def __init__(self, trunk, head: torch.nn.Linear):
        super().__init__()
        self.trunk, self.head = trunk, head

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.trunk.get_decoder()(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids_of(attention_mask),
            use_cache=False,
        )
        last = attention_mask.sum(-1) - 1  # right-padded rows
        hidden = out.last_hidden_state[torch.arange(len(last), device=last.device), last]
        return self.head(hidden.float()).squeeze(-1)


def hidden_size(model) -> int:
    config = model.config.get_text_config(decoder=True) if hasattr(model.config, "get_text_config") else model.config
    return int(config.hidden_size)


@dataclass
class RewardModel:
    """A reward model ready to score: the module, the tokenizer and how prompts are written."""

    module: ScalarRewardModel
    lm: LoadedModel  # the trunk's tokenizer, device and prompt format (``format_prompt``)
    manifest: dict[str, Any]

    def encode(self, prompts: list[str], completions: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-padded ids and mask of prompt + completion + EOS per row (BOS first for plain prompts)."""
        tok = self.lm.tokenizer
        prefix = [tok.bos_token_id] if tok.bos_token_id is not None and not self.lm.use_chat_template else []
        limit = getattr(self.module.trunk.config, "max_position_embeddings", None)
        rows = []
        for prompt, completion in zip(prompts, completions, strict=True):
            ids = (
                prefix
                + tok(self.lm.format_prompt(prompt), add_special_tokens=False)["input_ids"]
                + tok(completion, add_special_tokens=False)["input_ids"]
                + [tok.eos_token_id]
            )
            rows.append(ids[-limit:] if limit else ids)
        return pad_rows(rows, tok.pad_token_id, left=False, device=self.lm.device)

    def forward(self, prompts: list[str], completions: list[str]) -> torch.Tensor:
        return self.module(*self.encode(prompts, completions))

    @torch.no_grad()
    def scores(self, prompts: list[str], completions: list[str], batch_size: int = SCORE_BATCH) -> list[float]:
        """The raw score of each completion, in eval mode, without gradients, ``batch_size`` rows a pass."""
        training = self.module.training
        self.module.eval()
        try:
            out: list[float] = []
            for start in range(0, len(prompts), batch_size):
                part = slice(start, start + batch_size)
                out += self.forward(prompts[part], completions[part]).tolist()
            return out
        finally:
            self.module.train(training)

    def normalised(self, raw: list[float]) -> list[float]:
        """Scores shifted and scaled to zero mean and unit sd over the held-out completions."""
        mean, std = self.manifest["score_mean"], self.manifest["score_std"]
        return [(r - mean) / std for r in raw]


def new_reward_model(lm: LoadedModel, seed: int) -> RewardModel:
    """``lm``'s trunk with a new scalar head (torch's default init, seeded), to be trained."""
    torch.manual_seed(seed)
    head = torch.nn.Linear(hidden_size(lm.model), 1, bias=False).to(lm.device)
    return RewardModel(ScalarRewardModel(lm.model, head), lm, {})


def load_reward_model(folder: str | Path, device: torch.device | str | None = None) -> RewardModel:
    """The reward model saved in ``folder``, its files checked against the manifest's checksums;
    a folder that is not one, or whose files do not match, is a one-line ``ConfigError``."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    try:
        verify(folder, manifest)
    except Unusable as problem:
        raise ConfigError(f"reward model {folder}: {problem}; train it again") from None
    return load_saved(folder, manifest, device)


def save_reward_model(module: ScalarRewardModel, lm: LoadedModel, folder: Path) -> None:
    """The trunk (a LoRA adapter merged into its weights), its tokenizer and the head, into ``folder``."""
    trunk = module.trunk
    if hasattr(trunk, "merge_and_unload"):
        trunk = trunk.merge_and_unload()
    trunk.save_pretrained(folder)
    lm.tokenizer.save_pretrained(folder)
    save_file({"weight": module.head.weight.detach().float().cpu().contiguous()}, str(folder / HEAD_FILE))


def load_saved(folder: Path, manifest: dict[str, Any], device=None) -> RewardModel:
    """The model in ``folder`` as ``save_reward_model`` wrote it, frozen, in eval mode; ``manifest``
    gives its dtype and prompt format (and, for ``normalised``, its score statistics). Unchecked:
    ``load_reward_model`` checks the files first."""
    device = torch.device(device) if device is not None else pick_device(ModelConfig())
    config = ModelConfig(
        dtype=manifest["dtype"],
        device="cuda" if device.type == "cuda" else "cpu",
        chat_template=manifest["prompt_format"] == "chat",
    )
    lm = load_pretrained(str(folder), config)
    lm.use_chat_template = manifest["prompt_format"] == "chat"
    head = torch.nn.Linear(hidden_size(lm.model), 1, bias=False)
    try:
        head.load_state_dict(load_file(str(folder / HEAD_FILE)))
    except Exception as err:  # noqa: BLE001 - any unreadable head: not this format
        raise ConfigError(
            f"reward model {folder}: its head {HEAD_FILE} does not load ({one_line(err, limit=300)})"
        ) from None
    module = ScalarRewardModel(lm.model, head.to(lm.device)).eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return RewardModel(module, lm, manifest)
