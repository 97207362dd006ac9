"""Load a causal LM and its tokenizer: the tiny offline testbed model, or any local/hub model.

The testbed model is a small Llama built from a config with a character-level tokenizer, so it
needs no download. Real models load with ``AutoModelForCausalLM.from_pretrained`` (a hub id or a
local folder), optionally wrapped in a LoRA adapter through peft.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

from harness.engine.model_prepare import local_model
from harness.engine.model_source import missing_chat_template
from harness.engine.spec import ModelConfig
from harness.engine.tasks.base import Task
from harness.engine.tasks.coverage import refuse_lost_characters, task_texts
from harness.engine.warmstart_key import auto_dtype
from harness.errors import ConfigError, one_line

SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>"]


@dataclass
class LoadedModel:
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerFast
    device: torch.device
    use_chat_template: bool

    def format_prompt(self, prompt: str) -> str:
        """The text the model sees: the chat template when it has one (and the config wants it)."""
        if self.use_chat_template:
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        return prompt


def char_tokenizer(alphabet: str) -> PreTrainedTokenizerFast:
    """A character-level tokenizer over ``alphabet`` (plus pad/bos/eos), built offline."""
    chars = sorted(set(alphabet))
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + chars)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split(pattern="", behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>")


def task_tokenizer(config: ModelConfig, task: Task, cache_dir: str) -> PreTrainedTokenizerFast:
    """The tokenizer a trial of ``config`` on ``task`` uses, loaded without the model (a GGUF
    model's from its prepared folder under ``cache_dir``, prepared now when it is not there)."""
    if config.name == "tiny":
        return char_tokenizer(task.alphabet)
    source = local_model(config.name, cache_dir)
    try:
        return AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as err:
        raise _unloadable(config.name, err) from err


def _lost_ids(tokenizer) -> set[int]:
    """Ids that stand for a character the tokenizer has no token of (the char tokenizer's is <pad>)."""
    return {i for i in (tokenizer.unk_token_id, tokenizer.pad_token_id) if i is not None}


def _is_lost(ids: list[int], lost_ids: set[int]) -> bool:
    """Whether a character's ids stand for nothing but "unknown" (none at all is whitespace a
    sentencepiece tokenizer folds into the next token, not a loss)."""
    return bool(ids) and set(ids) <= lost_ids


def lost_characters(tokenizer, texts: list[str]) -> tuple[list[str], float]:
    """The characters of ``texts`` that ``tokenizer`` cannot encode, the most frequent first, and
    their share of all the characters; more than ``MAX_LOST_SHARE`` is refused by the callers."""
    counts = Counter("".join(texts))
    lost_ids = _lost_ids(tokenizer)
    lost = sorted(
        (c for c in counts if _is_lost(tokenizer(c, add_special_tokens=False)["input_ids"], lost_ids)),
        key=lambda c: -counts[c],
    )
    return lost, sum(counts[c] for c in lost) / max(sum(counts.values()), 1)


def check_tokenizer(config: ModelConfig, task: Task, tokenizer) -> None:
    """Refuse, before any work, ``chat_template: true`` on a tokenizer (``task_tokenizer``'s)
    without a template, and a task whose characters it cannot encode: a model that reads every
    prompt as padding learns nothing (the tiny model has tokens for the task's ``alphabet`` only,
    and a natural-language task has none)."""
    uses_chat_template(config, tokenizer)
    lost, share = lost_characters(tokenizer, task_texts(task))
    refuse_lost_characters(task, config.name, lost, share)


def build_tiny_model(config: ModelConfig, vocab_size: int, tokenizer, seed: int) -> PreTrainedModel:
    tiny = config.tiny
    llama = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=tiny.hidden_size,
        intermediate_size=tiny.intermediate_size,
        num_hidden_layers=tiny.layers,
        num_attention_heads=tiny.heads,
        num_key_value_heads=tiny.heads,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(llama)


def pick_device(config: ModelConfig) -> torch.device:
    if config.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("model.device is 'cuda' but no CUDA device is visible; use 'auto' or 'cpu'")
    if config.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(config.device)


def pick_dtype(config: ModelConfig, device: torch.device) -> torch.dtype:
    return getattr(torch, auto_dtype(device.type) if config.dtype == "auto" else config.dtype)


def load_pretrained(source: str, config: ModelConfig, *, adapter_seed: int = 0) -> LoadedModel:
    """A local folder or hub id, on the chosen device and dtype, with LoRA when configured (its
    adapter initialised from ``adapter_seed``: the trial seed for a trial's policy)."""
    device = pick_device(config)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=pick_dtype(config, device))
    except (OSError, ValueError) as err:  # ValueError: a config transformers has no causal LM class for
        raise _unloadable(source, err) from err
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if config.lora is not None:
        model = with_lora(model, config, adapter_seed)
    model.to(device)
    return LoadedModel(model, tokenizer, device, uses_chat_template(config, tokenizer))


def uses_chat_template(config: ModelConfig, tokenizer) -> bool:
    """Whether prompts go through the tokenizer's chat template: it has one and ``chat_template``
    is auto or true (the testbed model never does: its warm start saves a tokenizer with no
    template); ``true`` on a tokenizer without one is a one-line ``ConfigError``."""
    if config.name == "tiny" or config.chat_template is False:
        return False
    has_template = getattr(tokenizer, "chat_template", None) is not None
    if config.chat_template is True and not has_template:
        raise missing_chat_template(config.name)
    return has_template


def _unloadable(source: str, err: Exception) -> ConfigError:
    return ConfigError(
        f"model.name {source!r}: cannot load it ({one_line(err, limit=300)}); give 'tiny', a local folder with "
        "config.json and weights, a .gguf file, package:NAME, or a hub id reachable from this machine"
    )


def enable_gradient_checkpointing(model: PreTrainedModel) -> None:
    """Recompute each decoder layer's activations in the backward pass instead of keeping them;
    transformers does it in train mode only. Non-reentrant, so the backward reaches a LoRA
    adapter's weights even though no input of a checkpointed layer requires grad."""
    enable = (
        getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    )  # older name
    enable({"use_reentrant": False})


def with_lora(model: PreTrainedModel, config: ModelConfig, seed: int) -> PreTrainedModel:
    """``model`` wrapped in the configured LoRA adapter. The adapter's random init (peft draws its
    A matrices from torch's global generator) comes from ``seed`` alone, whatever that generator
    held before, and leaves it as it was: without this, every seed of a study started from the
    same adapter, and a trial that built its warm start first from a different one than a re-run."""
    from peft import get_peft_model

    peft_config = lora_config(config)
    cuda = sorted({p.device.index for p in model.parameters() if p.device.type == "cuda"})
    with torch.random.fork_rng(devices=cuda):  # the generators of wherever the weights are
        torch.manual_seed(seed)
        return get_peft_model(model, peft_config)


def lora_config(config: ModelConfig):
    """peft's ``LoraConfig`` of ``model.lora`` (what ``with_lora`` applies; a benchmark hands the
    same adapter to another trainer)."""
    from peft import LoraConfig

    lora = config.lora
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )
