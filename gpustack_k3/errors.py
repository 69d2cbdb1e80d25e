"""The package's one exception hierarchy, and the exit code each kind of error ends a command with.

``GpustackK3Error`` is the base of every error the package raises on purpose. Each class carries its exit code
(``exit_code``, as click's ``ClickException.exit_code``) and the way the CLI shows it (``line()`` on stderr,
``to_object()`` on stdout under ``-o json|yaml``); ``gpustack_k3/cli/main.py`` is the one place that turns an error
into an exit. The kinds:

- ``RefusedError``: the configuration is understood and refused (exit 1). Refused configs are usually findings,
  not exceptions; ``Refused`` carries them (or the engine parser's refusal) across a boundary, ``RenderError`` says
  which field a target cannot express.
- ``InputError``: input that cannot be understood (exit 2): names where (``where``) and how to get out (``hint``).
- ``OperationalError``: the environment failed (a runtime, an API server, a server's answer that is not its API,
  a broken packaged catalog): not the user's document, so not refused; exit 2 like unusable input.

Anything else that reaches the CLI is a bug: exit 3 (``EXIT_INTERNAL``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Final

# The CLI's exit codes (README "Commands"): 0 no errors, 1 refused, 2 unusable input or an operational failure,
# 3 an internal error (a bug: please report), 130 interrupted (Ctrl-C, as a shell reports SIGINT).
# api/v1alpha1/constants.py re-exports them (the contract's constants module).
EXIT_OK: Final = 0
EXIT_REFUSED: Final = 1
EXIT_INPUT: Final = 2
EXIT_INTERNAL: Final = 3
EXIT_INTERRUPTED: Final = 130


class GpustackK3Error(Exception):
    """Base of every error gpustack-k3 raises on purpose (exit 2 unless a subclass says otherwise).

    ``where`` names the input or object, ``message`` what is wrong, ``hint`` the way out; ``outcome`` (set by the
    command that stops, e.g. "nothing was written") ends the line shown to the user."""

    exit_code: ClassVar[int] = EXIT_INPUT
    error_kind: ClassVar[str] = "error"     # "kind" in the JSON error object
    where: str | None = None
    hint: str = ""
    outcome: str = ""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        if "message" not in self.__dict__:   # a subclass may have set its own before calling this
            self.message = str(args[0]) if args else type(self).__name__

    def line(self) -> str:
        """The one line the user reads (after ``error:``)."""
        out = f"{self.where}: {self.message}" if self.where else self.message
        out = f"{out} ({self.hint})" if self.hint else out
        return f"{out}; {self.outcome}" if self.outcome else out

    def stderr_line(self) -> str:
        return f"error: {self.line()}"

    def to_object(self) -> dict[str, Any]:
        """The answer under ``-o json|yaml``: one object naming the exit code."""
        return {"ok": False, "exit_code": self.exit_code,
                "error": {"kind": self.error_kind, "where": self.where, "message": self.message,
                          "fix": self.hint or None}}


class RefusedError(GpustackK3Error):
    """The configuration is understood and refused (exit 1)."""

    exit_code = EXIT_REFUSED
    error_kind = "refused"

    def stderr_line(self) -> str:
        line = self.line()
        return line if line.startswith("refused") else f"refused: {line}"

    def to_object(self) -> dict[str, Any]:
        obj = {"ok": False, "exit_code": self.exit_code, "message": self.stderr_line()}
        if self.where is not None:   # a field a target cannot express (render/templates.py RenderError)
            obj["error"] = super().to_object()["error"]
        return {**obj, "findings": []}


class Refused(RefusedError):
    """Refused, with what refused it: the spec's findings (``Refused(findings)``: the CLI shows the error
    findings), or the engine parser's refusal of a command line (``Refused(message, flag, token)``).

    ``note``: the command's own sentence ("refused: the spec has errors; nothing was started"); ``shown``: the
    command already printed the findings (and its data), the CLI adds only the note, if any, and the exit."""

    def __init__(self, what: str | Sequence[Any] = "", flag: str | None = None, token: str | None = None, *,
                 note: str | None = None, shown: bool = False) -> None:
        self.findings: list[Any] = [] if isinstance(what, str) else list(what)
        super().__init__(what if isinstance(what, str) else
                         f"{sum(getattr(f, 'severity', None) == 'error' for f in self.findings)} error(s)")
        self.flag, self.token, self.note, self.shown = flag, token, note, shown

    def stderr_line(self) -> str:
        return self.note if self.note is not None else super().stderr_line()

    def to_object(self) -> dict[str, Any]:
        return {**super().to_object(), "findings": [f.to_dict() for f in self.findings]}


class OperationalError(GpustackK3Error):
    """The environment failed (runtime, API server, packaged data), not the user's input (exit 2)."""

    error_kind = "operational"


class CatalogError(OperationalError, ValueError):
    """A packaged catalog is broken (a bug in the data files, not in user input), reported with the file and
    field. One class for every packaged catalog (the rule catalog, the cold-start markers)."""


class InputError(GpustackK3Error):
    """Input that cannot be understood: names where (``where``) and how to get out (``hint``)."""

    error_kind = "input"

    def __init__(self, where: str, message: str, hint: str = "") -> None:
        self.where, self.hint = where, hint
        super().__init__(message)
        self.args = (self.line(),)   # str(exc): the whole line, as before
