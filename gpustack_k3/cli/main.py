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
from gpustack_k3.cli._click import Group

# name -> "module:attribute", imported only when the command runs.
COMMANDS = {
    "dry-run": "gpustack_k3.cli.core_cmds:dry_run",
    "validate": "gpustack_k3.cli.core_cmds:validate",
    "check-args": "gpustack_k3.cli.core_cmds:check_args",
    "check-pd": "gpustack_k3.cli.core_cmds:check_pd",
    "import": "gpustack_k3.cli.core_cmds:import_",
    "plan": "gpustack_k3.cli.core_cmds:plan_cmd",
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


def _exit(code: int, argv: list[str], message: str, kind: str) -> int:
    """The answer of a run that ended without printing its data: under -o json|yaml an error object on stdout."""
    from gpustack_k3.cli.common import emit, emitted, error_object

    fmt = _asked_output(argv)
    if code != EXIT_OK and fmt in ("json", "yaml") and not emitted():
        emit(error_object(code, message, kind=kind), fmt)
    return code


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; never lets a traceback reach the user."""
    import os

    from gpustack_k3.cli.common import operational_message, reset_state

    argv = list(sys.argv[1:] if argv is None else argv)
    reset_state()
    try:
        rv = cli.main(args=argv, prog_name=PRODUCT, standalone_mode=False)
        code = rv if isinstance(rv, int) else EXIT_OK   # ctx.exit(n) comes back as a return value here
        return _exit(code, argv, "the command failed; its message is on stderr", "failure")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_REFUSED)
        return _exit(code, argv, "the command failed; its message is on stderr", "failure")
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return EXIT_INTERRUPTED
    except click.UsageError as exc:
        # Unknown flag syntax, missing argument: unusable input.
        where = exc.ctx.command_path if exc.ctx else "gpustack-k3"
        msg = f"{exc.format_message()} (see `{where} --help`)"
        click.echo(f"error: {msg}", err=True)
        return _exit(EXIT_INPUT, argv, msg, "usage")
    except click.ClickException as exc:
        exc.show()
        return _exit(EXIT_INPUT, argv, exc.format_message(), "input")
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:   # last resort
        if os.environ.get("GPUSTACK_K3_DEBUG"):
            raise
        msg = operational_message(exc)
        if msg is not None:   # a server unreachable or answering with an error: operational, exit 2
            click.echo(f"error: {msg}", err=True)
            return _exit(EXIT_INPUT, argv, msg, "operational")
        click.echo(f"internal error: {type(exc).__name__}: {exc} (please report; GPUSTACK_K3_DEBUG=1 shows details)",
                   err=True)
        return _exit(EXIT_INTERNAL, argv, f"internal error: {type(exc).__name__}: {exc}", "internal")


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
