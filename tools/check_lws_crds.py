"""Check every rendered LeaderWorkerSet and DisaggregatedSet against the UPSTREAM LWS CRDs (tooling, not installed).

    python3 tools/check_lws_crds.py [--crds DIR]
    python3 tools/check_lws_crds.py --write-rendered DIR    # only the rendered files (e2e/kind/lws.sh)

DIR holds the CRDs as YAML (every ``CustomResourceDefinition`` of every ``*.yaml``/``*.yml`` in it is read, so a
release's ``manifests.yaml`` works too); default: ``$GPUSTACK_K3_LWS_CRDS``, else ``shared/lws-crds/v0.10.0``
beside the checkout or above it (SOURCE.txt there names the upstream repository, tag, commit and paths; the CRD files are
never committed to this repository). What it does, printed as one JSON document:

* **objects**: every topology preset rendered in both forms (``leaderworkerset``, ``disaggregatedset``) by the
  product's own ``render_topology_targets`` (what ``gpustack-k3 render --target kubernetes`` writes, read back
  from its YAML); each LeaderWorkerSet and DisaggregatedSet validated against the served version's
  ``openAPIV3Schema`` of its CRD, pod templates included as the CRD describes them, plus the CRD's CEL rules
  (``x-kubernetes-validations``, evaluated with cel-python as tests/support/celeval.py does);
* **differential**: every field path of our transcription (tests/support/lws_schema.py, what CI checks) against
  the upstream schema: present, compatible type, same enum, same bounds, same required lists, and the fields
  of a closed transcribed object that upstream has but the transcription lacks;
* **crds**: each CRD file's sha256, whether it matches the pinned v0.10.0 files, and the source tag.

The structural schema becomes a JSON Schema (draft 4, the OpenAPI v3.0 schema dialect) by :func:`to_json_schema`:
``x-kubernetes-int-or-string`` is integer or string, ``x-kubernetes-preserve-unknown-fields`` keeps unknown
fields, ``x-kubernetes-embedded-resource`` requires ``apiVersion`` and ``kind``, ``nullable`` admits null;
elsewhere an object refuses fields it does not declare (the API server would prune them, a strict server-side
apply refuses them); enum, bounds, lengths, pattern, required and the formats jsonschema checks are kept
(``int32``/``int64`` as their ranges); ``x-kubernetes-list-type`` set/map refuse duplicate items/keys.

Exit 0: every object passes and the differential is empty; 1: any failure or mismatch; 2: unusable input (no
CRD directory, unreadable YAML, a CRD without a served schema) with a message naming the file.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):       # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jsonschema
import yaml

REPO = Path(__file__).resolve().parents[1]
ENV = "GPUSTACK_K3_LWS_CRDS"
SHARED_CRDS = Path("shared") / "lws-crds" / "v0.10.0"
KINDS = ("LeaderWorkerSet", "DisaggregatedSet")
FORMS = ("leaderworkerset", "disaggregatedset")
# The upstream files this tool was last run against (kubernetes-sigs/lws tag v0.10.0, commit 2161f38f):
# a directory with other bytes is still checked, and the report says it is not the pinned release.
PINNED_TAG = "v0.10.0"
PINNED = {
    "leaderworkerset.x-k8s.io_leaderworkersets.yaml":
        "c5dcad8ed943e495490241f00b9a1b45d51203b6d484020db3636d5bf553568e",
    "disaggregatedset.x-k8s.io_disaggregatedsets.yaml":
        "6dc06e630cc88c28ba5406dc4a15ac593f4ec1af89ef439e1bdb770d4a7e74a8",
}
INT_OR_STRING_ANYOF = [{"type": "integer"}, {"type": "string"}]
SERVER_REQUIRED = {"apiVersion", "kind", "metadata"}
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
# keywords of a structural schema kept as they are (draft 4 reads them as OpenAPI v3.0 does)
KEEP = ("enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
        "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
        "x-kubernetes-list-type", "x-kubernetes-list-map-keys")
# compared by the differential besides type, enum, bounds and required
SAME = ("exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems")


class Unusable(Exception):
    """The CRD input cannot be used (exit 2)."""


@dataclass
class Crd:
    kind: str
    file: Path
    raw: dict[str, Any]                     # the CustomResourceDefinition as read
    schemas: dict[str, dict[str, Any]]      # served version -> openAPIV3Schema
    sha256: str
    formats_dropped: set[str] = field(default_factory=set)


# --------------------------------------------------------------------------------------------------- loading

def default_dir() -> Path:
    """``shared/lws-crds/v0.10.0`` in the nearest folder above the checkout that has it (a worktree sits one
    level deeper than a clone), else beside the checkout."""
    return next((d / SHARED_CRDS for d in REPO.parents if (d / SHARED_CRDS).is_dir()), REPO.parent / SHARED_CRDS)


def crd_dir(arg: str | None) -> Path:
    return Path(arg or os.environ.get(ENV) or default_dir())


def load_crds(where: Path) -> dict[str, Crd]:
    """kind -> CRD of LeaderWorkerSet and DisaggregatedSet found in ``where``; Unusable naming what is wrong."""
    if not where.is_dir():
        raise Unusable(f"--crds {where}: no such directory (get the CRDs: see docs/design/002-topologies.md, "
                       f"or set {ENV})")
    found: dict[str, Crd] = {}
    files = sorted(p for p in where.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    for p in files:
        data = p.read_bytes()
        try:
            docs = [d for d in yaml.safe_load_all(data) if d is not None]
        except yaml.YAMLError as exc:
            raise Unusable(f"{p}: not YAML: {exc}") from None
        for i, d in enumerate(docs):
            if not (isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"):
                continue
            kind = ((d.get("spec") or {}).get("names") or {}).get("kind")
            if kind not in KINDS:
                continue
            if kind in found:
                raise Unusable(f"{p}: a second CRD of {kind} (first in {found[kind].file.name}): keep one")
            schemas = {}
            for v in (d.get("spec") or {}).get("versions") or []:
                schema = ((v.get("schema") or {}).get("openAPIV3Schema"))
                if v.get("served") and isinstance(schema, dict):
                    schemas[v.get("name")] = schema
            if not schemas:
                raise Unusable(f"{p}: document {i}: CRD of {kind} has no served version with an openAPIV3Schema")
            found[kind] = Crd(kind, p, d, schemas, hashlib.sha256(data).hexdigest())
    missing = [k for k in KINDS if k not in found]
    if missing:
        raise Unusable(f"--crds {where}: no CustomResourceDefinition of {', '.join(missing)} in "
                       f"{len(files)} YAML file(s)")
    return found


def source_tag(where: Path) -> str | None:
    """The ``tag:`` line of SOURCE.txt beside the CRDs (how they were obtained), if any."""
    src = where / "SOURCE.txt"
    if src.is_file():
        for line in src.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("tag:"):
                return line.split(":", 1)[1].strip().split()[0]
    return None


# ---------------------------------------------------------------------------------------------- conversion

def to_json_schema(node: dict[str, Any], *, dropped: set[str] | None = None, junctor: bool = False,
                   root: bool = True) -> dict[str, Any]:
    """A Kubernetes structural schema node as a draft-4 JSON Schema (module docstring). ``junctor``: inside
    allOf/anyOf/oneOf/not, where a structural schema only adds value checks (no closing of objects there)."""
    dropped = set() if dropped is None else dropped
    out: dict[str, Any] = {k: copy.deepcopy(node[k]) for k in KEEP if k in node}
    nullable = bool(node.get("nullable"))
    fmt = node.get("format")
    if fmt in INT_RANGES and node.get("type") == "integer":
        lo, hi = INT_RANGES[fmt]
        out["minimum"] = max(lo, out.get("minimum", lo))
        out["maximum"] = min(hi, out.get("maximum", hi))
    elif fmt is not None:
        if fmt in jsonschema.Draft4Validator.FORMAT_CHECKER.checkers:
            out["format"] = fmt
        else:
            dropped.add(fmt)
    if node.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [*copy.deepcopy(INT_OR_STRING_ANYOF), *([{"type": "null"}] if nullable else [])]
    elif "type" in node:
        out["type"] = [node["type"], "null"] if nullable else node["type"]
    if nullable and "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    props = {k: to_json_schema(v, dropped=dropped, junctor=junctor, root=False)
             for k, v in (node.get("properties") or {}).items()}
    required = list(node.get("required") or [])
    if node.get("x-kubernetes-embedded-resource"):
        # apiextensions validates apiVersion/kind/metadata of an embedded object as a resource's
        props.setdefault("apiVersion", {"type": "string", "minLength": 1})
        props.setdefault("kind", {"type": "string", "minLength": 1})
        props.setdefault("metadata", {"type": "object"})
        required += [k for k in ("apiVersion", "kind") if k not in required]
    if root:
        # the root metadata is an ObjectMeta, validated by the API server itself (name, labels, ...), never pruned
        props["metadata"] = {"type": "object"}
    if props:
        out["properties"] = props
    if required:
        out["required"] = required
    addl = node.get("additionalProperties")
    if isinstance(addl, dict):
        out["additionalProperties"] = to_json_schema(addl, dropped=dropped, junctor=junctor, root=False)
    elif isinstance(addl, bool):
        out["additionalProperties"] = addl
    elif (node.get("type") == "object" and not junctor and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False      # what the structural schema would prune
    if isinstance(node.get("items"), dict):
        out["items"] = to_json_schema(node["items"], dropped=dropped, junctor=junctor, root=False)
    for j in ("allOf", "anyOf", "oneOf"):
        if j == "anyOf" and node.get("x-kubernetes-int-or-string") and node.get(j) == INT_OR_STRING_ANYOF:
            continue            # controller-gen writes the int-or-string pair out too: already in out["anyOf"]
        if j in node:
            branches = [to_json_schema(b, dropped=dropped, junctor=True, root=False) for b in node[j]]
            out["allOf"] = [*out.get("allOf", []), {j: branches}]
    if "not" in node:
        out["allOf"] = [*out.get("allOf", []), {"not": to_json_schema(node["not"], dropped=dropped, junctor=True,
                                                                       root=False)}]
    return out


def _list_type(validator, value, instance, schema):
    """``x-kubernetes-list-type``: ``set`` items unique, ``map`` items unique by ``x-kubernetes-list-map-keys``."""
    if not validator.is_type(instance, "array"):
        return
    seen: list[Any] = []
    keys = schema.get("x-kubernetes-list-map-keys") or []
    for i, item in enumerate(instance):
        if value == "set":
            key = item
        elif value == "map" and isinstance(item, dict):
            key = tuple(item.get(k) for k in keys)
        else:
            continue
        if key in seen:
            what = f"key {dict(zip(keys, key))!r}" if value == "map" else f"value {key!r}"
            yield jsonschema.ValidationError(f"duplicate {what} in a list of type {value}", path=(i,))
        seen.append(key)


Validator = jsonschema.validators.extend(jsonschema.Draft4Validator, {"x-kubernetes-list-type": _list_type})


def validator_for(crd: Crd, version: str) -> Any:
    schema = to_json_schema(crd.schemas[version], dropped=crd.formats_dropped)
    Validator.check_schema(schema)
    return Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


def dotted(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(root)"


def validate(crds: dict[str, Crd], obj: dict[str, Any], _cache: dict | None = None) -> list[str]:
    """``path: message`` of every schema error and failing CEL rule of a custom resource (its CRD by kind and the
    version named by its apiVersion)."""
    kind = obj.get("kind")
    crd = crds.get(kind)
    if crd is None:
        return [f"kind: no CRD of {kind!r} loaded"]
    group = crd.raw["spec"].get("group")
    api_version = str(obj.get("apiVersion", ""))
    g, _, version = api_version.rpartition("/")
    if g != group or version not in crd.schemas:
        return [f"apiVersion: {api_version!r} is not a served version of {group} ({', '.join(sorted(crd.schemas))})"]
    cache = {} if _cache is None else _cache
    key = (kind, version)
    if key not in cache:
        cache[key] = validator_for(crd, version)
    errors = sorted(cache[key].iter_errors(obj), key=lambda e: (dotted(e.absolute_path), e.message))
    out = [f"{dotted(e.absolute_path)}: {e.message}" for e in errors]
    from tests.support.celeval import evaluate  # cel-python, the test extra

    for r in evaluate(crd.raw, obj, version):
        out.append(f"{r.path.lstrip('.') or '(root)'}: CEL rule {r.rule!r} failed: {r.error or r.message}")
    return out


# ------------------------------------------------------------------------------------------------ rendering

def rendered_yaml() -> list[tuple[str, str, str | None, str | None]]:
    """(preset, form, kubernetes.yaml, refusal) of every topology preset in both forms, rendered by the function
    ``gpustack-k3 render --target kubernetes`` uses (render_topology_targets), in the preset's namespace."""
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.render.targets import render_topology_targets

    out: list[tuple[str, str, str | None, str | None]] = []
    for name, preset in load_catalog().presets.items():
        doc = DeploymentDocument.model_validate(preset.document)
        if not doc.spec.roles:
            continue
        for form in FORMS:
            files, refused, _ = render_topology_targets(doc, ("kubernetes",), namespace=doc.metadata.namespace,
                                                        form=form)
            if "kubernetes" in refused:
                out.append((name, form, None, refused["kubernetes"].line()))
            else:
                out.append((name, form, files["kubernetes"]["kubernetes.yaml"], None))
    return out


