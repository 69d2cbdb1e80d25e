"""e2e/kind/k3status.py, the kind e2e's verdict on a K3Deployment's status, against the status the
operator itself writes: a real recorded vLLM 0.32.0 CPU start-up (tests/fixtures/logs) fed through the
cold-start tracker, turned into the snapshot by the operator's pod-log bridge (``snapshot_of``) and into
``status`` by ``decide``'s key mapping — so that a format change on either side fails here, not only
on a kind machine. Negative cases: a failed start, missing phases, a phase not Ready."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ._paths import KIND_DIR, REPO

from e2e.kind.k3status import REQUIRED_PHASES, coldstart_problems

LOGS = REPO / "tests" / "fixtures" / "logs"


def _status_from_log(name: str, phase: str) -> dict:
    from gpustack_k3.coldstart.tracker import ColdStartTracker
    from gpustack_k3.operator import coldstart_bridge as bridge

    text = (LOGS / name).read_bytes()
    tracker = ColdStartTracker(engine="vllm", budgets={}, year=2026)
    tracker.feed(text)
    tracker.finish()
    snap = bridge.snapshot_of(tracker.report(), "smollm2-cpu-6d9f-abcde")
    cold = snap.status.model_dump(by_alias=True, exclude_none=True)
    return {"apiVersion": "k3.gpustack.ai/v1alpha1", "kind": "K3Deployment", "metadata": {"name": "smollm2-cpu"},
            "status": {"phase": phase, "coldStart": cold}}


def test_a_real_cpu_start_passes():
    cr = _status_from_log("vllm-0.32.0-cpu-eager.log", "Ready")
    assert coldstart_problems(cr) == []
    names = [p["name"] for p in cr["status"]["coldStart"]["phases"]]
    assert all(n in names for n in REQUIRED_PHASES)


def test_a_failed_start_is_refused():
    cr = _status_from_log("vllm-0.32.0-cpu-failed.log", "Failed")
    problems = coldstart_problems(cr)
    assert any("status.phase is 'Failed'" in p for p in problems)
    assert any("failedPhase" in p or "not finished" in p or "has no" in p for p in problems), problems


@pytest.mark.parametrize("drop", REQUIRED_PHASES)
def test_a_missing_phase_is_named(drop):
    cr = _status_from_log("vllm-0.32.0-cpu-eager.log", "Ready")
    cr["status"]["coldStart"]["phases"] = [p for p in cr["status"]["coldStart"]["phases"] if p["name"] != drop]
    assert coldstart_problems(cr) == [f"smollm2-cpu: status.coldStart.phases has no {drop!r} (has: "
                                      + ", ".join(p["name"] for p in cr["status"]["coldStart"]["phases"]) + ")"]


def test_unfinished_starting_or_empty_status_is_refused():
    cr = _status_from_log("vllm-0.32.0-cpu-eager.log", "Starting")
    assert coldstart_problems(cr) == ["smollm2-cpu: status.phase is 'Starting', expected one of Ready, Warm"]
    cr = _status_from_log("vllm-0.32.0-cpu-eager.log", "Warm")
    kv = next(p for p in cr["status"]["coldStart"]["phases"] if p["name"] == "kv_cache")
    kv["end"] = None
    assert any("phase kv_cache is not finished" in p for p in coldstart_problems(cr))
    assert coldstart_problems({"metadata": {"name": "x"}, "status": {"phase": "Ready"}}) == [
        "x: status.coldStart is missing (the operator's pod-log bridge wrote nothing)"]


def test_cli(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(_status_from_log("vllm-0.32.0-cpu-eager.log", "Ready")))
    bad.write_text(json.dumps(_status_from_log("vllm-0.32.0-cpu-eager.log", "Starting")))
    ok = subprocess.run([sys.executable, str(KIND_DIR / "k3status.py"), str(good)], capture_output=True, text=True,
                        check=False)
    assert ok.returncode == 0 and "weights_load" in ok.stdout, ok.stderr
    no = subprocess.run([sys.executable, str(KIND_DIR / "k3status.py"), str(bad)], capture_output=True, text=True,
                        check=False)
    assert no.returncode == 1 and "Starting" in no.stderr
    missing = subprocess.run([sys.executable, str(KIND_DIR / "k3status.py"), str(tmp_path / "nope.json")],
                             capture_output=True, text=True, check=False)
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr
