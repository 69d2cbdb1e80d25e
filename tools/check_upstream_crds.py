"""Check every rack-scale object a topology renders against its UPSTREAM CRD (tooling, not installed).

    python3 tools/check_upstream_crds.py [--crds DIR ...]

The kinds and where their CRDs come from (docs/design/004-rack-scale.md; the files are never committed here, they
lie in ``shared/`` beside or above the checkout with their LICENSE and SOURCE.txt):

* ``ComputeDomain`` (``resource.nvidia.com/v1beta1``): ``shared/crds/nvidia-dra-driver-gpu-v25.12.0``;
* ``InferencePool`` (``inference.networking.k8s.io/v1``): ``shared/crds/gateway-api-inference-extension-v1.6.0``;
* ``LeaderWorkerSet`` / ``DisaggregatedSet``: ``shared/lws-crds/v0.10.0`` (the same files tools/check_lws_crds.py
  reads; here they check the rack-scale additions: exclusive topology, subgroup policy, claims in the templates).

Objects: every topology preset in both forms, as ``render --target kubernetes`` writes them (read back from its
YAML), plus the variants that reach what the presets do not use: exclusive placement, a group larger than an NVLink
domain (subgroups), a serve topology behind an InferencePool, RDMA and UCX. Each object is validated with the
conversion of tools/check_lws_crds.py (structural schema -> JSON Schema, undeclared fields refused) and the CRD's
CEL rules; a transition rule (``oldSelf``: the ComputeDomain spec is immutable) is evaluated against the object
rendered from an edited deployment (what an operator's re-apply sends), as the API server evaluates it on update.

Exit 0: every object passes and every CRD file is the pinned release's; 1: a failure; 2: unusable input.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):       # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from tools import check_lws_crds as lws_tool

REPO = Path(__file__).resolve().parents[1]
SOURCES = {   # kind -> (directory under shared/, file, sha256 of the pinned release's file)
    "ComputeDomain": (Path("crds") / "nvidia-dra-driver-gpu-v25.12.0", "resource.nvidia.com_computedomains.yaml",
                      None),
    "InferencePool": (Path("crds") / "gateway-api-inference-extension-v1.6.0",
                      "inference.networking.k8s.io_inferencepools.yaml", None),
    "LeaderWorkerSet": (Path("lws-crds") / "v0.10.0", "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
                        lws_tool.PINNED["leaderworkerset.x-k8s.io_leaderworkersets.yaml"]),
    "DisaggregatedSet": (Path("lws-crds") / "v0.10.0", "disaggregatedset.x-k8s.io_disaggregatedsets.yaml",
                         lws_tool.PINNED["disaggregatedset.x-k8s.io_disaggregatedsets.yaml"]),
}
# the files this tool was last run against (NVIDIA/k8s-dra-driver-gpu v25.12.0 commit 9c2e721b; gateway-api-inference-
# extension v1.6.0 commit f9a325ec): other bytes are still checked, and the report says they are not these
PINNED = {
    "resource.nvidia.com_computedomains.yaml": "9345244a663bd1b05551dee3e3749e0fc8a4aca4ff46e48308f7b5053c90d265",
    "inference.networking.k8s.io_inferencepools.yaml":
        "55e0dbf39c50c4bbdd60106493a4573df4bb44479f9ce46762f1af718883e5cd",
}
KINDS = tuple(SOURCES)


class Unusable(Exception):
    """The CRD input cannot be used (exit 2)."""


def shared_root() -> Path:
    """``shared/`` in the nearest folder above the checkout that has it (a worktree sits one level deeper)."""
    return next((d / "shared" for d in REPO.parents if (d / "shared").is_dir()), REPO.parent / "shared")


def default_dirs() -> list[Path]:
    root = shared_root()
    return sorted({root / d for d, _, _ in SOURCES.values()})


def load(dirs: list[Path]) -> dict[str, lws_tool.Crd]:
    """kind -> CRD of every kind in KINDS found in ``dirs``; Unusable naming what is missing."""
    found: dict[str, lws_tool.Crd] = {}
    for where in dirs:
        if not where.is_dir():
            raise Unusable(f"--crds {where}: no such directory (docs/design/004-rack-scale.md says where the "
                           "upstream CRD files come from)")
        for p in sorted(x for x in where.iterdir() if x.suffix in (".yaml", ".yml") and x.is_file()):
            data = p.read_bytes()
            try:
                docs = [d for d in yaml.safe_load_all(data) if d is not None]
            except yaml.YAMLError as exc:
                raise Unusable(f"{p}: not YAML: {exc}") from None
            for d in docs:
                if not (isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"):
                    continue
                kind = ((d.get("spec") or {}).get("names") or {}).get("kind")
                if kind not in KINDS or kind in found:
                    continue
                schemas = {v.get("name"): v["schema"]["openAPIV3Schema"] for v in d["spec"].get("versions") or []
                           if v.get("served") and isinstance((v.get("schema") or {}).get("openAPIV3Schema"), dict)}
                if not schemas:
                    raise Unusable(f"{p}: CRD of {kind} has no served version with an openAPIV3Schema")
                found[kind] = lws_tool.Crd(kind, p, d, schemas, hashlib.sha256(data).hexdigest())
    missing = [k for k in KINDS if k not in found]
    if missing:
        raise Unusable(f"no CustomResourceDefinition of {', '.join(missing)} in {', '.join(map(str, dirs))}")
    return found


# ------------------------------------------------------------------------------------------------ the objects

def _serve(d: dict) -> None:
    d["spec"]["roles"] = [dict(d["spec"]["roles"][-1], role="serve", name="wide")]
    d["spec"].pop("disaggregation", None)


def variants() -> list[tuple[str, str, dict]]:
    """(name, form, document data) of every topology preset in both forms and the rack-scale variants."""
    from gpustack_k3.catalog import load_catalog

    out: list[tuple[str, str, dict]] = []
    presets = {n: p.document for n, p in load_catalog().presets.items() if p.document["spec"].get("roles")}
    for name, doc in presets.items():
        for form in lws_tool.FORMS:
            out.append((name, form, copy.deepcopy(doc)))
    base = presets["dsv41-flash-gb300-8p1d"]

    def v(name: str, *edits, forms=lws_tool.FORMS) -> None:
        d = copy.deepcopy(base)
        for e in edits:
            e(d)
        out.extend((f"{base['metadata']['name']}+{name}", form, d) for form in forms)

    v("exclusive-rdma-ucx", lambda d: d["spec"].update(
        placement={"rack": {"policy": "exclusive", "racks": 9}},
        network={"rdma": {"resource": "rdma/rdma_shared_device_a", "count": 4},
                 "ucx": {"transports": "rc,cuda_copy,cuda_ipc", "netDevices": "mlx5_0:1,mlx5_1:1"}}))

    def two_racks(d: dict) -> None:
        _serve(d)
        w = d["spec"]["roles"][0]
        w.update(podsPerInstance=36, parallel=dict(w["parallel"], dp=144))
        d["spec"]["placement"] = {"rack": {"policy": "exclusive", "racks": 2}}
    v("dep144-subgroups", two_racks, forms=("leaderworkerset",))      # one role: no DisaggregatedSet
    v("serve-inferencepool", _serve, lambda d: d["spec"].update(routing={"target": "inferencePool"}),
      forms=("leaderworkerset",))
    return out


def rendered(data: dict, form: str) -> list[dict[str, Any]]:
    """The objects ``render --target kubernetes`` writes for a document, read back from its YAML."""
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.render.targets import render_topology_targets

    doc = DeploymentDocument.model_validate(data)
    files, refused, _ = render_topology_targets(doc, ("kubernetes",), namespace=doc.metadata.namespace, form=form)
    if "kubernetes" in refused:
        raise RuntimeError(refused["kubernetes"].line())
    return [o for o in yaml.safe_load_all(files["kubernetes"]["kubernetes.yaml"]) if isinstance(o, dict)]


def _transition_problems(crd: lws_tool.Crd, new: dict, old: dict) -> list[str]:
    """Rules with ``oldSelf`` (run by the API server on update only), with the old object's value bound."""
    import celpy

    out: list[str] = []
    schema = crd.schemas[new["apiVersion"].rpartition("/")[2]]

    def walk(node: dict, a: Any, b: Any, path: str) -> None:
        if a is None or b is None:
            return
        for r in node.get("x-kubernetes-validations") or []:
            if "oldSelf" not in r["rule"]:
                continue
            env = celpy.Environment()
            prog = env.program(env.compile(r["rule"]))
            res = prog.evaluate({"self": celpy.json_to_cel(a), "oldSelf": celpy.json_to_cel(b)})
            if not (isinstance(res, celpy.celtypes.BoolType) and bool(res)):
                out.append(f"{path.lstrip('.') or '(root)'}: transition rule {r['rule']!r} failed on re-apply: "
                           f"{r.get('message', '')}")
        if isinstance(a, dict) and isinstance(b, dict):
            for k, sub in (node.get("properties") or {}).items():
                walk(sub, a.get(k), b.get(k), f"{path}.{k}")
    walk(schema, new, old, "")
    return out


