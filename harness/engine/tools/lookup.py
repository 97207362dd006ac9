"""The ``lookup`` tool: reads the task's key-value table, so answering needs the call
(the value is in the table, not in the prompt or the model's weights)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.engine.tools.tool import Tool, ToolError
from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.engine.tasks.base import Task

PARAMETERS = {
    "type": "object",
    "properties": {"key": {"type": "string", "description": "the entry to read, exactly as named"}},
    "required": ["key"],
    "additionalProperties": False,
}


def lookup_tool(task: Task) -> Tool:
    """A lookup of ``task.table``; a task without a table is a config error."""
    if task.table is None:
        raise ConfigError(
            f"tool lookup needs a task with a table (task {task.name!r} has none), e.g. task.name: lookup"
        )
    table = dict(task.table)

    def run(arguments: dict) -> str:
        key = arguments["key"]
        if key not in table:
            raise ToolError(f"no entry for key {key!r}")
        return table[key]

    return Tool(
        name="lookup",
        description="Return the value stored under a key in the task's table.",
        parameters=PARAMETERS,
        run=run,
        bounded=True,
    )
