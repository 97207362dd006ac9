"""Tools for multi-turn tool-calling rollouts: the tools a policy may call (``calculator``,
``lookup``, or a ``module:function`` factory), finding its ``<tool_call>`` blocks, running them
safely (``ToolSet.run`` never raises) and the episode's reward. Pure Python: no torch."""

from harness.engine.tools.calls import (
    CLOSE_TAG,
    OPEN_TAG,
    ParsedCall,
    parse_calls,
    unclosed,
)
from harness.engine.tools.episode_reward import RewardParts, episode_reward
from harness.engine.tools.registry import TOOLS, build_tools, resolve_tool
from harness.engine.tools.tool import Tool, ToolError
from harness.engine.tools.toolset import ToolOutcome, ToolSet

__all__ = [
    "CLOSE_TAG",
    "OPEN_TAG",
    "TOOLS",
    "ParsedCall",
    "RewardParts",
    "Tool",
    "ToolError",
    "ToolOutcome",
    "ToolSet",
    "build_tools",
    "episode_reward",
    "parse_calls",
    "resolve_tool",
    "unclosed",
]
