"""The status shape is written once: the models of ``gpustack_k3.api.v1alpha1.status``. Everywhere else the
status is built and read as those models, so no other module spells one of its keys (a second spelling is a
second place the shape lives, and it drifts)."""
from __future__ import annotations

import ast

from pydantic import BaseModel

from gpustack_k3.api.v1alpha1 import status as status_models
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from tests.architecture.imports import ROOT, modules

# Keys the status shares with Kubernetes' own objects, which the operator reads from them (Deployment and
# LeaderWorkerSet status, pod conditions): a literal of these is the other object's key, not ours.
KUBERNETES_KEYS = {"observedGeneration", "lastTransitionTime", "replicas", "readyReplicas", "updatedReplicas",
                   "startedAt"}   # core/v1 ContainerStateRunning.startedAt, read from pods


def field_keys(root: type[BaseModel]) -> dict[str, str]:
    """Every camelCase field name or alias of ``root`` and the models under it -> the model declaring it
    (single lowercase words such as ``name`` or ``phase`` are every API's vocabulary)."""
    out: dict[str, str] = {}
    seen: set[type] = set()
    todo = [root]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            for key in {name, field.alias or name}:
                if key != key.lower():
                    out.setdefault(key, model.__name__)
            for arg in _models_in(field.annotation):
                todo.append(arg)
    return out


def status_keys() -> dict[str, str]:
    """The status keys that are only ours: not Kubernetes' (``KUBERNETES_KEYS``) and not a spec field the status
    repeats by name (``RoleStatus.podsPerInstance`` is ``spec.roles[].podsPerInstance``)."""
    spec = field_keys(DeploymentDocument)
    return {k: m for k, m in field_keys(status_models.K3DeploymentStatus).items()
            if k not in KUBERNETES_KEYS and k not in spec}


def _models_in(annotation) -> list[type]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in getattr(annotation, "__args__", ()) for m in _models_in(a)]


def test_status_keys_are_read_from_the_models():
    keys = status_keys()
    assert {"coldStart", "planCheck", "kvCacheGiB", "compileCacheWarm", "leaderUid", "ttftMsP50"} <= set(keys)


def test_no_module_but_the_status_models_spells_a_status_key():
    keys = status_keys()
    bad = []
    for name, path in modules().items():
        if name == "gpustack_k3.api.v1alpha1.status":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in keys:
                bad.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {node.value!r} "
                           f"(status.{keys[node.value]}: build and read it as the model)")
    assert bad == []


def test_the_check_sees_a_second_spelling(tmp_path):
    """The check above can fail: a module that spells a status key by hand."""
    src = 'def status(s):\n    return {"coldStart": {"totalSeconds": s}}\n'
    found = [n.value for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Constant) and n.value in status_keys()]
    assert found == ["coldStart", "totalSeconds"]
