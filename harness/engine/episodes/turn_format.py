"""How an episode's turns become tokens: the prompt with the tools' descriptions, and after a
policy turn that calls tools, the tokens of the tools' results up to where the policy writes next.

Two formats, one interface (``start``, ``after_call``, ``stop_ids``), chosen by ``turn_format``:

- ``PlainTurns``, for a model without a chat template (the tiny testbed): the tools' JSON schemas
  in a ``<tools>`` preamble (unless ``task.describe_tools`` is off), the prompt, and after a call
  one ``<tool_response>RESULT</tool_response>`` per call; the policy goes on right after it.
- ``TemplateTurns``, for a model with a chat template: the template renders the conversation
  (``tools=`` the schemas, each result a ``tool`` message), and the tokens between the end of the
  policy's turn and the next generation prompt are what the template writes around the results.
  The policy's own tokens are never re-rendered: the conversation is rendered as text and only
  the part after the policy's turn is tokenized, so the sampled tokens stay what the loss reads.

Both stop a turn at the end of a call (``</tool_call>``, the same text format as real chat models
such as Qwen use), so one turn holds at most one call's worth of text before the tools run.
"""

from __future__ import annotations

from harness.engine.models import LoadedModel, uses_chat_template
from harness.engine.spec import ModelConfig
from harness.engine.tasks.base import Task, ToolUse
from harness.engine.tools import CLOSE_TAG, ToolOutcome
from harness.errors import ConfigError

RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
#: a word that rendering a tool message must show, to check that a chat template takes tool messages
_PROBE = "tool-result-probe-4711"


def turn_format(tokenizer, use_chat_template: bool, tool_use: ToolUse) -> PlainTurns | TemplateTurns:
    """The format a policy with ``tokenizer`` writes its episodes in: its chat template's when it
    uses one (refused, ``ConfigError``, when the template cannot show tools and their results)."""
    return (TemplateTurns if use_chat_template else PlainTurns)(tokenizer, tool_use)


def format_of(lm: LoadedModel, tool_use: ToolUse) -> PlainTurns | TemplateTurns:
    return turn_format(lm.tokenizer, lm.use_chat_template, tool_use)


def check_turn_format(config: ModelConfig, task: Task, tokenizer) -> None:
    """Refuse, before any work (only the tokenizer is loaded), a tool task whose model's chat
    template cannot show the tools or their results."""
    if task.tool_use is not None:
        turn_format(tokenizer, uses_chat_template(config, tokenizer), task.tool_use)


class _Turns:
    def __init__(self, tokenizer, tool_use: ToolUse):
        self.tokenizer, self.tool_use = tokenizer, tool_use
        self.stop_ids = self._ids(CLOSE_TAG)

    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]


class PlainTurns(_Turns):
    def start(self, prompt: str) -> tuple[list[int], list[dict]]:
        """The prompt's tokens (BOS first when the tokenizer has one) and the conversation so far."""
        preamble = self.tool_use.toolset.describe() if self.tool_use.describe else ""
        bos = self.tokenizer.bos_token_id
        return ([] if bos is None else [bos]) + self._ids(preamble + prompt), []

    def after_call(self, history: list[dict], turn: str, outcomes: list[ToolOutcome]) -> list[int]:
        return self._ids("".join(f"{RESPONSE_OPEN}{o.text}{RESPONSE_CLOSE}" for o in outcomes))


class TemplateTurns(_Turns):
    def __init__(self, tokenizer, tool_use: ToolUse):
        super().__init__(tokenizer, tool_use)
        self.schemas = tool_use.toolset.schemas()
        self._check_template()

    def _render(self, messages: list[dict], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=self.schemas, tokenize=False, add_generation_prompt=generation_prompt
        )

    def _check_template(self) -> None:
        """Refuse a template that drops the tools or the tool messages: the policy would never see them."""
        name = getattr(self.tokenizer, "name_or_path", "") or "the model"
        rendered = self._render([{"role": "user", "content": "q"}], True)
        missing = [s["function"]["name"] for s in self.schemas if s["function"]["name"] not in rendered]
        try:
            with_result = self._render(
                [
                    {"role": "user", "content": "q"},
                    {"role": "assistant", "content": "a"},
                    {"role": "tool", "content": _PROBE},
                ],
                True,
            )
        except Exception as err:  # noqa: BLE001 - a template that raises on a tool message (jinja's error)
            with_result = f"{type(err).__name__}: {err}"
        if missing or _PROBE not in with_result:
            what = f"drops the tools {', '.join(missing)} given as tools=" if missing else "has no 'tool' message role"
            raise ConfigError(
                f"the chat template of {name} {what}, so the policy would not see its tools or their results; "
                "use a model whose template supports tools, or model.chat_template: false for the plain-text "
                "<tool_call> format"
            )

    def start(self, prompt: str) -> tuple[list[int], list[dict]]:
        history = [{"role": "user", "content": prompt}]
        return self._ids(self._render(history, True)), history

    def after_call(self, history: list[dict], turn: str, outcomes: list[ToolOutcome]) -> list[int]:
        """The template's tokens after the policy's ``turn`` (its end-of-turn marker, the tool
        messages, the next generation prompt); ``history`` gains the turn and the results."""
        history.append({"role": "assistant", "content": turn})
        so_far = self._render(history, False)
        end = so_far.rfind(turn) + len(turn) if turn else len(so_far)
        history.extend({"role": "tool", "content": o.text} for o in outcomes)
        full = self._render(history, True)
        if turn and (so_far.rfind(turn) < 0 or not full.startswith(so_far[:end])):
            raise ConfigError(
                "the chat template rewrites the assistant's turn when it renders the next message, so the tool "
                "results cannot be appended to the sampled tokens; use model.chat_template: false"
            )
        return self._ids(full[end:])
