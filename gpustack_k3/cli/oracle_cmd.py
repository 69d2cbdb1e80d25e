"""``gpustack-k3 oracle setup|status``: prepare once what ``--engine-verdict`` needs (the releases' wheels, the CPU
interpreter, the model directories) under ``$GPUSTACK_K3_CACHE`` (default ``~/.cache/gpustack-k3``), and say what
is ready. After setup the engine's verdict runs offline (gpustack_k3/oracle/setup.py)."""
from __future__ import annotations

import click

from gpustack_k3.api.v1alpha1.constants import ENGINES
from gpustack_k3.cli._click import Group
from gpustack_k3.cli.common import emit, output_option

_release_opts = [
    click.option("--engine", type=click.Choice(ENGINES), default=None,
                 help="Only this engine's releases (default: every release the oracle judges with)."),
    click.option("--version", "version", default=None, help="Only this catalog version (e.g. 0.33.0)."),
]


def _releases(fn):
    for opt in reversed(_release_opts):
        fn = opt(fn)
    return fn


@click.group("oracle", cls=Group)
def oracle() -> None:
    """The engine oracle behind --engine-verdict: each pinned release's own validation code, run on CPU."""


@oracle.command("setup")
@_releases
@click.option("--verify", is_flag=True, default=False,
              help="Start each release's worker once afterwards (20-70 s each) to check that it imports here.")
@output_option
def setup_cmd(engine, version, verify, output):
    """Fetch once (pip download, unpack, the CPU interpreter; progress on stderr) what the judge needs; a second run
    fetches nothing. Cache: $GPUSTACK_K3_CACHE, default ~/.cache/gpustack-k3."""
    from gpustack_k3.oracle.setup import select, setup

    keys = select(engine, version)
    res = setup(keys, progress=lambda line: click.echo(line, err=True), verify=verify)
    if output == "text":
        _print_status(res["status"])
        for k, v in (res.get("verify") or {}).items():
            click.echo(f"{k}: worker " + (f"started in {v['seconds']} s" if v["ok"] else f"FAILED: {v['why']}"))
    else:
        emit(res, output)
    if any(not v["ok"] for v in (res.get("verify") or {}).values()):
        from gpustack_k3.oracle.setup import SetupFailed

        raise SetupFailed("a release's worker did not start (see above)")


@oracle.command("status")
@_releases
@output_option
def status_cmd(engine, version, output):
    """What is ready for --engine-verdict, per release (nothing is fetched)."""
    from gpustack_k3.oracle.setup import select, status

    st = status(select(engine, version))
    if output == "text":
        _print_status(st)
    else:
        emit(st, output)


def _print_status(st: dict) -> None:
    click.echo(f"cache: {st['cache']}")
    i = st["interpreter"]
    click.echo("CPU interpreter: " + (i["path"] if i["ready"] else f"missing ({i['why']})"))
    click.echo(f"model directories: {'written' if st['models']['ready'] else 'missing'} ({st['models']['path']})")
    for key, r in st["releases"].items():
        click.echo(f"{key}: " + ("ready" if r["ready"] else "missing " + ", ".join(r["missing"])
                                 + " (gpustack-k3 oracle setup)"))
