"""``gpustack apply``: register/update the custom backend, create/update the deployment. Idempotent.

Decisions are pure functions of (desired, current) - ``backend_change`` and ``model_changes`` - and the
I/O is the injected client, so re-applying an unchanged spec performs only GETs.

* backend: created when absent; otherwise updated (``PUT``, a full replacement) only when a field we set
  differs. Other versions already on the row are kept, since a version a running deployment uses cannot
  be removed (HTTP 400, gpustack.md §1.3).
* model: matched by name inside the cluster; created when absent, ``PUT`` when a field we set differs.
  More than one match is refused (GPUStack allows duplicate names; we never create one).
* ``dry_run``: no writes; the backend action is computed the same way, the model action comes from the
  2.3.0 import dry run (``POST /v2/models/import {dry_run: true}``), which also validates the deployment
  document strictly (unknown fields are errors at every depth).
"""
from __future__ import annotations

import json
from typing import Any

from gpustack_k3.gpustack.client import GPUStackClient, GPUStackError
from gpustack_k3.gpustack.status import find_model

_IMPORT_ACTIONS = {"create": "created", "update": "updated", "unchanged": "unchanged"}


def _clean(v: Any) -> Any:
    """Drop None values in mappings (the server echoes every optional field as null)."""
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def backend_body(desired: dict, current: dict | None) -> dict:
    """The body to send: ours, keeping the row's other versions."""
    body = json.loads(json.dumps(desired))
    if current:
        others = {k: _clean(v) for k, v in (current.get("version_configs") or {}).items()
                  if k not in desired["version_configs"]}
        body["version_configs"] = {**others, **body["version_configs"]}
    return body


def backend_change(desired: dict, current: dict | None) -> tuple[str, dict]:
    """(``created`` | ``updated`` | ``unchanged``, body)."""
    body = backend_body(desired, current)
    if current is None:
        return "created", body
    cur_versions = {k: _clean(v) for k, v in (current.get("version_configs") or {}).items()}
    for k, v in body.items():
        have = cur_versions if k == "version_configs" else _clean(current.get(k))
        if _clean(v) != have:
            return "updated", body
    return "unchanged", body


def model_changes(desired: dict, current: dict) -> list[str]:
    """Fields we set whose server value differs (nulls on the server side ignored inside mappings)."""
    return [k for k, v in desired.items() if _clean(v) != _clean(current.get(k))]


def _one_model(client: GPUStackClient, name: str, cluster_id: int) -> dict | None:
    found = client.models_named(name, cluster_id)
    if len(found) > 1:
        ids = ", ".join(str(m.get("id")) for m in found)
        raise GPUStackError("conflict", f"{len(found)} deployments named {name!r} in the cluster (ids {ids}); "
                            "delete the extra ones in GPUStack, then apply again")
    return found[0] if found else None


def apply(client: GPUStackClient, files: dict[str, str], *, cluster: str, dry_run: bool = False) -> dict:
    """Apply rendered GPUStack files (``render_gpustack`` output). Returns the JSON result the `gpustack apply` command prints."""
    desired_backend = json.loads(files["backend.json"])
    desired_model = json.loads(files["model.json"])
    name = desired_backend["backend_name"]
    cluster_id = client.cluster_id(cluster)
    current_backend = client.backend_by_name(name)
    b_action, b_body = backend_change(desired_backend, current_backend)
    current_model = _one_model(client, desired_model["name"], cluster_id)
    model_body = {**desired_model, "cluster_id": cluster_id}

    if dry_run:
        res = client.import_models(files["import.yaml"], dry_run=True,
                                   overwrite=[desired_model["name"]] if current_model else [])
        entries = res.get("entries") or []
        errors = [f"{e.get('name') or e.get('index')}: {err}" for e in entries for err in (e.get("errors") or [])]
        if not res.get("valid", False):
            raise GPUStackError("invalid", "GPUStack's import dry run rejected the deployment: "
                                + ("; ".join(errors) or json.dumps(res)[:300]))
        action = _IMPORT_ACTIONS.get(entries[0].get("action") if entries else "", "unknown")
        return {"backend": {"name": name, "action": b_action},
                "model": {"name": desired_model["name"], "id": current_model.get("id") if current_model else None,
                          "action": action},
                "dry_run": True, "valid": True}

    if b_action == "created":
        client.create_backend(b_body)
    elif b_action == "updated":
        client.update_backend(int(current_backend["id"]), b_body)

    if current_model is None:
        created = client.create_model(model_body)
        m_action, m_id = "created", created.get("id")
    else:
        changed = model_changes(model_body, current_model)
        m_id = current_model.get("id")
        if changed:
            client.update_model(int(m_id), model_body)
            m_action = "updated"
        else:
            m_action = "unchanged"
    return {"backend": {"name": name, "action": b_action},
            "model": {"name": desired_model["name"], "id": m_id, "action": m_action}}


def delete(client: GPUStackClient, name: str, *, cluster: str | None = None) -> dict:
    model_id = find_model(client, name, cluster, "see GPUStack's Deployments page")["id"]
    client.delete_model(int(model_id))
    return {"model": {"name": name, "id": model_id, "action": "deleted"}}
