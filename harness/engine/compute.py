"""The compute a training step spends, as an estimate of floating-point operations (FLOPs).

Every row of a trial's history carries the compute spent so far (``COMPUTE_METRICS``, cumulative
from the start evaluation, which is all 0): ``compute/generated_tokens`` and
``compute/trained_tokens`` (the sums of ``tokens/generated`` and ``tokens/trained``),
``compute/wall_s`` (the steps' wall seconds; the held-out evaluations are not counted, so how
often a study evaluates does not move the axis; not reproducible: it changes with the machine
and its load) and ``compute/flops``, estimated here. Held-out evaluations are not training
compute and are not counted in any of them.

The estimate (after Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1):

    FLOPs = 2 N (S + F) + U_policy T + 2 N_c F_c + U_critic T_c
    U = 2 N + 2 N + 2 N_trainable (+ 2 N with gradient checkpointing)

- ``N`` is the policy's **matmul parameters**: every parameter except the input embedding table.
  A token's pass multiplies by each of them once (2 FLOPs a multiply-add); the input embedding is
  a lookup, no multiplications, so it is left out, but the LM head (the output embedding, tied to
  the input one or not) is a matmul and counts. Kaplan's non-embedding count leaves the head out
  too, which at a 150k vocabulary and 0.5B parameters would miss a quarter of the work.
- ``S`` are the tokens the sampling passes processed: the prompt and completion tokens (tool
  outputs included) of every row of every draw. With the KV cache each token goes through the
  model once (the prompt in the prefill, each completion token when it is fed back), so sampling
  costs 2 N per token; the last token, never fed back, is counted as well, and a multi-turn
  episode's re-encoded turns are counted once, as if the cache were kept across turns.
- ``F`` are the tokens of the no-grad passes of the policy (or of a same-size copy) over prompt
  and completion: the reference's log-probs, which every RL step computes (``train/kl_ref`` is
  logged whatever the KL's placement) and a DPO step computes on its pairs; the old log-probs
  when they are recomputed (``old_logprobs: recompute``, or ``auto`` in bf16/fp16, or a mismatch
  correction, or tool tokens in the loss); the critic's old values on the policy's trunk when no
  recompute pass gave its hidden states.
- ``T`` are the tokens (prompt and completion) of the rows the update passes read, once per
  epoch: a forward (2 N), a backward through the activations (2 N) and the weight gradients of
  the trained parameters (2 N_trainable: N for full fine-tuning, which gives the usual 6 N; the
  adapters' few for LoRA, about 4 N), plus one more forward with gradient checkpointing.
- ``N_c``, ``F_c``, ``T_c``: a critic with a trunk of its own (``value_model``), its no-grad pass
  for the old values and its updates, counted the same way; a value head on the policy's trunk
  reads hidden states a policy pass computed, and its one-output head is not counted.

Left out: attention's context term (2 x layers x context x width a token, a few percent at
contexts under a thousand tokens), padding and the positions of finished rows that a batch
still computes (they depend on the batching, not on the algorithm), layer norms, activations,
the softmax and the optimiser's own arithmetic. The estimate counts the algorithm's work; a
GPU's utilisation is another matter.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from harness.engine.spec import COMPUTE_METRICS

#: a step's FLOPs, in the metrics ``rl_step`` and ``dpo_step`` return; the trial adds it up
STEP_FLOPS = "compute/step_flops"


@dataclass(frozen=True)
class ModelSize:
    """What a token's pass through a model multiplies by."""

    matmul: int  # every parameter but the input embedding table
    trainable: int  # of those, the ones the optimiser updates
    checkpointed: bool = False  # gradient checkpointing: the backward pass runs the forward again

    @property
    def update_flops(self) -> int:
        """FLOPs of one token's forward and backward pass."""
        again = 2 * self.matmul if self.checkpointed else 0
        return 4 * self.matmul + 2 * self.trainable + again


def model_size(model: nn.Module, *, checkpointed: bool = False, head: bool = True) -> ModelSize:
    """``model``'s matmul parameters (each shared tensor once) and how many of them are trained;
    ``head=False``: its trunk's only (a critic's copy, whose LM head no pass runs)."""
    embedding = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    tied = output is not None and output.weight is embedding
    unused = [] if tied else [embedding]  # the lookup table
    if not head and output is not None:
        unused.append(output.weight)
    params = list(model.parameters())  # a tied weight is listed once
    matmul = sum(p.numel() for p in params) - sum(w.numel() for w in unused)
    trained = sum(p.numel() for p in params if p.requires_grad) - sum(w.numel() for w in unused if w.requires_grad)
    return ModelSize(matmul, trained, checkpointed)


@dataclass
class StepTokens:
    """The tokens (prompt and completion) each kind of pass of one step processed."""

    sampled: Tensor | float = 0.0  # the sampling passes, every draw's rows
    forward: Tensor | float = 0.0  # no-grad passes of the policy or a same-size copy
    updated: Tensor | float = 0.0  # forward and backward passes of the policy, summed over epochs
    critic_forward: Tensor | float = 0.0  # no-grad passes of a critic's own trunk
    critic_updated: Tensor | float = 0.0  # its forward and backward passes, summed over epochs


def step_flops(tokens: StepTokens, policy: ModelSize, critic: ModelSize | None = None) -> Tensor | float:
    """The step's estimated FLOPs (the module's formula); a tensor when the counts are."""
    flops = 2 * policy.matmul * (tokens.sampled + tokens.forward) + policy.update_flops * tokens.updated
    if critic is not None:
        flops = flops + 2 * critic.matmul * tokens.critic_forward + critic.update_flops * tokens.critic_updated
    return flops


def context_tokens(rows) -> Tensor:
    """The real tokens (prompt and completion, padding left out) of a rollout's rows, as float64."""
    return rows.attention_mask.sum().double()


class ComputeTotals:
    """The compute spent so far in a trial: ``COMPUTE_METRICS`` on every row of its history."""

    def __init__(self) -> None:
        self.totals = dict.fromkeys(COMPUTE_METRICS, 0.0)

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
