"""``render``: one spec -> one target or all of them.

Exit codes: 0 rendered, 1 refused (error findings, or a target could not be produced), 2 unusable input.
Nothing is written unless every requested file rendered and validated.
"""
from __future__ import annotations

import sys

import click

from gpustack_k3.cli._click import Command
from gpustack_k3.cli.common import (
    EXIT_REFUSED,
    fail_input,
    load_document,
    print_findings_text,
)
from gpustack_k3.core.errors import InputError

TARGET_CHOICES = ["launch", "argv", "kubernetes", "gpustack", "docker", "all"]
# Which file of a target is printed for each --output (no --out). None: every file, with headers.
STDOUT_FILE = {
    "launch": {"json": "launch.json", "text": "launch.json", "yaml": None},
    "argv": {"json": "argv.json", "shell": "argv.sh", "text": "argv.sh", "yaml": None},
    "kubernetes": {"yaml": "kubernetes.yaml", "text": "kubernetes.yaml", "json": None},
    "docker": {"json": "docker-run-params.json", "shell": "docker-run.sh", "text": "docker-run.sh", "yaml": None},
}
DEFAULT_OUTPUT = {"launch": "json", "argv": "json", "kubernetes": "yaml", "docker": "json", "gpustack": "text", "all": "text"}


def _refused(findings) -> None:
    click.echo("refused: the spec has errors; nothing was rendered", err=True)
    print_findings_text([f for f in findings if f.severity == "error"], err=True)
    sys.exit(EXIT_REFUSED)


def _render_failed(exc) -> None:
    click.echo(f"error: {exc.line()}; nothing was written", err=True)
    sys.exit(EXIT_REFUSED)


def _checked_name(pattern_of, what: str, max_len: int | None = 63):
    """Refuse an option value (exit 2) that the pattern the target itself uses would refuse; the pattern is
    looked up only when the option is given, so the module stays light to import."""
    def callback(ctx, param, value):
        import re

        if value is not None and not ((max_len is None or len(value) <= max_len)
                                      and re.fullmatch(pattern_of(), value)):
            raise click.BadParameter(f"{value!r} is not a valid {what}")
        return value
    return callback


def _dns_label() -> str:
    from gpustack_k3.api.v1alpha1.spec import DNS_LABEL
    return DNS_LABEL


def _gpustack_name() -> str:
    from gpustack_k3.render.gpustack import NAME
    return NAME


def _warn(findings) -> None:
    warnings = [f for f in findings if f.severity == "warning"]
    if warnings:
        print_findings_text(warnings, err=True)
    infos = sum(f.severity == "info" for f in findings)
    if infos:
        click.echo(f"({infos} info finding(s); `validate` lists them)", err=True)


def _stdout_text(target: str, output: str, files: dict[str, str]) -> str:
    import json

    import yaml

    if target in STDOUT_FILE:
        if output not in STDOUT_FILE[target]:
            raise InputError("--output", f"{output} is not available for target {target}",
                             f"one of: {', '.join(STDOUT_FILE[target])}")
        name = STDOUT_FILE[target][output]
        if name is not None:
            return files[name]
        if target == "launch":
            return yaml.safe_dump(json.loads(files["launch.json"]), sort_keys=False, width=1000)
        if target == "argv":
            return yaml.safe_dump(json.loads(files["argv.json"]), sort_keys=False, width=1000)
        if target == "docker":
            return yaml.safe_dump(json.loads(files["docker-run-params.json"]), sort_keys=False, width=1000)
        if target == "kubernetes":
            items = [d for d in yaml.safe_load_all(files["kubernetes.yaml"]) if d]
            return json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2,
                              ensure_ascii=False) + "\n"
    if output not in ("text", "json", "yaml"):
        raise InputError("--output", f"{output} is not available for target {target}", "use text (all files)")
    return "".join(f"==> {rel} <==\n{text}" + ("" if text.endswith("\n") else "\n")
                   for rel, text in files.items())


