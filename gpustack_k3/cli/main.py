"""Entry point. Subcommands are imported only when invoked, so `gpustack-k3 validate` starts fast."""
from __future__ import annotations

import importlib
import os
import sys

# pydantic scans every installed distribution's entry points for plugins on first import (~50 ms of a
# 250 ms budget); the CLI uses none. pydantic honours the variable, but its plugin loader module still
# imports importlib.metadata (~20 ms): when plugins are off, stand in for that module with one that
# answers "no plugins", which is what pydantic's own get_plugins() returns in that case.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
if os.environ["PYDANTIC_DISABLE_PLUGINS"] in ("__all__", "1", "true") and "pydantic.plugin._loader" not in sys.modules:
    import types

    _no_plugins = types.ModuleType("pydantic.plugin._loader")
    _no_plugins.get_plugins = lambda: ()  # type: ignore[attr-defined]
    sys.modules["pydantic.plugin._loader"] = _no_plugins

import click

from gpustack_k3.api.v1alpha1.constants import PRODUCT
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
    "gpustack": "gpustack_k3.gpustack.cli:gpustack",
    "run": "gpustack_k3.runtime.cli:run",
    "operator": "gpustack_k3.operator.cli:operator",
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


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; never lets a traceback reach the user."""
    import os

    try:
        rv = cli.main(args=argv, prog_name=PRODUCT, standalone_mode=False)
        return rv if isinstance(rv, int) else 0   # ctx.exit(n) comes back as a return value here
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.UsageError as exc:
        # Unknown flag syntax, missing argument: unusable input.
        where = exc.ctx.command_path if exc.ctx else "gpustack-k3"
        click.echo(f"error: {exc.format_message()} (see `{where} --help`)", err=True)
        return 2
    except click.ClickException as exc:
        exc.show()
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:   # last resort
        if os.environ.get("GPUSTACK_K3_DEBUG"):
            raise
        click.echo(f"internal error: {type(exc).__name__}: {exc} (please report; GPUSTACK_K3_DEBUG=1 shows details)",
                   err=True)
        return 3


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
