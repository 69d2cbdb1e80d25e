"""``render``: one spec -> one target or all of them.

Exit codes: 0 rendered, 1 refused (error findings, a target that could not be produced, or ``--fail-on warning``
with warnings), 2 unusable input. Nothing is written unless every requested file rendered and validated; ``--out
DIR`` replaces DIR as a whole (render/writer.py ``replace_dir``). ``-o json|yaml`` prints one object on every exit:
the target's document (``launch``/``argv``/``docker``: its JSON; ``kubernetes``: a ``List``; ``gpustack`` and
``all``: ``{"files": {path: parsed content}}``), ``{"ok": true, "out", "files"}`` with ``--out``, else the
error/refusal object of cli/common.py.
"""
from __future__ import annotations

import click

from gpustack_k3.cli._click import Command
from gpustack_k3.cli.common import model_arch
from gpustack_k3.cli.core_cmds import model_config_opt
from gpustack_k3.cli.common import (
    emit,
    exit_refused,
    fail_on_option,
    gate_or_exit,
    note_emitted,
    load_document,
    not_applicable,
    outcome,
    print_findings_text,
    yaml_dump,
)
from gpustack_k3.errors import InputError

TARGET_CHOICES = ["launch", "argv", "kubernetes", "gpustack", "docker", "all"]
# Which file of a target is printed for each --output (no --out). None: every file, with headers.
STDOUT_FILE = {
    "launch": {"json": "launch.json", "text": "launch.json", "yaml": None},
    "argv": {"json": "argv.json", "shell": "argv.sh", "text": "argv.sh", "yaml": None},
    # -o yaml is one YAML document like -o json is one JSON document (a List); text is the apply-able stream
    "kubernetes": {"yaml": None, "text": "kubernetes.yaml", "json": None},
    "docker": {"json": "docker-run-params.json", "shell": "docker-run.sh", "text": "docker-run.sh", "yaml": None},
}
DEFAULT_OUTPUT = {"launch": "json", "argv": "json", "kubernetes": "text", "docker": "json", "gpustack": "text", "all": "text"}


def _refused(findings) -> None:
    exit_refused(findings, "refused: the spec has errors; nothing was rendered")


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
    from gpustack_k3.cli.common import record_findings

    record_findings(findings)
    warnings = [f for f in findings if f.severity == "warning"]
    if warnings:
        print_findings_text(warnings, err=True)
    infos = sum(f.severity == "info" for f in findings)
    if infos:
        click.echo(f"({infos} info finding(s); `validate` lists them)", err=True)


def _parsed(rel: str, text: str):
    """A rendered file as data: JSON and YAML files parsed (a multi-document YAML file: the list), else its text."""
    import json

    import yaml

    if rel.endswith(".json"):
        return json.loads(text)
    if rel.endswith((".yaml", ".yml")):
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        return docs[0] if len(docs) == 1 else docs
    return text


def _check_output(target: str, output: str) -> None:
    allowed = list(STDOUT_FILE[target]) if target in STDOUT_FILE else ["text", "json", "yaml"]
    if output not in allowed:
        raise InputError("--output", f"{output} is not available for target {target}", f"one of: {', '.join(allowed)}")


def _stdout_text(target: str, output: str, files: dict[str, str]) -> str:
    import json

    _check_output(target, output)
    if target in STDOUT_FILE:
        name = STDOUT_FILE[target][output]
        if name is not None:
            return files[name]
        if target == "kubernetes":
            items = _parsed("kubernetes.yaml", files["kubernetes.yaml"])
            items = items if isinstance(items, list) else [items]
            listed = {"apiVersion": "v1", "kind": "List", "items": items}
            return (json.dumps(listed, indent=2, ensure_ascii=False) + "\n") if output == "json" else yaml_dump(listed)
        only = {"launch": "launch.json", "argv": "argv.json", "docker": "docker-run-params.json"}[target]
        return yaml_dump(json.loads(files[only]))
    if output in ("json", "yaml"):
        obj = {"files": {rel: _parsed(rel, text) for rel, text in files.items()}}
        return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n") if output == "json" else yaml_dump(obj)
    return "".join(f"==> {rel} <==\n{text}" + ("" if text.endswith("\n") else "\n")
                   for rel, text in files.items())