def _render_topology(doc, target, targets, out_dir, output, namespace, strict, form) -> None:
    """A document with spec.roles: launch (the TopologyLaunch), argv and kubernetes per role; docker/gpustack say
    why they cannot run it (one target: exit 1 with the reason; all: ``<target>/refused.txt``)."""
    from gpustack_k3.core.launch import Refused
    from gpustack_k3.render.targets import render_topology_targets

    try:
        per_target, refused, findings = render_topology_targets(doc, targets, namespace=namespace, form=form,
                                                                strict=strict)
    except Refused as exc:
        _refused(exc.findings)
    _warn(findings)
    if target != "all" and target in refused:
        _render_failed(refused[target])
    if target == "all":
        files = {f"{t}/{rel}": text for t, texts in per_target.items() for rel, text in texts.items()}
        files.update({f"{t}/refused.txt": exc.line() + "\n" for t, exc in refused.items()})
    else:
        files = per_target[target]
    _emit_files(target, out_dir, output, files)


@click.command(cls=Command)
@click.argument("spec", required=False)
@click.option("--preset", help="Use a catalog preset instead of a SPEC file (see `presets`).")
@click.option("--target", type=click.Choice(TARGET_CHOICES), default="all", show_default=True,
              help="What to render.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write the target's files into DIR (atomically) instead of printing.")
@click.option("--output", "-o", type=click.Choice(["json", "yaml", "shell", "text"]), default=None,
              help="Printed format (default: json for argv/docker, yaml for kubernetes, text otherwise).")
@click.option("--namespace", default=None, help="Kubernetes namespace (default: metadata.namespace, else kimi-k3).",
              callback=_checked_name(_dns_label, "Kubernetes namespace (a DNS label)"))
@click.option("--worker", default=None, help="GPUStack: pin all GPUs of this worker (gpu_selector.gpu_ids).",
              callback=_checked_name(_gpustack_name, "GPUStack worker name", max_len=None))
@click.option("--cluster", default="default", show_default=True, help="GPUStack: cluster name for import.yaml.",
              callback=_checked_name(_gpustack_name, "GPUStack cluster name"))
@click.option("--strict", is_flag=True, help="Unknown flags refuse instead of warn.")
@click.option("--lws-form", type=click.Choice(["leaderworkerset", "disaggregatedset"]), default="leaderworkerset",
              show_default=True, help="Kubernetes, a document with spec.roles: one LeaderWorkerSet per role, or one "
              "DisaggregatedSet (LWS >= 0.10) holding the roles.")
def render(spec, preset, target, out_dir, output, namespace, worker, cluster, strict, lws_form):
    """Render a deployment document (or preset) for one target or all of them."""
    from gpustack_k3.core.launch import Refused
    from gpustack_k3.render.targets import TARGETS, prepare, render_all, render_target
    from gpustack_k3.render.templates import RenderError

    try:
        doc = load_document(spec, preset)
    except InputError as exc:
        fail_input(exc)
    targets = TARGETS if target == "all" else (target,)
    if doc.spec.roles:
        _render_topology(doc, target, targets, out_dir, output, namespace or doc.metadata.namespace, strict, lws_form)
        return
    try:
        launch, findings = prepare(doc, targets=targets, strict=strict)
    except Refused as exc:
        _refused(exc.findings)
    _warn(findings)
    ns = namespace or doc.metadata.namespace
    from gpustack_k3.render.targets import schema_validator_available

    if "kubernetes" in targets and not schema_validator_available():
        click.echo("note: kubernetes-validate is not installed: Kubernetes objects are not schema-checked "
                   "(pip install kubernetes-validate==1.37.0)", err=True)
    kw = {"namespace": ns, "doc": doc, "gpustack": {"worker": worker, "cluster": cluster}}
    try:
        files = (render_all(launch, targets, **kw) if target == "all" else render_target(launch, target, **kw))
    except RenderError as exc:
        _render_failed(exc)
    _emit_files(target, out_dir, output, files)


def _emit_files(target, out_dir, output, files) -> None:
    """Write ``files`` into ``out_dir`` (atomically), or print the target's file for ``output``."""
    from gpustack_k3.render.writer import write_files

    try:
        if out_dir is not None:
            for p in write_files(out_dir, files):
                click.echo(f"wrote {p}", err=True)
            return
        click.echo(_stdout_text(target, output or DEFAULT_OUTPUT[target], files), nl=False)
    except InputError as exc:
        fail_input(exc)
