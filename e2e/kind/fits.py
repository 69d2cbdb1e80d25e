"""Does the engine pod the operator will create for a K3Deployment fit on a one-node kind cluster?

Reads "NCPU MEM_TOTAL_BYTES" (``docker info --format '{{.NCPU}} {{.MemTotal}}'``) on stdin, renders
the resource with the Kubernetes target (the operator renders the same way), and compares the engine
container's requests plus what the control plane and the operator take with the docker host.
Exit 0 when it fits; exit 1 with the reason on stdout otherwise (run.sh reports it as a preflight
skip). Usage: ... | python fits.py K3DEPLOYMENT.yaml
"""
from __future__ import annotations

import sys

# What else runs on the kind node: the control plane (kube-apiserver 250m, controller-manager 200m,
# scheduler 100m, etcd 100m/100Mi, 2x coredns 100m/70Mi, kindnet 100m/50Mi: the requests of their
# manifests) and the operator (chart values: 100m / 256Mi), rounded up.
OVERHEAD_CPU = 1.1
OVERHEAD_MEM = 1 << 30


def engine_requests(path: str) -> tuple[float, int]:
    import yaml
    from kubernetes.utils import parse_quantity

    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.core.launch import build_launch
    from gpustack_k3.render.kubernetes import render_kubernetes

    with open(path, encoding="utf-8") as fh:
        doc = DeploymentDocument.model_validate(yaml.safe_load(fh))
    launch, _findings, _plan = build_launch(doc)
    objs = render_kubernetes(launch, doc)
    wl = next(o for o in objs if o["kind"] in ("Deployment", "StatefulSet"))
    cpu, mem = 0.0, 0
    for c in wl["spec"]["template"]["spec"]["containers"]:
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += float(parse_quantity(req.get("cpu", "0")))
        mem += int(parse_quantity(req.get("memory", "0")))
    return cpu, mem


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: docker info --format '{{.NCPU}} {{.MemTotal}}' | fits.py K3DEPLOYMENT.yaml")
        return 2
    try:
        ncpu_s, mem_s = sys.stdin.read().split()
        ncpu, mem_total = int(ncpu_s), int(mem_s)
    except ValueError:
        print("cannot read the docker host's NCPU and MemTotal from `docker info`")
        return 2
    import yaml

    from gpustack_k3.errors import InputError
    from gpustack_k3.core.launch import Refused
    from gpustack_k3.render.templates import RenderError

    try:
        cpu, mem = engine_requests(argv[0])
    # unreadable file, not YAML, not a valid document (pydantic's ValidationError is a ValueError),
    # refused by the rules, not renderable: say which, no traceback
    except (OSError, ValueError, yaml.YAMLError, InputError, Refused, RenderError, StopIteration) as exc:
        print(f"cannot render {argv[0]} for Kubernetes: {type(exc).__name__}: {exc}")
        return 2
    gib = 1 << 30
    if ncpu < cpu + OVERHEAD_CPU or mem_total < mem + OVERHEAD_MEM:
        print(f"the engine pod rendered for {argv[0].rsplit('/', 1)[-1]} requests {cpu:g} CPU / {mem / gib:.0f} GiB "
              f"(gpustack_k3/render/kubernetes.py pod_resources), plus ~{OVERHEAD_CPU:g} CPU / 1 GiB for the control "
              f"plane and the operator; this docker host has {ncpu} CPU / {mem_total / gib:.1f} GiB")
        return 1
    print(f"fits: engine {cpu:g} CPU / {mem / gib:.0f} GiB on {ncpu} CPU / {mem_total / gib:.1f} GiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
