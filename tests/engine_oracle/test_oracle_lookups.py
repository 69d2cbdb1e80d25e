"""The engine oracle's verdict where the release's answer rests on what this box cannot know or lacks
(gpustack_k3/oracle/engine_side/doubles.py HUB_REASON; the CPU release's registry inspected in-process)."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.oracle.judge import Oracle

pytestmark = pytest.mark.engine_oracle


def _one(release: str, argv: list[str]) -> dict:
    o = Oracle(release)
    try:
        return o.judge_line(argv)
    finally:
        o.close()


def test_a_hub_name_is_not_decidable_offline_and_a_bad_path_stays_refused():
    v = _one("vllm-0.34.0", ["/models/smollm2-hf", "--speculative-config",
                             json.dumps({"model": "someone/no-such-draft", "num_speculative_tokens": 2})])
    assert v["verdict"] == "not_decidable" and v["reason"] == "hub-offline", v
    assert v["where"].startswith("vllm/transformers_utils/"), v
    # an absolute path that does not exist never reaches the Hub: the release's own refusal
    v = _one("vllm-0.34.0", ["/models/no-such-directory"])
    assert v["verdict"] == "refused", v


def test_the_cpu_release_inspects_a_vision_model_without_torchvision(tmp_path):
    from tools.engine_oracle.synth import public_configs

    d = tmp_path / "qwen3-vl"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(public_configs()["Qwen--Qwen3-VL-8B-Instruct"]))
    v = _one("vllm-0.32.0-cpu", ["--model", str(d)])
    assert v["verdict"] == "accepted", v
