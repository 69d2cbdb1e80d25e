"""``gpustack-k3 upgrade-check``: what a command line meets when its engine moves to another release."""
from __future__ import annotations

import click

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.cli._click import Command
from gpustack_k3.cli.common import emit, output_option
from gpustack_k3.cli.core_cmds import read_config_file
from gpustack_k3.errors import EXIT_OK, EXIT_REFUSED, InputError


def _errors(engine: str, version: str, argv: list[str], env: dict[str, str]) -> list[dict] | str:
    """The error findings of ``check-args --engine-version VERSION`` on the line (the pinned release's rules), or why
    the line cannot be judged that way (a value the deployment spec cannot hold, e.g. a method it does not model)."""
    from gpustack_k3.cli.core_cmds import _argv_io
    from gpustack_k3.core.argv.roles import line_role
    from gpustack_k3.core.rules import Ctx, validate_resolved, validate_topology
    from gpustack_k3.core.rules.runner import CATALOG_RULE
    from gpustack_k3.core.topology import Topology

    try:
        _, role, refusals = line_role(None, None, engine, version, None, "b300", list(argv),
                                      [f"{k}={v}" for k, v in env.items()], None, None, 8, name="upgrade",
                                      **_argv_io(None))
    except InputError as exc:
        return f"{exc.where}: {exc}"
    r = role.resolved
    findings = validate_resolved(r, ctx=Ctx(r, argv_refusals=refusals))
    if not any(f.rule == CATALOG_RULE for f in findings):
        findings += validate_topology(Topology([role], None, "argv"))
    return [{"rule": f.rule, "field": f.field, "message": f.message, "source": f.source}
            for f in findings if f.severity == "error"]


def target_rules(engine: str, from_version: str, to_version: str, argv: list[str], env: dict[str, str],
                 rewrite: dict | None) -> dict | None:
    """What the pinned TO release's rules (as check-args) refuse in the line and not the FROM release's, and in the
    rewritten line; None when TO is not a catalog version (the upgrade data alone then judges)."""
    from gpustack_k3.catalog import load_catalog

    versions = load_catalog().engines[engine].versions
    if to_version not in versions or from_version not in versions:
        return None
    new, old = _errors(engine, to_version, argv, env), _errors(engine, from_version, argv, env)
    out: dict = {"version": to_version, "judged_by": f"gpustack-k3 check-args --engine-version {to_version} (the "
                 "catalog's rules of the pinned release), minus what the same rules refuse on " + from_version}
    if isinstance(new, str):
        return {**out, "not_judged": new}
    seen = {(f["rule"], f["field"]) for f in old} if isinstance(old, list) else set()
    out["refused"] = [f for f in new if (f["rule"], f["field"]) not in seen]
    out["already_refused"] = [f for f in new if (f["rule"], f["field"]) in seen]
    if rewrite is not None:
        again = _errors(engine, to_version, rewrite["argv"], rewrite["env"])
        out["rewrite_refused"] = [f for f in again if (f["rule"], f["field"]) not in seen] if isinstance(again, list) else []
    return out


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

    When both releases are pinned, the target's own catalog rules (check-args --engine-version TO) judge the line
    and the rewrite too. Exit 1 when the target refuses the line as given (the rewrite, if any, is printed), 2 on
    unusable input."""
    from gpustack_k3.core.upgrade import check

    argv = list(argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    envs = _env(env)
    report = check(engine, from_version, to_version, argv, envs, read_file=read_config_file)
    target = target_rules(engine, from_version, to_version, argv, envs, report["rewrite"])
    report["target_rules"] = target
    refused = bool(report["refused"] or (target and target.get("refused")))
    if output == "text":
        click.echo(f"{engine} {from_version} -> {to_version} (judged by {report['judged_by']})")
        for kind in ("refused", "changed", "deprecated"):
            for x in report[kind]:
                tag = " [rewritten]" if x["rewritten"] else ""
                click.echo(f"{kind}: {x['id']}{tag}: {x['message']} ({', '.join(x['cite'])})")
        if target and target.get("refused"):
            for f in target["refused"]:
                click.echo(f"refused by {engine} {to_version}'s rules: {f['rule']}: {f['message']} ({f['source']})")
        if target and target.get("not_judged"):
            click.echo(f"not judged by {engine} {to_version}'s rules: {target['not_judged']}")
        if not any(report[k] for k in ("refused", "changed", "deprecated")) and not (target and target.get("refused")):
            click.echo("nothing listed for this command line")
        rw = report["rewrite"]
        if rw:
            click.echo("rewritten command line" + ("" if rw["complete"] else
                       f" (still refused: {', '.join(rw['still_refused'])})") + ":")
            if rw["unset_env"]:
                click.echo("  unset " + " ".join(rw["unset_env"]))
            click.echo("  " + _shell(rw["argv"]))
            for f in (target or {}).get("rewrite_refused") or []:
                click.echo(f"  still refused by {engine} {to_version}'s rules: {f['rule']}: {f['message']}")
    else:
        emit({"ok": not refused, **report}, output)
    return EXIT_REFUSED if refused else EXIT_OK
