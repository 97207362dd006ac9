"""A trial's task (``task:`` in a study or a spec): which problems it trains and is evaluated on, and how a
completion is rewarded (the verifier, a learned reward model, a tool-calling episode's reward).

A section of ``harness.engine.spec.TrialSpec``, as ``trainer_config`` and ``rollout_config`` are; strict:
an unknown key is an error that names the field path.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Discriminator,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    Tag,
    model_validator,
)

from harness.engine.reward_model.settings import RewardModelRecipe
from harness.ground.strict import StrictModel


class ToolRewardConfig(StrictModel):
    """The trajectory reward of a tool-calling episode, scored once after its last turn: the
    answer's part plus the format's (calls, tags, the turn limit), clipped to +-``clip``."""

    answer: float = Field(1.0, description="paid when the final turn passes the task's verifier")
    valid_call: float = Field(0.1, description="per well-formed call: a JSON object with `name` and `arguments`")
    max_call_bonus: float = Field(
        0.1, ge=0, description="at most this much from valid calls per episode, so needless calls do not pay"
    )
    call_bonus_needs_answer: bool = Field(False, description="pay the call bonus only with a correct answer")
    invalid_call: float = Field(
        -0.2, description="per call that is not valid JSON, lacks name/arguments or names no tool"
    )
    unclosed_tag: float = Field(-0.2, description="per turn whose <tool_call> and </tool_call> counts differ")
    turn_limit: float = Field(-0.5, description="when the episode hit task.max_turns with its last turn a call")
    clip: PositiveFloat = Field(3.0, description="the reward is clipped to [-clip, clip]")


class LearnedRewardConfig(StrictModel):
    """A learned (Bradley-Terry) reward model as a task's training reward (``task.reward: {model: ...}``
    or ``{train: ...}``): each completion is trained on ``weight`` x the model's score, normalised to
    zero mean and unit sd over its held-out completions, plus ``verifier_weight`` x the verifier's.
    The verifier stays the gold score: held-out evaluation and ``train/reward_gold`` use it alone."""

    model: str | None = Field(
        None,
        description="a built reward model: a folder (`harness reward-model train` writes one) or the id it "
        "prints, rm-<hash>, found under <cache_dir>/reward_models/; or, instead, `train`",
    )
    train: RewardModelRecipe | None = Field(
        None,
        description="how the reward model is trained (the settings of `harness reward-model train`), instead "
        "of `model`: the first trial that needs it builds it once, cached by the content hash of its inputs, and "
        "every other trial loads it",
    )
    weight: float = Field(1.0, description="on the reward model's normalised score")
    verifier_weight: float = Field(0.0, description="on the verifier's score (the task's own or `verifier`)")
    verifier: str | None = Field(
        None, description="the gold verifier: registered reward name or `module:function`; default: the task's own"
    )
    batch_size: PositiveInt = Field(64, description="completions the reward model scores per forward pass")

    @model_validator(mode="after")
    def _one_model(self) -> LearnedRewardConfig:
        if (self.model is None) == (self.train is None):
            raise ValueError(
                "name the reward model either as built (model: rm-<hash> or a folder) or by how it is "
                "trained (train: {from_verifier: {label_noise: 0.2}}), one of the two"
            )
        return self

    @model_validator(mode="after")
    def _some_weight(self) -> LearnedRewardConfig:
        if self.weight == 0 and self.verifier_weight == 0:
            raise ValueError("weight and verifier_weight are both 0: the training reward would be 0 everywhere")
        return self


#: ``task.reward``: a reward's name, or a learned reward model's settings (a mapping); the tags are
#: the input's type, so an error in one is reported alone and at its own field path
TaskReward = Annotated[
    Annotated[str, Tag("str")] | Annotated[LearnedRewardConfig, Tag("dict")],
    Discriminator(lambda value: "str" if isinstance(value, str) else "dict"),
]


class ReasoningGymConfig(StrictModel):
    """A reasoning-gym dataset as the task (``harness.engine.tasks.reasoning_gym``)."""

    dataset: str = Field(description="the reasoning-gym dataset's name (chain_sum, basic_arithmetic, countdown, ...)")
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="the dataset's own settings (min_terms, max_digits, ...), as its config takes them",
    )
    answer: Literal["tag", "tag_or_last_number"] = Field(
        "tag",
        description="how the answer is read from a completion: tag, the last <answer>...</answer> (what the prompt "
        "asks for); tag_or_last_number, that or else the completion's last number",
    )
    train_seed: NonNegativeInt = Field(
        0, description="the first seed of the training prompts: reasoning-gym draws problem i from seed + i"
    )
    eval_seed: NonNegativeInt = Field(
        1_000_000,
        description="the first seed of the held-out prompts; seeds train_seed..+n_train and eval_seed..+n_eval must "
        "not overlap",
    )


class TaskConfig(StrictModel):
    name: str = Field(
        "addition",
        description="the task: synthetic (addition, sorting), a JSONL file of problems (gsm8k_jsonl), or "
        "reasoning_gym (set by the reasoning_gym block)",
    )
    reasoning_gym: ReasoningGymConfig | None = Field(
        None, description="a reasoning-gym dataset as the task: {dataset, config, answer, train_seed, eval_seed}"
    )
    n_train: PositiveInt = Field(2000, description="training prompts (at most; a JSONL file may hold fewer)")
    n_eval: PositiveInt = Field(128, description="held-out prompts every evaluation scores")
    min_digits: PositiveInt = Field(1, description="synthetic tasks only: the smallest problem size, in digits")
    max_digits: PositiveInt = Field(2, description="synthetic tasks only: the largest problem size, in digits")
    path: str | None = Field(None, description="JSONL file for file-backed tasks (gsm8k_jsonl)")
    eval_path: str | None = Field(None, description="held-out JSONL; default: a split of `path`")
    reward: TaskReward | None = Field(
        None,
        description="registered reward name or `module:function`; default: the task's own; or a learned "
        "reward model, {model: FOLDER_OR_ID or train: {...}, weight, verifier_weight}, trained on in place of the "
        "verifier",
    )
    tools: list[str] = Field(
        default_factory=list,
        description="tools the policy may call in multi-turn episodes: registered names (calculator, lookup) or "
        "`module:function` factories; none: single-turn completions",
    )
    max_turns: PositiveInt = Field(3, description="policy turns per tool-calling episode, at most")
    tool_timeout_s: PositiveFloat = Field(2.0, description="a tool call running longer returns an error to the model")
    describe_tools: bool = Field(
        True,
        description="put the tools' JSON schemas into the prompt of a model without a chat template (a chat "
        "template gets them through its `tools=` argument); the testbed's fixed tool set may leave them out",
    )
    tool_reward: ToolRewardConfig = Field(
        ToolRewardConfig(), description="the weights of a tool-calling episode's trajectory reward (its keys below)"
    )
    demo_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="tool tasks: the share of warm-start examples that demonstrate the tool call (the rest answer "
        "directly), which sets how often the warm-started policy calls a tool",
    )

    @model_validator(mode="before")
    @classmethod
    def _reasoning_gym_names_the_task(cls, data: Any) -> Any:
        """``task: {reasoning_gym: {...}}`` is the reasoning_gym task without saying its name."""
        if isinstance(data, dict) and data.get("reasoning_gym") is not None and "name" not in data:
            return {**data, "name": REASONING_GYM_TASK}
        return data

    @model_validator(mode="after")
    def _reasoning_gym_block_with_its_name(self) -> TaskConfig:
        if (self.name == REASONING_GYM_TASK) != (self.reasoning_gym is not None):
            raise ValueError(
                "task.reasoning_gym and task.name: reasoning_gym go together; give the block "
                "{reasoning_gym: {dataset: chain_sum, config: {...}}} and leave out task.name"
            )
        return self

    @model_validator(mode="after")
    def _reasoning_gym_draws_apart(self) -> TaskConfig:
        """reasoning-gym draws problem i of a dataset from the seed ``seed + i``, so held-out seeds
        inside the training range would redraw training problems (then dropped from training)."""
        gym = self.reasoning_gym
        if gym is None:
            return self
        train = range(gym.train_seed, gym.train_seed + self.n_train)
        held_out = range(gym.eval_seed, gym.eval_seed + self.n_eval)
        if train.start < held_out.stop and held_out.start < train.stop:
            raise ValueError(
                f"task.reasoning_gym: the held-out prompts' seeds {held_out.start}..{held_out.stop - 1} overlap "
                f"the training prompts' seeds {train.start}..{train.stop - 1} (reasoning-gym draws problem i from "
                f"seed + i); set eval_seed to {train.stop} or more"
            )
        return self

    @model_validator(mode="after")
    def _tool_keys_need_tools(self) -> TaskConfig:
        """A tool setting changed from its default without tools would be read by nothing."""
        if not self.tools:
            changed = [
                k
                for k in TOOL_KEYS
                if getattr(self, k) != type(self).model_fields[k].get_default(call_default_factory=True)
            ]
            if changed:
                raise ValueError(
                    f"task.{changed[0]} is read only by tool-calling episodes; add task.tools "
                    "(e.g. [calculator]) or drop it"
                )
        return self


#: the task a ``task.reasoning_gym`` block names
REASONING_GYM_TASK = "reasoning_gym"
#: the task keys only tool-calling episodes read
TOOL_KEYS = ("max_turns", "tool_timeout_s", "describe_tools", "tool_reward", "demo_share")
