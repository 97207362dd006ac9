"""What a tool is: a name, a description and a JSON schema the model sees, and a function.

Kept apart from the registry so the tools themselves and the code that runs them can import it
without importing the registry (which names the built-in tools' modules).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass


class ToolError(Exception):
    """A call the tool refuses (bad input, no such entry): its message goes back to the model."""


@dataclass(frozen=True)
class Tool:
    """One callable tool. ``parameters`` is the JSON schema of the arguments object
    (``{"type": "object", "properties": {...}, "required": [...]}``); ``run`` maps the arguments
    to the result text and raises ``ToolError`` for a call it refuses.

    ``bounded`` says every call ends in microseconds whatever the arguments (the built-in
    calculator and lookup): such a tool runs in the rollout's own process. Any other tool runs in
    a worker process that is killed at the call's time limit (``tool_process``)."""

    name: str
    description: str
    parameters: dict
    run: Callable[[dict], str]
    bounded: bool = False

    def schema(self) -> dict:
        """The OpenAI/HF function format that ``tokenizer.apply_chat_template(..., tools=[...])`` takes."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }
