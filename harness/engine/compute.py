"""The compute a training step spends, as an estimate of floating-point operations (FLOPs).

Every row of a trial's history carries the compute spent so far (``COMPUTE_METRICS``, cumulative
from the start evaluation, which is all 0): ``compute/generated_tokens`` and
``compute/trained_tokens`` (the sums of ``tokens/generated`` and ``tokens/trained``),
``compute/wall_s`` (the steps' wall seconds; the held-out evaluations are not counted, so how
often a study evaluates does not move the axis; not reproducible: it changes with the machine
and its load) and ``compute/flops``, estimated here. Held-out evaluations are not training
compute and are not counted in any of them.

The estimate (after Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1)
counts each pass's matmuls in two parts, the **trunk** (every matmul parameter but the LM head:
the layers' projections, ``N_t``) and the **LM head** (the output embedding, tied to the input
one or not, ``N_h``), since a pass runs the trunk over every token it reads but the head only
where it needs logits:

    FLOPs = 2 N_t (S_t + F_t) + 2 N_h (S_h + F_h) + U_t T_t + U_h T_h  (+ the critic's trunk alike)
    U_t = 2 N_t + 2 N_t + 2 N_t,trainable (+ 2 N_t with gradient checkpointing)
    U_h = 2 N_h + 2 N_h + 2 N_h + 2 N_h,trainable

- ``N_t + N_h`` are the policy's **matmul parameters**: every parameter except the input
  embedding table, a lookup with no multiplications (a token's pass multiplies by each of the
  others once, 2 FLOPs a multiply-add). Kaplan's non-embedding count leaves the head out too,
  which at a 150k vocabulary and 0.5B parameters would miss a quarter of the work.
- ``S_t``, ``S_h``: the sampling passes (``sampling_pass``: ``harness.engine.rollout.sample``).
  Each prompt is prefilled once for its group (``_prefill``: the trunk over its real tokens, the
  head at its last position only), then each completion token but the last is fed back (the
  trunk and the head, for the next token's logits); the last token, never fed back, costs
  nothing. A tool-calling episode's first turn is that; each later turn prefills the
  episode's whole conversation so far again (the cache lives within a turn) and feeds its own
  tokens back the same way. A vLLM server is counted as the same passes (its prefix cache
  serves a group's prompt once when it hits).
- ``F_t``, ``F_h``: the no-grad passes of the policy (or of a same-size copy): the reference's
  log-probs, which every RL step computes (``train/kl_ref`` is logged whatever the KL's
  placement) and a DPO step computes on its pairs; the old log-probs when they are recomputed
  (``old_logprobs: recompute``, or ``auto`` in bf16/fp16, or a mismatch correction, or tool
  tokens in the loss). Each is ``logprob_pass``: ``harness.engine.logprobs.completion_forward``
  runs the trunk over every real token of every row (prompt and completion; a row's prompt is
  read once per row) and the head only at the positions that predict a completion token of
  the loss mask. The critic's old values on the policy's trunk, when no recompute pass gave its
  hidden states, are ``hidden_pass``: the trunk alone.
- ``T_t``, ``T_h``: the same counts for the rows the update passes read, once per epoch: a
  forward (2 N), a backward through the activations (2 N) and the weight gradients of the
  trained parameters (2 N_trainable: N for full fine-tuning, which gives the usual 6 N; the
  adapters' few for LoRA, about 4 N), plus one more forward of the trunk with gradient
  checkpointing. The head's logits are computed in checkpointed chunks
  (``harness.engine.logprobs``), so the backward pass computes them once more: 2 N_h more.
- A critic with a trunk of its own (``value_model``): its no-grad pass for the old values and
  its updates, ``hidden_pass`` of the same rows, counted the same way with its trunk; a value
  head on the policy's trunk reads hidden states a policy pass computed, and its one-output
  head is not counted.
- A distillation teacher (issue 35): its no-grad ``logprob_pass`` of the step's rollout,
  counted with the teacher's own trunk and head.

Left out: attention's context term (2 x layers x context x width a token, a few percent at
contexts under a thousand tokens), padding and the positions of finished rows that a batch
still computes (they depend on the batching, not on the algorithm), layer norms, activations,
the softmax, the optimiser's own arithmetic, a LoRA reference's skipped adapter matmuls (the
adapter's few parameters are counted as the policy's) and the one-off check of each model's
head on 8 tokens. The estimate counts the algorithm's work; a GPU's utilisation is another
matter.

Trials run before this counting (2026-12-05) counted every pass at the whole model on every
prompt and completion token of every row, sampling included: about 1.2x the reference and update
passes of a SmolLM2 step and 2.8x its sampling, 1.09-1.16x a testbed step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torch import Tensor, nn

from harness.engine.spec import COMPUTE_METRICS

if TYPE_CHECKING:
    from harness.engine.episodes import Episode
    from harness.engine.rollout import Rollout

#: a step's FLOPs, in the metrics ``rl_step`` and ``dpo_step`` return; the trial adds it up
STEP_FLOPS = "compute/step_flops"


@dataclass(frozen=True)
class ModelSize:
    """What a token's pass through a model multiplies by: its trunk and its LM head."""

    trunk: int  # every matmul parameter but the LM head's (the input embedding table is a lookup)
    head: int  # the LM head's (the output embedding, tied or not); 0 for a trunk alone
    trunk_trainable: int  # of the trunk's, the ones the optimiser updates
    head_trainable: int
    checkpointed: bool = False  # gradient checkpointing: the backward pass runs the trunk's forward again
    #: the head's logits are recomputed in the backward pass (the harness's chunks are checkpointed;
    #: a trainer that keeps them, TRL, sets False)
    head_recomputed: bool = True

    @property
    def matmul(self) -> int:
        return self.trunk + self.head

    @property
    def trainable(self) -> int:
        return self.trunk_trainable + self.head_trainable

    @property
    def trunk_update_flops(self) -> int:
        """FLOPs of one token's forward and backward pass through the trunk."""
        again = 2 * self.trunk if self.checkpointed else 0
        return 4 * self.trunk + 2 * self.trunk_trainable + again

    @property
    def head_update_flops(self) -> int:
        """FLOPs of one position's logits, forward and backward."""
        again = 2 * self.head if self.head_recomputed else 0
        return 4 * self.head + 2 * self.head_trainable + again


