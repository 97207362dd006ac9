"""Tool-calling episodes on a model with a chat template: the template renders the tools and the
tool messages, and the tokens appended after a call are exactly the template's text between the
policy's turn and the next generation prompt; templates that cannot do this are refused."""

from __future__ import annotations

import pytest
import torch

from harness.engine.episodes.turn_format import TemplateTurns, format_of
from harness.engine.models import LoadedModel, build_tiny_model, char_tokenizer
from harness.engine.spec import ModelConfig
from harness.engine.task_config import TaskConfig
from harness.engine.tasks import with_tools
from harness.engine.tasks.base import Item, Task
from harness.engine.tasks.rewards import exact_match
from harness.engine.tasks.tool_tasks import TOOL_ALPHABET, call_text
from harness.engine.tools import ToolOutcome
from harness.errors import ConfigError

QWEN_LIKE = (
    "{% if tools %}<|im_start|>system\n# Tools\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}"
    "<|im_end|>\n{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
NO_TOOLS = QWEN_LIKE.replace("{% if tools %}", "{% if false %}")
NO_TOOL_ROLE = QWEN_LIKE.replace("{{ m.content }}\n</tool_response>", "\n</tool_response>")
REWRITES_ASSISTANT = QWEN_LIKE.replace("{{ m.content }}<|im_end|>", "{{ m.content | replace('\"', \"'\") }}<|im_end|>")
CALL = call_text("calculator", {"expression": "12*3"})


def lm_with(template: str) -> LoadedModel:
    tok = char_tokenizer(TOOL_ALPHABET + "\n")
    tok.chat_template = template
    model = build_tiny_model(ModelConfig(), len(tok), tok, seed=0)
    return LoadedModel(model, tok, torch.device("cpu"), use_chat_template=True)


def tool_use():
    task = Task("toy", (Item("12*3=", "36"),), (Item("9*9=", "81"),), exact_match, alphabet=TOOL_ALPHABET)
    return with_tools(task, TaskConfig(tools=["calculator"])).tool_use


def decode(lm, ids):
    return lm.tokenizer.decode(ids, skip_special_tokens=True)


def test_the_template_renders_the_tools_and_the_results_between_turns():
    lm = lm_with(QWEN_LIKE)
    fmt = format_of(lm, tool_use())
    assert isinstance(fmt, TemplateTurns)
    ids, history = fmt.start("12*3=")
    prompt = decode(lm, ids)
    assert '"name": "calculator"' in prompt and prompt.endswith(
        "<|im_start|>user\n12*3=<|im_end|>\n<|im_start|>assistant\n"
    )
    after = decode(lm, fmt.after_call(history, CALL, [ToolOutcome("36", ok=True)]))
    # the policy's end-of-turn marker, the tool message, the next generation prompt: all template text
    assert (
        after
        == "<|im_end|>\n<|im_start|>user\n<tool_response>\n36\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert [m["role"] for m in history] == ["user", "assistant", "tool"]
    assert decode(lm, fmt.stop_ids) == "</tool_call>"


@pytest.mark.parametrize(
    "template, problem", [(NO_TOOLS, "drops the tools calculator"), (NO_TOOL_ROLE, "no 'tool' message role")]
)
def test_a_template_without_tool_support_is_refused_before_any_work(template, problem):
    with pytest.raises(ConfigError, match=problem) as err:
        format_of(lm_with(template), tool_use())
    assert "\n" not in str(err.value) and "chat_template: false" in str(err.value)


def test_a_template_that_rewrites_the_policys_turn_is_refused():
    lm = lm_with(REWRITES_ASSISTANT)
    fmt = format_of(lm, tool_use())
    _, history = fmt.start("12*3=")
    with pytest.raises(ConfigError, match="rewrites the assistant's turn"):
        fmt.after_call(history, CALL, [ToolOutcome("36", ok=True)])


def test_a_real_models_template_without_tools_is_refused_before_the_warm_start(tmp_path, monkeypatch):
    from harness.algorithms import resolve_algorithm
    from harness.engine import trial
    from harness.engine.spec import TrialSpec

    lm = lm_with(NO_TOOLS)
    lm.model.save_pretrained(tmp_path / "model")
    lm.tokenizer.save_pretrained(tmp_path / "model")
    monkeypatch.setattr(trial, "load_policy", lambda *a: pytest.fail("the warm start ran"))
    spec = TrialSpec(
        arm="grpo",
        algorithm=resolve_algorithm("grpo"),
        cache_dir=str(tmp_path / "cache"),
        model={"name": str(tmp_path / "model")},
        task={
            "name": "multiplication",
            "min_digits": 2,
            "max_digits": 2,
            "n_train": 50,
            "n_eval": 10,
            "tools": ["calculator"],
        },
    )
    with pytest.raises(ConfigError, match="drops the tools calculator"):
        trial.start_policy(spec)
