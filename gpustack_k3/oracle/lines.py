"""The engine command lines a deployment document starts, rendered by the product itself: what the engine oracle
judges (document.py document_verdict) and what a worker judges once before its first request (warmup.py).

A single-engine document's arguments (core.flags.render_args, what the launch spec carries) and environment
(core.launch_env.production_env + spec.env); a topology document's per-role leader lines (core.launch
build_topology_launch, with the role's topology flags). A topology document gpustack-k3 refuses has no role launch:
``partial_role_lines`` gives each role's own engine arguments then, marked ``partial`` (the role's topology flags are
missing).
"""
from __future__ import annotations

from gpustack_k3.core.flags import render_args
from gpustack_k3.core.launch import build_topology_launch
from gpustack_k3.core.launch_env import production_env
from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.topology import role_views

# the budget production_env writes into VLLM_ENGINE_READY_TIMEOUT_S: a start-up timeout, never read by config
# validation (the launch spec's own figure needs the memory plan)
_READY_BUDGET_S = 3600


def single_line(doc, arch=None) -> dict:
    """{"argv", "env", "model", "gpu_type", "gpus", "version"} of a single-engine document, rendered by the product."""
    r = resolve(doc, arch=arch)
    return {"argv": [t for a in render_args(r) for t in a.tokens],
            "env": {**production_env(r, _READY_BUDGET_S), **r.spec.env}, "model": r.spec.model.name,
            "gpu_type": r.spec.hardware.gpuType, "gpus": r.spec.hardware.gpuCount,
            "version": r.version.key if r.version else r.spec.engine.version}


def role_lines(doc, arch=None) -> list[dict]:
    """Per role of a topology document: {"role", "kind", "argv", "env", "gpu_type", "gpus", "model", "pods",
    "version"} of its leader, rendered by the product (raises Refused when gpustack-k3's rules refuse the document)."""
    t, _f, _p = build_topology_launch(doc, arch=arch)
    out = []
    for role in t.roles:
        env = dict(role.leader.env)
        # env the pod gets from the downward API (VLLM_NIXL_SIDE_CHANNEL_HOST: status.podIP), as a user types it
        env.update({k: "$(POD_IP)" for k, v in role.env_from_pod.items() if "podIP" in v})
        out.append({"role": role.role, "kind": role.kind, "argv": list(role.leader.args), "env": env,
                    "gpu_type": role.leader.gpu_type, "gpus": role.gpus_per_pod, "model": doc.spec.model.name,
                    "pods": role.pods_per_instance, "version": role.leader.engine_version})
    return out


def partial_role_lines(doc, arch=None) -> list[dict]:
    """Each role's own engine arguments (no topology flags) for a topology document whose launch is refused."""
    out = []
    for view in role_views(doc):
        line = single_line(view.document, arch=arch)
        out.append({**line, "role": view.role.name, "kind": view.role.role,
                    "partial": "the role's topology flags are added only to a launch gpustack-k3's rules accept: "
                               "this judges the role's own engine arguments"})
    return out