def model_size(model: nn.Module, *, checkpointed: bool = False, head: bool = True) -> ModelSize:
    """``model``'s matmul parameters (each shared tensor once), trunk and LM head apart, and how
    many of them are trained; ``head=False``: its trunk's only (a critic's copy, whose LM head no
    pass runs)."""
    embedding = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    head_params = [] if output is None else list(output.parameters())  # a tied head: the embedding's weight
    not_trunk = {id(p) for p in head_params} | {id(embedding)}  # the head, and the lookup table
    trunk = [p for p in model.parameters() if id(p) not in not_trunk]  # a shared tensor is listed once
    lm_head = head_params if head else []
    return ModelSize(
        trunk=sum(p.numel() for p in trunk),
        head=sum(p.numel() for p in lm_head),
        trunk_trainable=sum(p.numel() for p in trunk if p.requires_grad),
        head_trainable=sum(p.numel() for p in lm_head if p.requires_grad),
        checkpointed=checkpointed,
    )


@dataclass(frozen=True)
class PassTokens:
    """What passes ran through a model: tokens through its trunk, positions through its LM head."""

    trunk: Tensor | float = 0.0
    head: Tensor | float = 0.0

    def __add__(self, other: PassTokens) -> PassTokens:
        return PassTokens(self.trunk + other.trunk, self.head + other.head)

    def __mul__(self, times: Tensor | float) -> PassTokens:
        return PassTokens(self.trunk * times, self.head * times)


NONE = PassTokens()


@dataclass(frozen=True)
class StepTokens:
    """The tokens each kind of pass of one step processed."""

    sampled: PassTokens = NONE  # the sampling passes, every draw's
    forward: PassTokens = NONE  # no-grad passes of the policy or a same-size copy
    updated: PassTokens = NONE  # forward and backward passes of the policy, summed over epochs
    critic_forward: PassTokens = NONE  # no-grad passes of a critic's own trunk
    critic_updated: PassTokens = NONE  # its forward and backward passes, summed over epochs
    teacher_forward: PassTokens = NONE  # no-grad passes of a distillation teacher (issue 35)


