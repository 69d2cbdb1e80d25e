"""Entry point. Subcommands are imported only when invoked, so `gpustack-k3 validate` starts fast."""
from __future__ import annotations

import importlib
import os
import sys

# pydantic scans every installed distribution's entry points for plugins on first import; the CLI uses none
# (PYDANTIC_DISABLE_PLUGINS: pydantic's documented switch; a value the user set wins).
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import click

from gpustack_k3.api.v1alpha1.constants import (EXIT_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK,
                                               EXIT_REFUSED, PRODUCT)
from gpustack_k3.errors import GpustackK3Error

class Command(click.Command):
    """Every gpustack-k3 command's class (``cls=``; cli/_click.py names it for the command modules)."""

    def invoke(self, ctx):
        """The command, ended by the one handler (``finish`` below): errors and exit codes alike."""
        return finish(ctx, lambda: super(Command, self).invoke(ctx))


class Group(click.Group):
    """Every gpustack-k3 group's class: its subcommands and subgroups are of these classes too."""

    command_class = Command
    group_class = type      # a subgroup is of this group's class


# name -> "module:attribute", imported only when the command runs.
COMMANDS = {
    "dry-run": "gpustack_k3.cli.core_cmds:dry_run",
    "validate": "gpustack_k3.cli.core_cmds:validate",
    "check-args": "gpustack_k3.cli.core_cmds:check_args",
    "check-pd": "gpustack_k3.cli.core_cmds:check_pd",
    "upgrade-check": "gpustack_k3.cli.upgrade_cmd:upgrade_check",
    "import": "gpustack_k3.cli.core_cmds:import_",
    "plan": "gpustack_k3.cli.core_cmds:plan_cmd",
    "fit": "gpustack_k3.cli.fit_cmd:fit",
    "explain": "gpustack_k3.cli.core_cmds:explain",
    "advise": "gpustack_k3.cli.predict_cmd:advise",
    "presets": "gpustack_k3.cli.core_cmds:presets",
    "render": "gpustack_k3.cli.render_cmd:render",
    "crd": "gpustack_k3.cli.crd_cmd:crd",
    "coldstart": "gpustack_k3.cli.coldstart_cmd:coldstart",
    "doctor": "gpustack_k3.cli.coldstart_cmd:doctor",
    "gpustack": "gpustack_k3.cli.gpustack_cmd:gpustack",
    "run": "gpustack_k3.cli.run_cmd:run",
    "operator": "gpustack_k3.cli.operator_cmd:operator",
    "probe": "gpustack_k3.cli.probe_cmd:probe",
    "predict": "gpustack_k3.cli.predict_cmd:predict",
    "oracle": "gpustack_k3.cli.oracle_cmd:oracle",
}


class LazyGroup(Group):
    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None:
            return None
        mod, attr = target.split(":")
        return getattr(importlib.import_module(mod), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="gpustack-k3")
def cli():
    """gpustack-k3: validate, plan, render and launch Kimi-K3 on 8xB300 (vLLM or SGLang)."""
    from gpustack_k3.cli.common import reset_state

    reset_state()   # one invocation's output state (several run in one process under tests)


def _asked_output(argv: list[str]) -> str:
    """The -o/--output value of a command line, read from its tokens (before ``--``): a usage error stops click
    before it parses the option, and the answer must still come in the asked format."""
    fmt = "text"
    it = iter(argv)
    for tok in it:
        if tok == "--":
            break
        if tok in ("-o", "--output"):
            fmt = next(it, fmt)
        elif tok.startswith("--output="):
            fmt = tok.split("=", 1)[1]
        elif tok.startswith("-o") and not tok.startswith("--") and len(tok) > 2:
            fmt = tok[2:].lstrip("=")
    return fmt


def _exit(code: int, fmt: str, message: str, kind: str) -> int:
    """The answer of a run that ended without printing its data: under -o json|yaml an error object on stdout."""
    from gpustack_k3.cli.common import emit, emitted, error_object

    if code != EXIT_OK and fmt in ("json", "yaml") and not emitted():
        emit(error_object(code, message, kind=kind), fmt)
    return code


def _error(exc: GpustackK3Error, fmt: str) -> int:
    """The one way an error ends a command: its findings (unless shown) and its line on stderr, its object on stdout
    under -o json|yaml (unless the command printed its data), its class's exit code."""
    from gpustack_k3.cli.common import emit, emitted, print_findings_text

    shown = getattr(exc, "shown", False)
    findings = getattr(exc, "findings", None)
    if findings and not shown:
        print_findings_text([f for f in findings if f.severity == "error"] or findings, err=True)
    if not shown or getattr(exc, "note", None):
        click.echo(exc.stderr_line(), err=True)
    if fmt in ("json", "yaml") and not emitted():
        emit(exc.to_object(), fmt)
    return exc.exit_code


