"""Shared helpers of the operator tests (a uniquely named module: `conftest` is not importable
reliably when several test folders have one)."""
import pathlib

import yaml

from gpustack_k3.api.v1alpha1.constants import LABEL_DEPLOYMENT
from tests.support.waiting import wait_for  # noqa: F401  (the operator tests import it from here)

G, V, P = "k3.gpustack.ai", "v1alpha1", "k3deployments"
NS = "llm"


def k3(name, **spec):
    return {"apiVersion": f"{G}/{V}", "kind": "K3Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"engine": {"name": "vllm"}, **spec}}


def pod_from_deployment(emu, name, pod, containers, ns=NS, wait=True):
    """A pod as the ReplicaSet of Deployment ``name`` creates it: the pod template's labels and annotations
    (among them the template hash the operator stamps), plus the given containers. ``wait=False``: a pod left
    from before (no Deployment yet): the resource's label only, no template hash."""
    if wait:
        dep = wait_for(lambda: emu.get("apps/v1/deployments", ns, name), what=f"Deployment {ns}/{name}")
        meta = dep["spec"]["template"].get("metadata") or {}
    else:
        meta = {"labels": {LABEL_DEPLOYMENT: name, "app": name}}
    return {"metadata": {"name": pod, "labels": dict(meta.get("labels") or {}),
                         "annotations": dict(meta.get("annotations") or {})},
            "spec": {"containers": containers}}


def router_ready(apps, name: str, ns: str = NS) -> None:
    """Play the Deployment controller for a P/D router ``name`` (the emulator runs none): its one pod ready."""
    wait_for(lambda: apps.read_namespaced_deployment(name, ns), what=f"the router Deployment {name}")
    apps.patch_namespaced_deployment_status(name, ns, {"status": {
        "replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1, "observedGeneration": 1}})


PRESETS_DIR = pathlib.Path(__file__).resolve().parents[2] / "gpustack_k3/catalog/data/presets"


def preset_resource(preset: str, name: str) -> dict:
    """A catalog preset's document as a K3Deployment named ``name`` in NS."""
    doc = yaml.safe_load((PRESETS_DIR / f"{preset}.yaml").read_text())
    doc["metadata"] = {"name": name, "namespace": NS}
    return doc


def status_of(co, name: str) -> dict:
    return co.get_namespaced_custom_object(G, V, NS, P, name).get("status") or {}
