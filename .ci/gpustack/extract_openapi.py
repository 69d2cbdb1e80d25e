"""Vendor the GPUStack 2.3.0 OpenAPI components our documents are checked against (unit tier).

  python3 .ci/gpustack/extract_openapi.py [--url http://127.0.0.1:PORT] [--out tests/gpustack/schema/...]

Reads ``/openapi.json`` from a running server (default: GPUSTACK_URL from `.ci/setup_gpustack.sh env`),
keeps ``InferenceBackendCreate``, ``VersionConfig``, ``ModelCreate``, ``GPUSelector`` and every component
they reference (transitively), and writes them as one JSON document with the server version and the
time of extraction. The unit test validates backend.json / model.json against these schemas with
unknown properties forbidden (the server itself silently drops unknown keys, gpustack.md §1.1).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

ROOTS = ("InferenceBackendCreate", "VersionConfig", "ModelCreate", "GPUSelector")
REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "gpustack" / "schema" / "gpustack-2.3.0-openapi-extract.json"


def refs(node, found: set[str]) -> None:
    if isinstance(node, dict):
        r = node.get("$ref")
        if isinstance(r, str) and r.startswith("#/components/schemas/"):
            found.add(r.rsplit("/", 1)[1])
        for v in node.values():
            refs(v, found)
    elif isinstance(node, list):
        for v in node:
            refs(v, found)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default=os.environ.get("GPUSTACK_URL"))
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()
    url = a.url
    if not url:
        env = subprocess.run([str(REPO / ".ci" / "setup_gpustack.sh"), "env"], capture_output=True, text=True, check=True)
        url = dict(line.split("=", 1) for line in env.stdout.split()).get("GPUSTACK_URL")
    spec = httpx.get(f"{url.rstrip('/')}/openapi.json", timeout=30).raise_for_status().json()
    schemas = spec["components"]["schemas"]
    keep: set[str] = set()
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        found: set[str] = set()
        refs(schemas[name], found)
        todo += sorted(found - keep)
    version = spec.get("info", {}).get("version", "?")
    out = {"x-source": f"GET /openapi.json of a live GPUStack {version} server; extracted by .ci/gpustack/extract_openapi.py",
           "x-roots": list(ROOTS), "info": spec.get("info", {}),
           "components": {"schemas": {k: schemas[k] for k in sorted(keep)}}}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(keep)} schemas ({', '.join(sorted(keep))}) to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
