"""``gpustack-k3 upgrade-check``: what a command line meets when its engine moves to another release."""
from __future__ import annotations

import click

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.cli._click import Command
from gpustack_k3.cli.common import emit, output_option
from gpustack_k3.cli.core_cmds import read_config_file
from gpustack_k3.errors import EXIT_OK, EXIT_REFUSED, InputError


def _env(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for p in pairs:
        k, eq, v = p.partition("=")
        if not eq or not k:
            raise InputError("--env", f"{p!r} is not K=V", "write --env NAME=VALUE, once per variable")
        out[k] = v
    return out


def _shell(argv: list[str]) -> str:
    import shlex

    return shlex.join(argv)


@click.command("upgrade-check", cls=Command,
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--engine", type=click.Choice([ENGINE_VLLM, ENGINE_SGLANG]), required=True, help="Engine of the command line.")
@click.option("--from", "from_version", required=True, help="Release the command line runs on now.")
@click.option("--to", "to_version", required=True, help="Release to move to.")
@click.option("--env", "env", multiple=True, metavar="K=V", help="Environment of the engine (repeatable).")
@output_option
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def upgrade_check(engine, from_version, to_version, env, output, argv):
    """What the target release refuses, changes or deprecates in a command line, and the rewritten line where
    the change is mechanical: gpustack-k3 upgrade-check --engine vllm --from 0.33.0 --to 0.34.0 -- ARGV...

    Exit 1 when the target refuses the line as given (the rewrite, if any, is printed), 2 on unusable input."""
    from gpustack_k3.core.upgrade import check

    argv = list(argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    report = check(engine, from_version, to_version, argv, _env(env), read_file=read_config_file)
    if output == "text":
        click.echo(f"{engine} {from_version} -> {to_version} (judged by {report['judged_by']})")
        for kind in ("refused", "changed", "deprecated"):
            for x in report[kind]:
                tag = " [rewritten]" if x["rewritten"] else ""
                click.echo(f"{kind}: {x['id']}{tag}: {x['message']} ({', '.join(x['cite'])})")
        if not any(report[k] for k in ("refused", "changed", "deprecated")):
            click.echo("nothing listed for this command line")
        rw = report["rewrite"]
        if rw:
            click.echo("rewritten command line" + ("" if rw["complete"] else
                       f" (still refused: {', '.join(rw['still_refused'])})") + ":")
            if rw["unset_env"]:
                click.echo("  unset " + " ".join(rw["unset_env"]))
            click.echo("  " + _shell(rw["argv"]))
    else:
        emit({"ok": not report["refused"], **report}, output)
    return EXIT_REFUSED if report["refused"] else EXIT_OK