def rendered_objects() -> list[dict[str, Any]]:
    """{preset, form, object | refused} of every LWS/DS object of :func:`rendered_yaml`, read back from its YAML."""
    out: list[dict[str, Any]] = []
    for name, form, text, refused in rendered_yaml():
        if refused is not None:
            out.append({"preset": name, "form": form, "refused": refused})
            continue
        out += [{"preset": name, "form": form, "object": obj} for obj in yaml.safe_load_all(text)
                if isinstance(obj, dict) and obj.get("kind") in KINDS]
    return out


def write_rendered(where: Path) -> int:
    """``--write-rendered DIR``: each preset's kubernetes.yaml per form as ``<preset>--<form>.yaml`` (what
    e2e/kind/lws.sh applies with ``--dry-run=server``); exit 1 when a preset is refused."""
    where.mkdir(parents=True, exist_ok=True)
    rc = 0
    for name, form, text, refused in rendered_yaml():
        if refused is not None:
            print(f"error: {name} ({form}): render refused: {refused}", file=sys.stderr)
            rc = 1
        else:
            (where / f"{name}--{form}.yaml").write_text(text, encoding="utf-8")
    return rc


def check_objects(crds: dict[str, Crd], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cache: dict = {}
    out = []
    for it in items:
        if "refused" in it:
            out.append({"preset": it["preset"], "form": it["form"], "kind": None, "name": None, "ok": False,
                        "problems": [f"render refused: {it['refused']}"]})
            continue
        obj = it["object"]
        problems = validate(crds, obj, cache)
        out.append({"preset": it["preset"], "form": it["form"], "kind": obj.get("kind"),
                    "name": (obj.get("metadata") or {}).get("name"), "ok": not problems, "problems": problems})
    return out


# --------------------------------------------------------------------------------------------- differential

def _json_type(v: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", dict: "object",
            list: "array", type(None): "null"}[type(v)]


def _types_ours(s: dict[str, Any]) -> set[str]:
    if "anyOf" in s:
        return set().union(*(_types_ours(b) for b in s["anyOf"]))
    if "type" in s:
        return {s["type"]} if isinstance(s["type"], str) else set(s["type"])
    if "enum" in s:
        return {_json_type(v) for v in s["enum"]}
    if "const" in s:
        return {_json_type(s["const"])}
    return set()


def _types_upstream(s: dict[str, Any]) -> set[str]:
    if s.get("x-kubernetes-int-or-string"):
        return {"integer", "string"}
    return {s["type"]} if "type" in s else set()


def _bound(s: dict[str, Any], which: str) -> Any:
    """minimum/maximum as enforced: explicit, else the range of an int32/int64 format."""
    if which in s:
        return s[which]
    rng = INT_RANGES.get(s.get("format", ""))
    return None if rng is None else rng[0 if which == "minimum" else 1]


def differential(ours: dict[str, dict[str, Any]], crds: dict[str, Crd]) -> tuple[int, list[dict[str, Any]]]:
    """(field paths checked, mismatches) of the transcription ``ours`` (kind -> JSON Schema) against the upstream
    CRDs' served schemas (the version of the transcription's apiVersion const)."""
    mismatches: list[dict[str, Any]] = []
    checked = 0

    def miss(kind, path, what, mine, theirs):
        mismatches.append({"kind": kind, "path": path or "(root)", "mismatch": what, "transcription": mine,
                           "upstream": theirs})

    def walk(kind: str, path: str, t: dict[str, Any], u: dict[str, Any]) -> None:
        nonlocal checked
        checked += 1
        tt, ut = _types_ours(t), _types_upstream(u)
        if tt and ut and tt != ut:
            miss(kind, path, "type", sorted(tt), sorted(ut))
        if ("enum" in t or "enum" in u) and set(t.get("enum") or []) != set(u.get("enum") or []):
            miss(kind, path, "enum", t.get("enum"), u.get("enum"))
        for b in ("minimum", "maximum"):
            mine, theirs = _bound(t, b), _bound(u, b)
            if mine != theirs:
                miss(kind, path, b, mine, theirs)
        for k in SAME:
            if t.get(k) != u.get(k):
                miss(kind, path, k, t.get(k), u.get(k))
        if "properties" in t:
            # at the root, apiVersion/kind/metadata are the API server's requirement of every object, not the schema's
            server = SERVER_REQUIRED if not path else set()
            mine = sorted(set(t.get("required") or []) - server)
            theirs = sorted(set(u.get("required") or []) - server)
            if mine != theirs:
                miss(kind, path, "required", mine, theirs)
            if t.get("additionalProperties") is False and u.get("x-kubernetes-preserve-unknown-fields"):
                miss(kind, path, "unknown fields", "refused", "preserved")
            up = u.get("properties") or {}
            for name, sub in t["properties"].items():
                p = f"{path}.{name}" if path else name
                if name not in up:
                    miss(kind, p, "absent upstream", "declared", None)
                else:
                    walk(kind, p, sub, up[name])
            if t.get("additionalProperties") is False:
                for name in sorted(set(up) - set(t["properties"])):
                    miss(kind, f"{path}.{name}" if path else name, "not transcribed", None, "declared")
        if isinstance(t.get("items"), dict):
            if isinstance(u.get("items"), dict):
                walk(kind, f"{path}[]", t["items"], u["items"])
            else:
                miss(kind, f"{path}[]", "absent upstream", "items", None)

    for kind, schema in ours.items():
        crd = crds[kind]
        version = str(schema["properties"]["apiVersion"].get("const", "")).rpartition("/")[2]
        upstream = crd.schemas.get(version)
        if upstream is None:
            miss(kind, "apiVersion", "version not served", version, sorted(crd.schemas))
            continue
        walk(kind, "", schema, upstream)
    return checked, mismatches


# --------------------------------------------------------------------------------------------------- report

def report(where: Path, crds: dict[str, Crd], objects: list[dict[str, Any]], checked: int,
           mismatches: list[dict[str, Any]]) -> dict[str, Any]:
    failed = sum(not o["ok"] for o in objects)
    return {
        "crds": {"dir": str(where), "source_tag": source_tag(where), "pinned_tag": PINNED_TAG,
                 "files": [{"kind": c.kind, "file": c.file.name, "sha256": c.sha256,
                            "pinned": PINNED.get(c.file.name) == c.sha256, "versions": sorted(c.schemas)}
                           for c in crds.values()],
                 "formats_not_checked": sorted(set().union(*(c.formats_dropped for c in crds.values())))},
        "objects": objects,
        "differential": {"transcription": "tests/support/lws_schema.py", "paths_checked": checked,
                         "mismatches": mismatches},
        "summary": {"objects": len(objects), "passed": len(objects) - failed, "failed": failed,
                    "mismatches": len(mismatches), "ok": not failed and not mismatches and bool(objects)},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="check_lws_crds.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--crds", help=f"directory of the LWS CRD YAMLs (default: ${ENV}, else {default_dir()})")
    ap.add_argument("--write-rendered", metavar="DIR", help="only write the rendered files of every topology "
                    "preset and form into DIR (<preset>--<form>.yaml) and exit; no CRDs needed")
    args = ap.parse_args(argv)
    if args.write_rendered:
        return write_rendered(Path(args.write_rendered))
    where = crd_dir(args.crds)
    try:
        crds = load_crds(where)
    except Unusable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from tests.support.lws_schema import SCHEMAS

    objects = check_objects(crds, rendered_objects())
    checked, mismatches = differential(SCHEMAS, crds)
    out = report(where, crds, objects, checked, mismatches)
    print(json.dumps(out, indent=2))
    return 0 if out["summary"]["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
