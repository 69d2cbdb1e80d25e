"""The real-engine tier end to end: our renderer's argv for the CPU preset, started by the local runtime
(whose log follow is the cold-start supervisor), tracked to Ready, serving a completion (issue 8 item 3);
then `coldstart LOG --spec` compares the engine's own memory figures with the plan (plan_check).

The start is the session's ``preset_run`` (tests/engine/conftest.py), shared with test_vllm_cpu_engine.py."""
from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from gpustack_k3.cli.coldstart_cmd import coldstart

pytestmark = pytest.mark.engine


def test_cpu_preset_argv_runs_to_ready_with_phases_and_plan_check(preset_run, tmp_path):
    run = preset_run
    assert run.ready.ready, (run.ready.reason, run.ready_report)
    r = run.completion
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] > 0
    rep = run.report
    assert rep["engine"] == "vllm" and rep["version"].startswith("0.32")
    names = [p["name"] for p in rep["phases"]]
    for phase in ("process_start", "weights_load", "kv_cache", "server_ready"):
        assert phase in names, names
    # the engine's own figures (cpu_worker.py:260, kv_cache_utils.py:2327 @0.32.0)
    mem = rep["memory"]
    assert mem["kv_cache_tokens"] > 0 and mem["concurrency_len"] == 1024 and mem["kv_cache_gib"] > 0
    # the same log through the CLI with the spec: planned vs engine, drift in percent
    log = tmp_path / "engine.log"
    log.write_bytes(run.log)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(run.doc.model_dump(mode="json", exclude_none=True)))
    out = CliRunner().invoke(coldstart, [str(log), "--spec", str(spec), "-o", "json"])
    assert out.exit_code == 0, out.output
    check = json.loads(out.output)["plan_check"]
    by = {row["figure"]: row for row in check["figures"]}
    assert set(by) == {"kv_cache_gib", "kv_cache_tokens", "max_concurrency"} and check["not_printed"] == []
    assert by["kv_cache_tokens"]["engine"] == mem["kv_cache_tokens"]
    assert by["kv_cache_tokens"]["planned"] == run.plan.kv_cache_tokens
    assert all(abs(row["drift_pct"]) < 1.0 for row in check["figures"]), check   # the planner predicts this preset
