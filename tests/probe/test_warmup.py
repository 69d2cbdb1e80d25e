"""Ready is not warm: spec.startup.warmup sent with the probe's code after Ready, the ``warm`` phase in the
cold-start tracker, and `gpustack-k3 run --runtime local` doing it on a child process that stands in for
the engine (tests/probe/fake_engine.py: real vLLM start-up lines, the fake OpenAI API)."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from fake_openai import Behaviour, FakeOpenAI

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument, Warmup
from gpustack_k3.catalog import load_catalog
from gpustack_k3.coldstart import ColdStartTracker
from gpustack_k3.core.launch import build_launch
from gpustack_k3.core.launch_types import Arg
from gpustack_k3.probe.warmup import describe, warm_up, warmup_config
from tests.support.ports import free_port

HERE = Path(__file__).parent


def test_warmup_spec_is_optional_and_bounded():
    doc = load_catalog().presets["vllm-cpu-smollm2"].document
    assert DeploymentDocument.model_validate(doc).spec.startup.warmup is None        # off by default
    w = DeploymentDocument.model_validate({**doc, "spec": {**doc["spec"], "startup": {"warmup": {"requests": 3}}}})
    assert (w.spec.startup.warmup.requests, w.spec.startup.warmup.inputLen, w.spec.startup.warmup.outputLen) == (3, 256, 32)
    cfg = warmup_config(Warmup(requests=3, outputLen=8), model="m")
    assert (cfg.requests, cfg.concurrency, cfg.warmup, cfg.output_len, cfg.model) == (3, 3, 0, 8, "m")
    from pydantic import ValidationError
    with pytest.raises(ValidationError):
        Warmup(requests=0)
    with pytest.raises(ValidationError):
        Warmup.model_validate({"requests": 2, "typo": 1})


def test_warm_phase_goes_to_the_tracker_and_first_requests_are_measured():
    tracker = ColdStartTracker(engine="vllm")
    calls = []

    def on_phase(s, e, d):
        calls.append((s, e))
        tracker.platform_event("warm", s, e, d)
    clock = iter([1000.0]).__next__
    with FakeOpenAI(Behaviour(prefill_s=0.1, token_s=0.01)) as srv:
        res = warm_up(srv.url, Warmup(requests=3, inputLen=30, outputLen=6), on_phase=on_phase, clock=clock)
        streamed = [b for b in srv.bodies if b.get("stream")]
    assert res["ok"] and res["completed"] == 3 and res["errors"] == 0 and res["engine"] == "vllm"
    assert res["ttftMsP50"] >= 100 and len(streamed) == 3 and all(b["max_tokens"] == 6 for b in streamed)
    assert calls[0] == (1000.0, None) and calls[1][0] is None and calls[1][1] == pytest.approx(1000.0 + res["seconds"])
    warm = tracker.report().phase("warm")
    assert warm.start == 1000.0 and warm.seconds == pytest.approx(res["seconds"], abs=1e-3)
    assert "warm after" in describe(res, tracker) and "cold-start phase warm" in describe(res, tracker)


def test_failed_warmup_reports_no_end():
    tracker = ColdStartTracker(engine="vllm")
    with FakeOpenAI(Behaviour(health=503)) as srv:
        res = warm_up(srv.url, Warmup(requests=2), on_phase=lambda s, e, d: tracker.platform_event("warm", s, e, d))
    assert res["ok"] is False and "stage health" in res["reason"]
    warm = tracker.report().phase("warm")
    assert warm.end is None and describe(res).startswith("warm-up FAILED")


def _launch(port):
    doc = DeploymentDocument.model_validate(load_catalog().presets["vllm-cpu-smollm2"].document)
    doc.spec.serving.port = port
    launch, _, _ = build_launch(doc)
    # the engine's command replaced by the stand-in; everything else (name, host, port, budget) as rendered
    return dataclasses.replace(launch, command=[sys.executable, str(HERE / "fake_engine.py")],
                               arguments=[Arg("extraArgs", [str(port)])])


@pytest.mark.parametrize("fail", [False, True])
def test_run_local_warms_up_after_ready(capsys, fail):
    from gpustack_k3.cli.run_cmd import _local

    port = free_port()
    launch = _launch(port)
    if fail:
        launch = dataclasses.replace(launch, arguments=[Arg("extraArgs", [str(port), "fail"])])
    code = _local(launch, None, True, (Warmup(requests=2, inputLen=20, outputLen=4), "smollm2"))
    err = capsys.readouterr().err
    assert "Ready after" in err and f"http://127.0.0.1:{port}" in err
    if fail:
        assert code == 1 and "warm-up FAILED" in err and "HTTP 500" in err
    else:
        assert code == 0, err
        assert "warm after" in err and "2 warm-up requests" in err and "cold-start phase warm:" in err
