"""Docker target: docker SDK ``containers.run`` keyword arguments (JSON) and the equivalent ``docker run`` line.

Called by the Docker runner (``gpustack_k3.runtime.docker``) as ``docker_run_params(launch)``.

Volume mapping (Docker has no claims or pod-scoped disks):

* ``hostPath`` -> bind mount of ``source``;
* ``pvc`` with ``source`` -> the named Docker volume ``source``;
* ``pvc`` without source and non-shm ``emptyDir`` -> the named volume ``<name>-<volume>`` (kept across
  container restarts, which is what a compile cache wants);
* the ``/dev/shm`` volume -> ``shm_size`` (and host IPC).

The entrypoint is the first word of the launch command and ``command`` the rest of the argv, so
``entrypoint + command == launch.argv`` whatever the image's own ENTRYPOINT/CMD are.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpustack_k3.render.argv import comment, option_lines
from gpustack_k3.render.kubernetes import SYSTEM_ANNOTATION_DOMAINS, labels
from gpustack_k3.render.templates import RenderError, render_template

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.core.launch_types import LaunchSpec


def docker_volumes(launch: LaunchSpec) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for v in launch.volumes:
        if v.purpose == "shm":
            continue
        if v.kind == "hostPath":
            if not v.source:
                raise RenderError(f"volumes.{v.name}", "hostPath volume without a host path",
                                  "set spec.storage.<model|cache>.source")
            src = v.source
        elif v.kind == "pvc" and v.source:
            src = v.source
        else:
            src = f"{launch.name}-{v.name}"
        if ":" in src or ":" in v.mount_path:
            raise RenderError(f"volumes.{v.name}", f"docker cannot bind {src!r} to {v.mount_path!r}: ':' separates "
                              "source, target and mode", "use paths without ':'")
        if src in out:
            raise RenderError(f"volumes.{v.name}", f"source {src!r} is mounted twice",
                              "give the model and cache volumes different sources")
        out[src] = {"bind": v.mount_path, "mode": "ro" if v.read_only else "rw"}
    return out


def document_labels(doc: Any) -> dict[str, str]:
    """The document's ``metadata.labels`` and ``metadata.annotations`` as container labels: Docker has labels only,
    and both are key/value metadata of the deployment (the ``kubernetes.io``/``k8s.io`` annotations the cluster's
    tools write are left out, as on Kubernetes objects). ``{}`` without a document."""
    if doc is None:
        return {}
    ann = {k: v for k, v in doc.metadata.annotations.items()
           if not any(k.partition("/")[0] == d or k.partition("/")[0].endswith("." + d) for d in SYSTEM_ANNOTATION_DOMAINS)}
    return {**ann, **doc.metadata.labels}


def docker_run_params(launch: LaunchSpec, *, gpus: bool = True,
                      secrets: Mapping[str, str] | None = None, doc: Any = None) -> dict[str, Any]:
    """``containers.run`` kwargs for ``launch``. ``gpus=False`` (or hardware without a GPU resource)
    leaves out the GPU device request. ``doc`` (the source document): its labels and annotations label the
    container too (:func:`document_labels`), the product's own labels winning a clash.

    Secret env values are never in the launch spec; pass ``secrets`` (name -> value, e.g. from the
    caller's environment) to include those present. Pure: no I/O, no environment reads."""
    environment = dict(launch.env)
    for s in launch.secret_env:
        if secrets is not None and s.name in secrets:
            environment[s.name] = secrets[s.name]
    # GPU hardware only (it names a device-plugin resource); CPU test hardware gets no device request.
    device_requests = ([{"driver": "", "count": launch.gpu_count, "capabilities": [["gpu"]]}]
                       if gpus and launch.gpu_resource and launch.gpu_count > 0 else [])
    # Host network (never docker's default bridge); host IPC for NCCL / CUDA IPC between the ranks; shm_size
    # applies if ipc_mode is changed. ulimits memlock unlimited and stack 64 MiB: NVIDIA's recommended
    # `docker run` settings for CUDA framework containers (NGC containers user guide). The GPU requests,
    # ulimits and volumes are the SDK's plain-dict forms (DeviceRequest(**d), Ulimit(**d), {source: {bind, mode}}).
    params: dict[str, Any] = {
        "image": launch.image, "name": launch.name,
        "entrypoint": list(launch.command[:1]), "command": [*launch.command[1:], *launch.args],
        "environment": environment,
    }
    if device_requests:
        params["device_requests"] = device_requests
    params.update({
        "shm_size": f"{launch.shm_size_gib}g", "ipc_mode": "host", "network_mode": "host",
        "ulimits": [{"name": "memlock", "soft": -1, "hard": -1}, {"name": "stack", "soft": 67108864, "hard": 67108864}],
        "volumes": docker_volumes(launch),
        "labels": {**document_labels(doc), **labels(launch)},
        "detach": True,
    })
    _check(launch, params)
    return params


def _check(launch: LaunchSpec, params: dict) -> None:
    argv = [*params.get("entrypoint", []), *params.get("command", [])]
    if argv != launch.argv:
        raise RenderError("docker.command", "rendered entrypoint + command differ from the launch argv")
    if params.get("network_mode") in (None, "bridge", "default"):
        raise RenderError("docker.network_mode", "must be host (this project never uses docker's default bridge)")
    if any(params["environment"].get(k) != v for k, v in launch.env.items()):
        raise RenderError("docker.environment", "rendered environment differs from the launch spec")


def docker_run_line(launch: LaunchSpec, *, gpus: bool = True, doc: Any = None) -> str:
    """The ``docker run`` command equivalent to :func:`docker_run_params` (secrets passed through by name)."""
    params = docker_run_params(launch, gpus=gpus, doc=doc)
    secret_names = [s.name for s in launch.secret_env if s.name not in params["environment"]]

    return render_template("docker/run.sh.j2", launch=launch, params=params, secret_names=secret_names,
                           command_lines=option_lines(params["command"]), comment=comment)


def refuse_topology(tl) -> None:
    """Docker runs one container on one host: a role that spans pods, or a P/D pair (whose NIXL side channel
    needs each pod's own IP), has no Docker form. Raises RenderError naming the field."""
    for r in tl.roles:
        if r.pods_per_instance > 1:
            raise RenderError(f"{r.field_prefix}.podsPerInstance", f"role {r.role} spans {r.pods_per_instance} pods: "
                              "Docker runs one container on one host", "use the kubernetes (LeaderWorkerSet) target")
    if tl.disaggregation:
        raise RenderError("spec.disaggregation", "prefill/decode roles run as separate instances on separate hosts; "
                          "the docker target renders one container", "use the kubernetes target")
    if len(tl.roles) > 1:
        raise RenderError("spec.roles", f"{len(tl.roles)} roles: the docker target renders one container",
                          "render each role as its own document, or use the kubernetes target")
    for r in tl.roles:
        if r.instances > 1:
            raise RenderError(f"{r.field_prefix}.instances", f"role {r.role} asks for {r.instances} instances: "
                              "Docker runs one container", "use the kubernetes target, or `run` one container per instance")
