"""What the trainer tests share: the example program and the first lines of the programs they write."""

from __future__ import annotations

from pathlib import Path

PLAIN_LOOP = Path(__file__).resolve().parents[2] / "docs" / "trainers" / "plain_loop.py"

#: reads the trial file into ``trial`` (every program the tests write starts with it)
PREAMBLE = """
import json, os, sys
from pathlib import Path
trial = json.loads(Path(sys.argv[1]).read_text())
"""
#: the preamble, then the start model loaded as ``model``
SAVE_START = (
    PREAMBLE
    + """
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(trial["model"]["start"])
"""
)