def _without_transition_rules(crd: lws_tool.Crd) -> lws_tool.Crd:
    """The CRD as evaluated on create: rules that read ``oldSelf`` do not run (apiextensions transition rules)."""
    raw = copy.deepcopy(crd.raw)

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            if "x-kubernetes-validations" in node:
                node["x-kubernetes-validations"] = [r for r in node["x-kubernetes-validations"]
                                                    if "oldSelf" not in r.get("rule", "")]
            for v in node.values():
                strip(v)
        elif isinstance(node, list):
            for v in node:
                strip(v)
    strip(raw)
    return lws_tool.Crd(crd.kind, crd.file, raw, crd.schemas, crd.sha256)


def check(crds: dict[str, lws_tool.Crd]) -> list[dict[str, Any]]:
    create = {k: _without_transition_rules(c) for k, c in crds.items()}
    cache: dict = {}
    out = []
    for name, form, data in variants():
        try:
            objs = rendered(data, form)
            edited = copy.deepcopy(data)
            edited["spec"]["roles"][0]["instances"] = max(1, edited["spec"]["roles"][0].get("instances", 1) - 1)
            before = {(o["kind"], o["metadata"]["name"]): o for o in rendered(edited, form)}
        except Exception as exc:     # a refusal or a render error is a failure of this object set
            out.append({"preset": name, "form": form, "kind": None, "name": None, "ok": False,
                        "problems": [f"render failed: {exc}"]})
            continue
        for o in objs:
            if o.get("kind") not in KINDS:
                continue
            problems = lws_tool.validate(create, o, cache)
            old = before.get((o["kind"], o["metadata"]["name"]))
            if old is not None:
                problems += _transition_problems(crds[o["kind"]], o, old)
            out.append({"preset": name, "form": form, "kind": o["kind"], "name": o["metadata"]["name"],
                        "ok": not problems, "problems": problems})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="check_upstream_crds.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--crds", action="append", help="a directory of upstream CRD YAMLs (repeatable; default: "
                    + ", ".join(str(d) for d in default_dirs()) + ")")
    args = ap.parse_args(argv)
    dirs = [Path(d) for d in args.crds] if args.crds else default_dirs()
    try:
        crds = load(dirs)
    except Unusable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    objects = check(crds)
    files = []
    for kind, crd in crds.items():
        pinned = SOURCES[kind][2] or PINNED.get(crd.file.name)
        files.append({"kind": kind, "file": str(crd.file), "sha256": crd.sha256, "pinned": pinned == crd.sha256,
                      "versions": sorted(crd.schemas)})
    failed = sum(not o["ok"] for o in objects)
    per_kind = {k: sum(1 for o in objects if o["kind"] == k) for k in KINDS}
    ok = not failed and all(per_kind.values()) and all(f["pinned"] for f in files)
    out = {"crds": files, "objects": objects,
           "summary": {"objects": len(objects), "per_kind": per_kind, "passed": len(objects) - failed,
                       "failed": failed, "ok": ok}}
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
