"""The one error a program trial fails with: the program, its checkpoint or its scores broke the
contract (docs/trainers.md); its message is the trial's one-line reason."""

from __future__ import annotations

from harness.errors import HarnessError


class ProgramTrialError(HarnessError):
    """A program trial broke the contract: it failed, wrote no usable checkpoint or bad scores."""