def _flops(size: ModelSize, forward: PassTokens, updated: PassTokens) -> Tensor | float:
    forward_flops = 2 * size.trunk * forward.trunk + 2 * size.head * forward.head
    return forward_flops + size.trunk_update_flops * updated.trunk + size.head_update_flops * updated.head


def step_flops(
    tokens: StepTokens, policy: ModelSize, critic: ModelSize | None = None, teacher: ModelSize | None = None
) -> Tensor | float:
    """The step's estimated FLOPs (the module's formula); a tensor when the counts are."""
    flops = _flops(policy, tokens.sampled + tokens.forward, tokens.updated)
    if critic is not None:
        flops = flops + _flops(critic, tokens.critic_forward, tokens.critic_updated)
    if teacher is not None:
        flops = flops + _flops(teacher, tokens.teacher_forward, NONE)
    return flops


def logprob_pass(rollout: Rollout) -> PassTokens:
    """``completion_forward`` over ``rollout``: the trunk over every real token of every row, the
    head at each position that predicts a completion token of the loss mask (float64 counts)."""
    return PassTokens(rollout.attention_mask.sum().double(), rollout.completion_mask.sum().double())


def hidden_pass(rollout: Rollout) -> PassTokens:
    """``completion_hidden`` over ``rollout`` (a critic's values): the trunk alone."""
    return PassTokens(trunk=rollout.attention_mask.sum().double())


def sampling_pass(rollout: Rollout, group_size: int, episodes: Sequence[Episode] | None = None) -> PassTokens:
    """What sampling ``rollout`` (rows grouped by prompt, ``group_size`` each) ran: each prompt
    prefilled once (the trunk over it, the head at its last position), each sampled token but a
    row's last fed back. ``episodes``: the tool-calling episodes the rows are, whose later turns
    prefill the conversation so far again (``episode_sampling_pass``)."""
    if episodes is not None:
        return episode_sampling_pass(episodes, group_size)
    prompts = rollout.prompt_mask[::group_size]
    fed_back = (rollout.sampled.sum(1) - 1).clamp(min=0).sum().double()
    return PassTokens(prompts.sum().double() + fed_back, float(len(prompts)) + fed_back)


def episode_sampling_pass(episodes: Sequence[Episode], group_size: int) -> PassTokens:
    """What sampling ``episodes`` (``group_size`` per prompt, in order) ran, turn by turn
    (``harness.engine.episodes.sample_episodes``): the first turn prefills each prompt once for
    its group, a later turn prefills the episode's conversation so far; every turn's tokens but
    its last are fed back."""
    firsts = episodes[::group_size]  # one episode of each prompt
    trunk, head = float(sum(len(e.ids) for e in firsts)), float(len(firsts))
    for episode in episodes:
        read = len(episode.ids)  # the conversation so far: the prompt, then every piece
        for index, (ids, logprobs) in enumerate(episode.pieces):
            if logprobs is not None:  # a turn of the policy's
                if index:  # a later turn: its prompt is the conversation so far, prefilled again
                    trunk, head = trunk + read, head + 1
                fed_back = max(len(ids) - 1, 0)
                trunk, head = trunk + fed_back, head + fed_back
            read += len(ids)
    return PassTokens(trunk, head)


class ComputeTotals:
    """The compute spent so far in a trial: ``COMPUTE_METRICS`` on every row of its history."""

    def __init__(self, row: dict[str, float] | None = None) -> None:
        """From 0, or from the totals a history ``row`` holds (a trial resumed after that row)."""
        self.totals = dict.fromkeys(COMPUTE_METRICS, 0.0) if row is None else {k: row[k] for k in COMPUTE_METRICS}

    def add(self, step: dict[str, float]) -> dict[str, float]:
        """Add a step's metrics (its ``STEP_FLOPS`` taken out of them) and return the totals."""
        spent = {
            "compute/flops": step.pop(STEP_FLOPS),
            "compute/generated_tokens": step["tokens/generated"],
            "compute/trained_tokens": step["tokens/trained"],
            "compute/wall_s": step["time/step_s"],
        }
        for key, value in spent.items():
            self.totals[key] += value
        return dict(self.totals)
