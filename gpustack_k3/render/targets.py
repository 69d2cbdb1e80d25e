"""One launch spec -> the files of every target. Pure apart from reading templates.

``render_target(launch, target)`` returns ``{relative path: text}``; ``--out DIR`` writes exactly
these (single target: directly in DIR; ``all``: one sub-directory per target), and
``manifests/examples/<preset>/<target>/`` holds the same files for every preset.

| target     | files                                              |
| ---------- | -------------------------------------------------- |
| launch     | launch.json (the launch spec every other target projects; its sha256 is on the pod template) |
| argv       | argv.json, argv.sh                                 |
| kubernetes | kubernetes.yaml (Service(s), NetworkPolicy if serving.networkPolicy, Deployment/StatefulSet) |
| docker     | docker-run-params.json, docker-run.sh              |
| gpustack   | backend.json, model.json, import.yaml (gpustack_k3.render.gpustack)   |
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpustack_k3.core.findings import has_errors, sort_findings
from gpustack_k3.core.launch import Refused, build_launch, build_topology_launch
from gpustack_k3.render import docker, gpustack
from gpustack_k3.render import gpustack as gpustack_target
from gpustack_k3.render.argv import (
    argv_document,
    shell_command,
    topology_argv_document,
    topology_shell,
)
from gpustack_k3.render.checks import render_findings
from gpustack_k3.render.docker import docker_run_line, docker_run_params
from gpustack_k3.render.gpustack import model_source_for, render_gpustack
from gpustack_k3.render.kubernetes import (
    kubernetes_yaml,
    render_kubernetes,
    validate_objects,
)
from gpustack_k3.render.lws import render_document
from gpustack_k3.render.templates import RenderError, dump_json, dump_yaml_documents

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.core.findings import Finding
    from gpustack_k3.core.launch_types import LaunchSpec

TARGETS = ("launch", "argv", "kubernetes", "docker", "gpustack")
# shell files are written executable (render/writer.py) and start with an interpreter line; the lines are POSIX sh
SHEBANG = "#!/bin/sh\n"
# a topology's argv.sh holds one command per role and pod kind: each runs in its own pod, not one after another
TOPOLOGY_SHELL_NOTE = "# one command per role and pod kind, each for its own pod (LWS sets the per-pod variables)\n\n"


def prepare(doc: DeploymentDocument, *, targets: tuple[str, ...] = TARGETS,
            strict: bool = False, arch: Any = None) -> tuple[LaunchSpec, list[Finding]]:
    """The launch spec and every finding (catalog + render); raises ``Refused`` on any error. ``arch``: the model's
    config.json figures (core.model_config.ModelArch) where the caller read one (core/launch.py build_launch)."""
    launch, findings, _plan = build_launch(doc, strict=strict, arch=arch)
    findings = with_render_findings(launch, findings, targets)
    if has_errors(findings):
        raise Refused(findings)
    return launch, findings


def with_render_findings(launch: LaunchSpec, findings: list[Finding],
                         targets: tuple[str, ...] = TARGETS) -> list[Finding]:
    """``findings`` plus what the targets themselves refuse or warn about (e.g. a volume without its
    source), each (rule, field) once, sorted."""
    out = list(findings)
    seen = {(f.rule, f.field) for f in out}
    for t in targets:
        for f in render_findings(launch, t):
            if (f.rule, f.field) not in seen:
                seen.add((f.rule, f.field))
                out.append(f)
    return sort_findings(out)


def _gpustack_files(launch: LaunchSpec, doc: DeploymentDocument | None, gpustack: dict[str, Any]) -> dict[str, str]:
    kw = dict(gpustack)
    if doc is not None:
        kw.setdefault("source", model_source_for(doc))     # the spec's hub id, not a guess from the path
    result = render_gpustack(launch, **kw)
    if not isinstance(result, Mapping) or not result:
        raise RenderError("target gpustack", f"render_gpustack returned {type(result).__name__}, "
                          "expected a mapping of file name -> content")
    files: dict[str, str] = {}
    for rel, content in result.items():
        if isinstance(content, str):
            files[str(rel)] = content if content.endswith("\n") else content + "\n"
        elif str(rel).endswith((".yaml", ".yml")):
            files[str(rel)] = dump_yaml_documents(content if isinstance(content, list) else [content])
        else:
            files[str(rel)] = dump_json(content)
    return files


def schema_validator_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("kubernetes_validate") is not None


def render_target(launch: LaunchSpec, target: str, *, namespace: str | None = None,
                  validate: bool | None = None, doc: DeploymentDocument | None = None,
                  gpustack: dict[str, Any] | None = None) -> dict[str, str]:
    """Files of one target, parsed back and checked against the launch spec. Kubernetes objects are
    also schema-validated (kubernetes-validate, strict): ``validate=None`` does so when the package
    is installed, ``True`` requires it. ``doc`` (the source document) and ``gpustack`` (``worker``,
    ``cluster``) feed the GPUStack target."""
    if target == "launch":
        return {"launch.json": launch.to_json()}
    if target == "argv":
        return {"argv.json": dump_json(argv_document(launch)), "argv.sh": SHEBANG + shell_command(launch)}
    if target == "kubernetes":
        objs = render_kubernetes(launch, doc, namespace=namespace)
        if validate or (validate is None and schema_validator_available()):
            problems = validate_objects(objs, required=bool(validate))
            if problems:
                raise RenderError("target kubernetes", "schema validation failed: " + "; ".join(problems),
                                  "a template produced an invalid object; please report")
        return {"kubernetes.yaml": kubernetes_yaml(objs)}
    if target == "docker":
        return {"docker-run-params.json": dump_json(docker_run_params(launch, doc=doc)),
                "docker-run.sh": SHEBANG + docker_run_line(launch, doc=doc)}
    if target == "gpustack":
        return _gpustack_files(launch, doc, gpustack or {})
    raise RenderError("--target", f"unknown target {target!r}", f"one of: {', '.join(TARGETS)}, all")


def render_topology_targets(doc: DeploymentDocument, targets: tuple[str, ...], *, namespace: str | None = None,
                            form: str = "leaderworkerset", strict: bool = False,
                            gpustack: dict[str, Any] | None = None, arch: Any = None
                            ) -> tuple[dict[str, dict[str, str]], dict[str, RenderError], list[Finding]]:
    """A document with ``spec.roles``: (files per target, refusal per target, findings). argv: every role's
    leader and worker command; kubernetes: one LeaderWorkerSet per role (``form="disaggregatedset"``: one
    DisaggregatedSet), schema-checked; docker and gpustack refuse a topology they cannot run, naming why (a
    document of one single-pod role renders as that role's engine, ``gpustack``'s ``worker``/``cluster``
    included); launch: the TopologyLaunch as JSON. ``arch``: the model's config.json figures, as for
    :func:`prepare`. Raises ``Refused`` on error findings."""
    tl, findings, _plans = build_topology_launch(doc, strict=strict, arch=arch)
    files: dict[str, dict[str, str]] = {}
    refused: dict[str, RenderError] = {}
    for t in targets:
        try:
            if t == "argv":
                files[t] = {"argv.json": dump_json(topology_argv_document(tl)),
                            "argv.sh": SHEBANG + TOPOLOGY_SHELL_NOTE + topology_shell(tl)}
            elif t == "kubernetes":
                objs = render_document(doc, namespace=namespace, form=form, strict=strict, topo=tl,
                                       validate=schema_validator_available())
                files[t] = {"kubernetes.yaml": kubernetes_yaml(objs)}
            elif t in ("docker", "gpustack"):
                # refuses naming the field; a document of one single-pod role renders as that role's engine
                (docker if t == "docker" else gpustack_target).refuse_topology(tl)
                refuse_platform(doc, t)
                files[t] = render_target(tl.roles[0].leader, t, namespace=namespace, doc=doc, gpustack=gpustack)
            elif t == "launch":
                files[t] = {"launch.json": tl.to_json()}   # the TopologyLaunch: every role's leader/worker spec
            else:
                raise RenderError("--target", f"unknown target {t!r}", f"one of: {', '.join(TARGETS)}, all")
            if t not in files:
                raise RenderError(f"target {t}", "renders nothing for this topology")
        except RenderError as exc:
            refused[t] = exc
    return files, refused, findings


def refuse_platform(doc: DeploymentDocument, channel: str) -> None:
    """What a topology rendered as one container or one GPUStack model cannot carry, refused naming the field, not
    dropped: an RDMA request (``spec.network.rdma``; Docker and GPUStack have no device-plugin resources) and
    ``spec.routing`` (the router or InferencePool in front of the roles is a Kubernetes object). (UCX variables are
    environment, which both carry.)"""
    what = {"docker": "Docker", "local": "the local runtime", "gpustack": "GPUStack 2.3.0"}[channel]
    if doc.spec.routing is not None:
        raise RenderError("spec.routing", f"{what} runs one engine: there is no router or InferencePool in front of it",
                          "use the kubernetes target, or drop spec.routing for this channel")
    net = doc.spec.network
    if net is not None and net.rdma is not None:
        raise RenderError("spec.network.rdma", (f"{what} has no device-plugin resources: the RDMA request "
                                                f"{net.rdma.resource}: {net.rdma.count} has nowhere to go"),
                          "use the kubernetes target, or drop spec.network.rdma for this channel")


def render_targets(launch: LaunchSpec, targets: tuple[str, ...] = TARGETS, **kw: Any
                   ) -> tuple[dict[str, dict[str, str]], dict[str, RenderError]]:
    """(files per target, refusal per target) of a single-engine document: each target rendered on its own, a
    target that cannot express the document (e.g. GPUStack and ``spec.secretEnv``) refused with its RenderError
    naming the field, the others rendered. The same rule as :func:`render_topology_targets`."""
    files: dict[str, dict[str, str]] = {}
    refused: dict[str, RenderError] = {}
    for t in targets:
        try:
            files[t] = render_target(launch, t, **kw)
        except RenderError as exc:
            refused[t] = exc
    return files, refused


def refusal_text(exc: RenderError) -> str:
    """``<target>/refused.txt`` of a multi-target render: the refusal's one line."""
    return exc.line() + "\n"


