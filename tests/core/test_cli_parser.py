"""gpustack_k3.cli._click: every command is of the package's click classes, and parses with click's own parser."""
from __future__ import annotations

import importlib
import click
import pytest

from gpustack_k3.cli._click import Command, Group
from gpustack_k3.cli.main import COMMANDS, cli


def _every_command():
    """The root group and every command below it (the lazy ones imported)."""
    out = [("gpustack-k3", cli)]
    for name, target in COMMANDS.items():
        mod, attr = target.split(":")
        cmd = getattr(importlib.import_module(mod), attr)
        out.append((name, cmd))
        for sub, sc in getattr(cmd, "commands", {}).items():
            out.append((f"{name} {sub}", sc))
    return out


def test_every_command_uses_our_classes():
    wrong = [name for name, cmd in _every_command() if not isinstance(cmd, (Command, Group))]
    assert wrong == []
    assert len(_every_command()) > len(COMMANDS)   # the groups' subcommands are in it


def test_every_command_parses_with_clicks_own_parser():
    """No command replaces click's option parser (its parser class is private since click 8.2)."""
    overridden = [name for name, cmd in _every_command()
                  if type(cmd).make_parser is not (click.Group if isinstance(cmd, click.Group) else click.Command).make_parser]
    assert overridden == []


def test_an_unknown_long_option_gets_clicks_suggestions():
    cmd = Command("x", params=[click.Option(["--output", "-o"])], callback=lambda **kw: kw)
    with pytest.raises(click.NoSuchOption) as err:
        cmd.main(args=["--outpt", "json"], standalone_mode=False)
    assert "Did you mean '--output'?" in err.value.format_message()
