"""The package's one exception hierarchy.

``GpustackK3Error`` is the base of every error the package raises on purpose; each of its three kinds maps to one
outcome of a command:

- ``RefusedError``: the configuration is understood and refused (exit 1). Refused configs are usually findings,
  not exceptions; an exception of this kind carries them (or the engine parser's refusal) across a boundary.
- ``InputError``: input that cannot be understood (exit 2): names where (``where``) and how to get out (``hint``).
- ``OperationalError``: the environment failed (a runtime, an API server, a broken packaged catalog): not the
  user's document, so neither refused nor unusable input.
"""
from __future__ import annotations


class GpustackK3Error(Exception):
    """Base of every error gpustack-k3 raises on purpose."""


class RefusedError(GpustackK3Error):
    """The configuration is understood and refused (exit 1)."""


class OperationalError(GpustackK3Error):
    """The environment failed (runtime, API server, packaged data), not the user's input."""


class InputError(GpustackK3Error):
    """Input that cannot be understood: names where (``where``) and how to get out (``hint``)."""

    def __init__(self, where: str, message: str, hint: str = "") -> None:
        self.where, self.message, self.hint = where, message, hint
        super().__init__(self.line())

    def line(self) -> str:
        out = f"{self.where}: {self.message}" if self.where else self.message
        return f"{out} ({self.hint})" if self.hint else out