def render_all(launch: LaunchSpec, targets: tuple[str, ...] = TARGETS, **kw: Any) -> dict[str, str]:
    """Files of several targets, one sub-directory per target; a target that cannot express the document writes
    ``<target>/refused.txt`` naming why (as a topology's docker/gpustack do). Every target refused: the first
    refusal is raised (there is nothing to render)."""
    files, refused = render_targets(launch, targets, **kw)
    if refused and not files:
        raise next(iter(refused.values()))
    out: dict[str, str] = {}
    for t in targets:
        if t in refused:
            out[f"{t}/refused.txt"] = refusal_text(refused[t])
        else:
            for rel, text in files[t].items():
                out[f"{t}/{rel}"] = text
    return out


# The channel each runtime/client starts through: what it refuses is what `render --target` of that channel refuses.
CHANNEL_TARGET = {"docker": "docker", "local": "docker", "gpustack": "gpustack"}


def channel_launch(doc: DeploymentDocument, channel: str, *, strict: bool = False, arch: Any = None
                   ) -> tuple[LaunchSpec, list[Finding], Any]:
    """The one engine a channel (``run --runtime docker|local``, ``gpustack apply``) starts for ``doc``, with the
    findings and plan: exactly what ``render --target`` of that channel renders or refuses. A document with
    ``spec.roles`` is carried out when it is one single-pod role (that role's leader, with the role's findings and
    plan) and refused otherwise with the target's own RenderError naming the field (``spec.roles[i]
    .podsPerInstance``, ``spec.disaggregation``, ``spec.roles``). The volumes are the runtime's own (a Docker
    emptyDir is a fresh volume), so the render family's storage findings are not applied here. ``arch``: the
    model's config.json figures, as for :func:`prepare`. Raises ``Refused`` (error findings) or ``RenderError``."""
    target = CHANNEL_TARGET[channel]
    if doc.spec.roles:
        tl, findings, plans = build_topology_launch(doc, strict=strict, arch=arch)
        try:
            (docker if target == "docker" else gpustack).refuse_topology(tl)
            refuse_platform(doc, channel)
        except RenderError as exc:
            if channel == "local":   # the local runtime starts one process on one host, like one container
                raise RenderError(exc.where, exc.message.replace("the docker target renders one container",
                                                                 "the local runtime starts one process").replace(
                    "Docker runs one container on one host", "the local runtime starts one process on one host"),
                    exc.hint) from None
            raise
        role = tl.roles[0]
        return role.leader, findings, plans.get(role.role)
    return build_launch(doc, strict=strict, arch=arch)