def _render_topology(doc, target, targets, out_dir, output, namespace, strict, form, gpustack=None,
                     arch=None) -> None:
    """A document with spec.roles: launch (the TopologyLaunch), argv and kubernetes per role; docker/gpustack say
    why they cannot run it (one target: exit 1 with the reason; all: ``<target>/refused.txt``)."""
    from gpustack_k3.core.launch import Refused
    from gpustack_k3.render.targets import render_topology_targets

    try:
        per_target, refused, findings = render_topology_targets(doc, targets, namespace=namespace, form=form,
                                                                strict=strict, gpustack=gpustack, arch=arch)
    except Refused as exc:
        _refused(exc.findings)
    _warn(findings)
    gate_or_exit(findings, "nothing was rendered")
    if target != "all" and target in refused:
        raise refused[target]
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
              help="Printed format (default: json for launch/argv/docker, text otherwise; kubernetes: text is the "
              "multi-document YAML to apply, yaml/json one List).")
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
@model_config_opt
@fail_on_option
def render(spec, preset, target, out_dir, output, namespace, worker, cluster, strict, lws_form, model_config):
    """Render a deployment document (or preset) for one target or all of them."""
    from gpustack_k3.core.launch import Refused
    from gpustack_k3.render.targets import TARGETS, prepare, render_all, render_target

    if out_dir is None:
        _check_output(target, output or DEFAULT_OUTPUT[target])   # before any work: a usage mistake
    if target not in ("gpustack", "all"):
        not_applicable({"worker": "--worker", "cluster": "--cluster"}, f"to --target {target} (GPUStack's options)",
                       "drop it, or render --target gpustack")
    if target not in ("kubernetes", "all"):
        not_applicable({"namespace": "--namespace", "lws_form": "--lws-form"},
                       f"to --target {target} (Kubernetes' options)", "drop it, or render --target kubernetes")
    doc = load_document(spec, preset)
    if not doc.spec.roles:
        not_applicable({"lws_form": "--lws-form"}, "to a document without spec.roles (one engine renders as a "
                       "Deployment or StatefulSet)", "drop it")
    arch = model_arch(model_config, doc.spec.model)   # the model's config.json decides, as for validate/plan
    targets = TARGETS if target == "all" else (target,)
    from gpustack_k3.render.targets import schema_validator_available

    if "kubernetes" in targets and not schema_validator_available():
        click.echo("note: kubernetes-validate is not installed: Kubernetes objects are not schema-checked "
                   "(pip install 'gpustack-k3[validate]')", err=True)
    if doc.spec.roles:
        with outcome("nothing was written"):
            _render_topology(doc, target, targets, out_dir, output, namespace or doc.metadata.namespace, strict,
                             lws_form, gpustack={"worker": worker, "cluster": cluster}, arch=arch)
        return
    try:
        launch, findings = prepare(doc, targets=targets, strict=strict, arch=arch)
    except Refused as exc:
        _refused(exc.findings)
    _warn(findings)
    gate_or_exit(findings, "nothing was rendered")
    ns = namespace or doc.metadata.namespace
    kw = {"namespace": ns, "doc": doc, "gpustack": {"worker": worker, "cluster": cluster}}
    with outcome("nothing was written"):
        files = (render_all(launch, targets, **kw) if target == "all" else render_target(launch, target, **kw))
    _emit_files(target, out_dir, output, files)


def _emit_files(target, out_dir, output, files) -> None:
    """Write ``files`` into ``out_dir`` (replacing it as a whole), or print the target's file for ``output``."""
    from gpustack_k3.render.writer import replace_dir

    if out_dir is not None:
        written = replace_dir(out_dir, files)
        for p in written:
            click.echo(f"wrote {p}", err=True)
        if output in ("json", "yaml"):
            emit({"ok": True, "out": str(out_dir), "files": [str(p) for p in written]}, output)
        return
    fmt = output or DEFAULT_OUTPUT[target]
    click.echo(_stdout_text(target, fmt, files), nl=False)
    if fmt in ("json", "yaml"):
        note_emitted()
