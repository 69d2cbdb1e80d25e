"""Errors for unusable input (exit 2). Refused configs are findings, not exceptions."""
from __future__ import annotations


class InputError(Exception):
    """Input that cannot be understood: names where (``where``) and how to get out (``hint``)."""

    def __init__(self, where: str, message: str, hint: str = "") -> None:
        self.where, self.message, self.hint = where, message, hint
        super().__init__(self.line())

    def line(self) -> str:
        out = f"{self.where}: {self.message}" if self.where else self.message
        return f"{out} ({self.hint})" if self.hint else out
