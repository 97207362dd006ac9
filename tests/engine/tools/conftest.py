"""The tool tests name their test factories by path (``tool_factories:NAME``), as a config would."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tool_factories
