"""What the kind e2e asserts about a K3Deployment read back from the API server (pure, no I/O
except in ``main``): the operator took it to Ready (or Warm) and ``status.coldStart`` carries the
engine's cold-start phases, each finished, in start order, for the attempt that is serving.

Used by e2e/kind/run.sh (``python3 e2e/kind/k3status.py CR.json``) and by the pytest module, and
checked here against the status the operator writes for a real recorded vLLM CPU start-up
(tests/e2e_static/test_kind_status_check.py).
"""
from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

# The engine phases a vLLM 0.32.0 CPU cold start must show (gpustack_k3/coldstart/phases.py); the
# eager CPU engine captures no CUDA graphs, so cuda_graphs is not required.
REQUIRED_PHASES = ("weights_load", "kv_cache", "server_ready")
SERVING_PHASES = ("Ready", "Warm")


def coldstart_problems(cr: Mapping[str, Any], required: tuple[str, ...] = REQUIRED_PHASES) -> list[str]:
    """Everything wrong with the resource's status for a served cold start; [] when it is right."""
    name = (cr.get("metadata") or {}).get("name", "?")
    status = cr.get("status") or {}
    out: list[str] = []
    phase = status.get("phase")
    if phase not in SERVING_PHASES:
        out.append(f"{name}: status.phase is {phase!r}, expected one of {', '.join(SERVING_PHASES)}")
    cs = status.get("coldStart")
    if not isinstance(cs, Mapping):
        return out + [f"{name}: status.coldStart is missing (the operator's pod-log bridge wrote nothing)"]
    phases = cs.get("phases")
    if not isinstance(phases, list) or not phases:
        return out + [f"{name}: status.coldStart.phases is empty"]
    by = {p.get("name"): p for p in phases if isinstance(p, Mapping)}
    for want in required:
        p = by.get(want)
        if p is None:
            out.append(f"{name}: status.coldStart.phases has no {want!r} (has: {', '.join(map(str, by))})")
            continue
        if not p.get("start") or not p.get("end"):
            out.append(f"{name}: phase {want} is not finished (start={p.get('start')!r}, end={p.get('end')!r})")
        secs = p.get("seconds")
        if not isinstance(secs, (int, float)) or secs < 0:
            out.append(f"{name}: phase {want} has no duration (seconds={secs!r})")
    starts = [(by[w].get("start") or "") for w in required if w in by]
    if all(starts) and starts != sorted(starts):
        out.append(f"{name}: phases {', '.join(required)} are out of order: starts {starts}")
    if cs.get("failedPhase"):
        out.append(f"{name}: status.coldStart.failedPhase={cs['failedPhase']!r} ({cs.get('reason')})")
    total = cs.get("totalSeconds")
    if not isinstance(total, (int, float)) or total <= 0:
        out.append(f"{name}: status.coldStart.totalSeconds is {total!r}, expected the seconds to serving")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: k3status.py CR.json   (kubectl get k3dep NAME -o json)", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as fh:
            cr = json.load(fh)
    except (OSError, ValueError) as exc:
        print(f"k3status: cannot read {argv[0]}: {exc}", file=sys.stderr)
        return 2
    problems = coldstart_problems(cr)
    for p in problems:
        print(f"k3status: {p}", file=sys.stderr)
    if not problems:
        cs = cr["status"]["coldStart"]
        print("k3status: " + cr["status"]["phase"] + "; cold start "
              + ", ".join(f"{p['name']} {p['seconds']:g}s" for p in cs["phases"] if p.get("seconds") is not None)
              + f"; total {cs['totalSeconds']:g}s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