def finish(ctx: click.Context, call) -> object:
    """How every command ends (cli/_click.py ``Command.invoke``), however it is run (``run()`` below, click's own
    ``main``, a test's CliRunner): an error the package raised is shown once and exits with its class's code; a
    returned int is the exit code (0: the command's data is its answer)."""
    from gpustack_k3.cli.common import requested_output

    try:
        rv = call()
    except GpustackK3Error as exc:
        ctx.exit(_error(exc, requested_output()))
    except Exception as exc:   # classified here; a bug is re-raised (run(): exit 3)
        msg, kind = _outside_failure(exc)
        if msg is None or os.environ.get("GPUSTACK_K3_DEBUG"):
            raise
        click.echo(f"error: {msg}", err=True)
        ctx.exit(_exit(EXIT_INPUT, requested_output(), msg, kind))
    if isinstance(rv, int) and not isinstance(rv, bool) and rv != EXIT_OK:
        ctx.exit(_exit(rv, requested_output(), "the command failed; its message is on stderr", "failure"))
    return rv


def _library_input_error(exc: BaseException) -> str | None:
    """A library's refusal of data that came from outside (a parser, a validator, a decoder) that escaped the
    command's own checks: unusable input (exit 2), never an internal error."""
    import json

    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON: {exc.msg} at line {exc.lineno}"
    if isinstance(exc, UnicodeError):
        return f"not UTF-8 text: {exc}"
    if isinstance(exc, RecursionError):
        return "input nested too deeply"
    for cls in type(exc).__mro__:
        mod = cls.__module__ or ""
        if mod.startswith("pydantic") and cls.__name__ == "ValidationError":
            errs = exc.errors()   # type: ignore[attr-defined]
            first = errs[0] if errs else {}
            loc = ".".join(str(x) for x in first.get("loc", ()))
            return f"{loc + ': ' if loc else ''}{first.get('msg', exc)}"
        if mod.startswith("yaml") and cls.__name__ == "YAMLError":
            return f"invalid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    return None


def _outside_failure(exc: BaseException) -> tuple[str | None, str]:
    """(one line, kind) for an exception that means a server unreachable or answering with an error
    (operational), or a library refusing outside data (input); (None, "internal") for a bug."""
    from gpustack_k3.cli.common import operational_message

    msg = operational_message(exc)
    if msg is not None:
        return msg, "operational"
    msg = _library_input_error(exc)
    return (msg, "input") if msg is not None else (None, "internal")


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; never lets a traceback reach the user."""
    from gpustack_k3.cli.common import reset_state

    argv = list(sys.argv[1:] if argv is None else argv)
    reset_state()
    try:
        rv = cli.main(args=argv, prog_name=PRODUCT, standalone_mode=False)
        code = rv if isinstance(rv, int) else EXIT_OK   # the exit code finish() chose (ctx.exit)
        return _exit(code, _asked_output(argv), "the command failed; its message is on stderr", "failure")
    except GpustackK3Error as exc:   # raised outside a command (the group's own options)
        return _error(exc, _asked_output(argv))
    except SystemExit as exc:   # a library's sys.exit: the package itself raises its errors instead
        code = exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_REFUSED)
        return _exit(code, _asked_output(argv), "the command failed; its message is on stderr", "failure")
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return EXIT_INTERRUPTED
    except click.UsageError as exc:
        # Unknown flag syntax, missing argument: unusable input.
        where = exc.ctx.command_path if exc.ctx else "gpustack-k3"
        msg = f"{exc.format_message()} (see `{where} --help`)"
        click.echo(f"error: {msg}", err=True)
        return _exit(EXIT_INPUT, _asked_output(argv), msg, "usage")
    except click.ClickException as exc:
        exc.show()
        return _exit(EXIT_INPUT, _asked_output(argv), exc.format_message(), "input")
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:   # last resort
        if os.environ.get("GPUSTACK_K3_DEBUG"):
            raise
        msg, kind = _outside_failure(exc)
        if msg is not None:
            click.echo(f"error: {msg}", err=True)
            return _exit(EXIT_INPUT, _asked_output(argv), msg, kind)
        click.echo(f"internal error: {type(exc).__name__}: {exc} (please report; GPUSTACK_K3_DEBUG=1 shows details)",
                   err=True)
        return _exit(EXIT_INTERNAL, _asked_output(argv), f"internal error: {type(exc).__name__}: {exc}", "internal")


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
