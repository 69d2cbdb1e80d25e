"""gpustack_k3.cli._click: every command parses with click's parser minus the discarded long-option lookup of a
single-dash token (and its difflib suggestions); what a command line means, and every error, stays click's."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys

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


def _params():
    return [click.Option(["--output", "-o"], type=click.Choice(["json", "text"]), default="text"),
            click.Option(["--verbose", "-v"], count=True), click.Option(["--strict"], is_flag=True),
            click.Option(["-n"], type=int, default=0), click.Argument(["rest"], nargs=-1)]


def _outcome(cls, argv, **settings):
    cmd = cls("x", params=_params(), callback=lambda **kw: kw, context_settings=settings)
    try:
        return "ok", cmd.main(args=list(argv), standalone_mode=False)
    except click.UsageError as exc:
        return type(exc).__name__, exc.format_message()


ARGVS = [["-o", "json"], ["-ojson"], ["-o=json"], ["-vvo", "json"], ["-vv", "-n3"], ["--output", "json"],
         ["--output=json"], ["--outpt", "json"], ["--out", "json"], ["-x"], ["-vx"], ["-", "-o", "text"],
         ["--", "-o", "json"], ["-=x"], ["--strict=1"], ["-n", "-1"], ["-o"], ["--verbos"], ["-output", "json"]]


@pytest.mark.parametrize("settings", [{}, {"ignore_unknown_options": True},
                                      {"ignore_unknown_options": True, "allow_interspersed_args": False}])
@pytest.mark.parametrize("argv", ARGVS, ids=" ".join)
def test_parsing_and_errors_are_clicks(argv, settings):
    assert _outcome(Command, argv, **settings) == _outcome(click.Command, argv, **settings)


def test_an_unknown_long_option_still_gets_suggestions():
    kind, message = _outcome(Command, ["--outpt", "json"])
    assert kind == "NoSuchOption" and "Did you mean '--output'?" in message


def test_a_short_option_does_not_build_suggestions():
    """The point of the class: `-o json` no longer imports difflib (3.6 M instructions of a validate)."""
    code = ("import contextlib, io, json, sys\nfrom gpustack_k3.cli.main import run\n"
            "with contextlib.redirect_stdout(io.StringIO()): rc = run(['validate', '--preset', 'vllm-seed', '-o', 'json'])\n"
            "print(json.dumps([rc, 'difflib' in sys.modules]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(p.stdout) == [0, False]