def summarise_targets(launch: LaunchSpec, doc: DeploymentDocument | None = None) -> dict[str, str]:
    """What every target makes of a single-engine document, rendered in memory (``dry-run``): one line per target,
    ``refused: <where>: <why>`` for a target that cannot express the document (the others still render, as for a
    topology)."""
    import hashlib
    import json

    import yaml

    files, refused = render_targets(launch, TARGETS, doc=doc)
    out: dict[str, str] = {}
    for t in TARGETS:
        if t in refused:
            out[t] = f"refused: {refused[t].line()}"
        elif t == "launch":
            out[t] = (f"launch.json, sha256 {hashlib.sha256(launch.to_json().encode()).hexdigest()[:12]} "
                      "(on the pod template)")
        elif t == "argv":
            out[t] = f"{len(launch.argv)} tokens, {len(launch.env)} env vars, {len(launch.secret_env)} secret env"
        elif t == "kubernetes":
            kinds = [o["kind"] for o in yaml.safe_load_all(files[t]["kubernetes.yaml"]) if o]
            out[t] = f"{len(kinds)} objects: " + ", ".join(kinds)
        elif t == "docker":
            dk = json.loads(files[t]["docker-run-params.json"])
            out[t] = (f"image {dk['image']}, {len(dk.get('device_requests') or [])} GPU device request(s), "
                      f"network {dk.get('network_mode')}")
        else:
            out[t] = ", ".join(files[t])
    return out
