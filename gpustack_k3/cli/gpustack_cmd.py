"""``gpustack-k3 gpustack ...``: apply / status / delete against a GPUStack 2.3.0 server.

Exit codes: 0 done; 1 the spec is refused (error findings, or a document the GPUStack target cannot carry out:
the same refusal as ``render --target gpustack``, naming the field) or a watched instance ended in error;
2 unusable input or a GPUStack problem (missing/rejected API key, unreachable server, 409, 422/400).
``-o json|yaml``: the result object on 0, the error/refusal object of cli/common.py otherwise.
Heavy modules (httpx, tenacity, jinja2) are imported inside the commands.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import click

from gpustack_k3.cli._click import Group
from gpustack_k3.cli.common import (
    EXIT_INPUT,
    EXIT_REFUSED,
    emit,
    exit_refused,
    fail_operational,
    not_applicable,
    outcome,
    print_findings_text,
)

server_option = click.option("--server", envvar="GPUSTACK_SERVER", required=True, metavar="URL",
                             help="GPUStack server URL (env GPUSTACK_SERVER).")
key_option = click.option("--api-key-env", default="GPUSTACK_API_KEY", show_default=True, metavar="VAR",
                          help="Name of the environment variable holding the API key.")
cluster_option = click.option("--cluster", default=None, metavar="NAME", help="GPUStack cluster name.")
output_option = click.option("--output", "-o", type=click.Choice(["text", "json", "yaml"]), default="text",
                             show_default=True)


def _client(server: str, key_env: str):
    from gpustack_k3.gpustack.client import GPUStackClient

    key = os.environ.get(key_env, "").strip()
    if not key:
        fail_operational(f"no API key: environment variable {key_env} is empty or unset "
                         f"(create a key in GPUStack under API Keys and export {key_env}=...)")
    try:
        attempts = int(os.environ.get("GPUSTACK_K3_HTTP_ATTEMPTS", "4"))
    except ValueError:
        fail_operational("GPUSTACK_K3_HTTP_ATTEMPTS must be an integer")
    return GPUStackClient(server, key, attempts=attempts)   # GPUStackError: an OperationalError (exit 2)


# What a server that is not GPUStack's API (or not the release's) makes of the package's reading of its answers:
# a page of HTML for JSON, a number where an object was expected, a missing key.
_NOT_THE_API = (AttributeError, KeyError, TypeError, ValueError, IndexError)


@contextmanager
def _answers(server: str) -> Iterator[None]:
    """A server answer the client cannot read as GPUStack 2.3.0's API (HTML, truncated JSON, wrong types) is an
    operational failure naming the server (exit 2), never an internal error."""
    from gpustack_k3.errors import GpustackK3Error, OperationalError

    try:
        yield
    except GpustackK3Error:
        raise
    except _NOT_THE_API as exc:
        raise OperationalError(f"{server} answered something that is not GPUStack 2.3.0's API "
                               f"({type(exc).__name__}: {str(exc)[:200]}); check --server (it must be the GPUStack "
                               "server's URL, not a proxy's login page or another service)") from None


@click.group("gpustack", cls=Group)
def gpustack() -> None:
    """Deploy Kimi-K3 to a GPUStack 2.3.0 server (custom backend + deployment) and follow it."""


@gpustack.command("apply")
@click.argument("spec", required=False)
@click.option("--preset", default=None, metavar="NAME", help="Use a catalog preset instead of a SPEC file.")
@server_option
@key_option
@click.option("--cluster", default="default", show_default=True, metavar="NAME", help="GPUStack cluster name.")
@click.option("--worker", default=None, metavar="NAME",
              help="Pin all GPUs of this worker (gpu_selector.gpu_ids); without it a VRAM claim is used.")
@click.option("--hub", type=click.Choice(["huggingface", "model_scope"]), default=None,
              help="Where GPUStack downloads the weights from (default: the catalog model's hub).")
@click.option("--dry-run", is_flag=True, help="Change nothing; validate with GPUStack's import dry run.")
@output_option
def apply_cmd(spec: str | None, preset: str | None, server: str, api_key_env: str, cluster: str,
              worker: str | None, hub: str | None, dry_run: bool, output: str) -> None:
    """Validate SPEC, then register/update the custom backend and create/update the deployment."""
    from gpustack_k3.cli.common import load_document
    from gpustack_k3.core.launch import Refused
    from gpustack_k3.gpustack.apply import apply
    from gpustack_k3.render.gpustack import (
        ModelSource,
        model_source_for,
        render_gpustack,
    )

    doc = load_document(spec, preset)
    from gpustack_k3.cli.common import model_arch
    from gpustack_k3.render.targets import channel_launch

    arch = model_arch(None, doc.spec.model)   # the document's model config decides (cli/model_source.py)
    try:
        with outcome("nothing was sent"):
            launch, findings, _ = channel_launch(doc, "gpustack", arch=arch)
    except Refused as exc:
        exit_refused(exc.findings, f"refused: {sum(f.severity == 'error' for f in exc.findings)} error(s); "
                                   "nothing was sent")
    warnings = [f for f in findings if f.severity == "warning"]
    if warnings and output == "text":
        print_findings_text(warnings, err=True)
    elif warnings:
        click.echo(f"{len(warnings)} warning(s); see `gpustack-k3 validate`", err=True)
    with outcome("nothing was sent"):
        source = model_source_for(doc)
        if hub and source.source != "local_path":
            source = ModelSource(hub, source.ref)
        files = render_gpustack(launch, worker=worker, cluster=cluster, source=source)
    client = _client(server, api_key_env)
    with client, _answers(server):
        result = apply(client, files, cluster=cluster, dry_run=dry_run)
        pre = "dry run: " if dry_run else ""
        b, m = result["backend"], result["model"]
        lines = [f"{pre}backend {b['name']}: {b['action']}",
                 f"{pre}model {m['name']}" + (f" (id {m['id']})" if m.get("id") is not None else "") + f": {m['action']}"]
    if output != "text":
        emit(result, output)
    else:
        for line in lines:
            click.echo(line)


@gpustack.command("status")
@click.argument("name")
@server_option
@key_option
@cluster_option
@click.option("--watch", is_flag=True, help="Follow instance states and cold-start phases until running or error.")
@click.option("--timeout", type=float, default=None, metavar="SECONDS", help="Stop watching after this long.")
@click.option("--probe", "do_probe", is_flag=True,
              help="Probe every running instance at its engine with `gpustack-k3 probe`'s code.")
@click.option("--probe-requests", type=int, default=16, show_default=True)
@click.option("--probe-concurrency", type=int, default=4, show_default=True)
@click.option("--probe-input-len", type=int, default=256, show_default=True)
@click.option("--probe-output-len", type=int, default=64, show_default=True)
@click.option("--slo", default=None, metavar="ttft=MS,tpot=MS,e2el=MS", help="Goodput SLOs of the probe.")
@output_option
def status_cmd(name: str, server: str, api_key_env: str, cluster: str | None, watch: bool,
               timeout: float | None, do_probe: bool, probe_requests: int, probe_concurrency: int,
               probe_input_len: int, probe_output_len: int, slo: str | None, output: str) -> None:
    """Show a deployment and its instances (``--watch``: follow them live; ``--probe``: measure them).

    With --probe the exit code is the worst probe's: 1 an SLO or invariant failed, 2 an instance unusable."""
    from gpustack_k3.gpustack.status import status
    from gpustack_k3.gpustack.status import watch as watch_fn

    if not do_probe:
        not_applicable({"probe_requests": "--probe-requests", "probe_concurrency": "--probe-concurrency",
                        "probe_input_len": "--probe-input-len", "probe_output_len": "--probe-output-len",
                        "slo": "--slo"}, "without --probe (they size and judge the probe)", "add --probe, or drop it")
    if not watch:
        not_applicable({"timeout": "--timeout"}, "without --watch (it bounds the watch)", "add --watch, or drop it")
    cfg = None
    if do_probe:
        from gpustack_k3.probe.core import ProbeConfig, parse_slo
        cfg = ProbeConfig(requests=probe_requests, concurrency=probe_concurrency, input_len=probe_input_len,
                          output_len=probe_output_len, slo=parse_slo(slo)).check()
    client = _client(server, api_key_env)
    with client, _answers(server):
        if watch:
            res = watch_fn(client, name, cluster=cluster, timeout=timeout,
                           echo=(lambda s: click.echo(s, err=True)) if output != "text" else click.echo)
            if cfg is None or not res["ok"]:
                if output != "text":
                    emit(res, output)
                return 0 if res["ok"] else EXIT_REFUSED
            click.echo("every instance runs: probing them", err=True)   # --watch --probe: then measure
        res = status(client, name, cluster)
        _summary(res)   # the shape the text below reads: a server that is not the API fails here, exit 2
    code = 0
    if cfg is not None:
        from gpustack_k3.gpustack.status import probe_instances

        res["probe"] = probe_instances(res, cfg)
        code = max((p["exit_code"] for p in res["probe"].values()), default=EXIT_INPUT)
    if output != "text":
        emit(res, output)
        return code
    for line in _summary(res):
        click.echo(line)
    if cfg is not None:
        from gpustack_k3.cli.probe_cmd import render_text

        for iname, rep in res["probe"].items():
            click.echo(f"--- probe of {iname}")
            click.echo(render_text(rep) if "stages" in rep else f"unusable: {rep['reason']}")
    return code


def _summary(res: dict) -> list[str]:
    """The deployment and its instances, a line each."""
    m = res["model"]
    out = [f"model {m['name']} (id {m['id']}): {m['state'] or 'unknown'}, {m['ready_replicas'] or 0}/{m['replicas']} "
           "ready" + (f" - {m['state_message']}" if m["state_message"] else "")]
    for i in res["instances"]:
        where = f" on {i['worker']} GPUs {i['gpu_indexes']}" if i["worker"] else ""
        out.append(f"  {i['name']}: {i['state']}{where}" + (f" - {i['state_message']}" if i["state_message"] else ""))
    return out


@gpustack.command("delete")
@click.argument("name")
@server_option
@key_option
@cluster_option
@output_option
def delete_cmd(name: str, server: str, api_key_env: str, cluster: str | None, output: str) -> None:
    """Delete a deployment (the custom backend stays: other deployments may use it)."""
    from gpustack_k3.gpustack.apply import delete

    client = _client(server, api_key_env)
    with client, _answers(server):
        res = delete(client, name, cluster=cluster)
        line = f"model {name} (id {res['model']['id']}): deleted"
    if output != "text":
        emit(res, output)
    else:
        click.echo(line)
