"""Helper lateB's fixes, the product side (tests/engine_oracle/test_lateB_oracle.py has the releases judge the same
lines):

- rule vllm-disable-sliding-window-default-rope (core/rules/vllm_checks_lateB.py): --disable-sliding-window on vLLM
  0.11.0 for a model type whose transformers 5 config answers a default rope_scaling (Qwen3-30B-A3B: qwen3_moe),
  config/model.py:1847-1854@0.11.0; only 0.11.0, only with the flag, not where config.json or an override says more;
- rule vllm-config-field-bounds (core/rules/config_fields.py) on --media-io-kwargs for a text-only model: ModelConfig's
  InitVar media_io_kwargs (dict[str, dict[str, Any]] | None) is type-checked for every model on every release."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.core.rules import RULES
from tools.engine_oracle.product import check_args, shape_config

DEFAULT_ROPE = "vllm-disable-sliding-window-default-rope"
LATEB_DIRECT = {DEFAULT_ROPE}

QWEN3 = ["/models/Qwen3-30B-A3B", "--gpu-memory-utilization", "0.9", "--tensor-parallel-size", "1",
         "--enable-expert-parallel", "--long-prefill-token-threshold", "4096", "--max-num-seqs", "48",
         "--disable-sliding-window", "--data-parallel-size", "8", "--interleave-mm-strings", "--enable-prefix-caching"]
NO_FLAG = [a for a in QWEN3 if a != "--disable-sliding-window"]


def qwen3_config() -> str:
    from gpustack_k3.oracle.models import preset_model_config

    path = preset_model_config("qwen3-30b-a3b")
    assert path is not None
    return path


def product(release: str, argv: list[str], config: str | None = None, shape: str | None = None) -> dict:
    cfg = shape_config(shape) if shape else (config or qwen3_config())
    if shape and cfg is None:
        pytest.skip("aiconfigurator-core (the shapes' config.json) is not installed")
    return check_args("vllm", release, {"model": None, "model_config": cfg, "gpu_type": "b300", "gpus": 8, "env": {},
                                        "argv": argv})


def test_the_rule_is_0_11_0_only():
    assert RULES[DEFAULT_ROPE].sources == {"vllm 0.11.0": RULES[DEFAULT_ROPE].source}


def warned(release: str, argv: list[str], config: str | None = None) -> dict[str, str]:
    """{rule: severity} of check-args on the line (the rule is a warning since helper miss8)."""
    from tests.core.test_miss8_rules import findings

    return findings("vllm", release, argv, config=config or qwen3_config())


def test_qwen3_moe_line_warned_on_0_11_0():
    pv = product("0.11.0", QWEN3)
    assert pv["verdict"] == "pass", pv
    assert warned("0.11.0", QWEN3).get(DEFAULT_ROPE) == "warning"


@pytest.mark.parametrize("release, argv", [("0.11.0", NO_FLAG), ("0.28.0", QWEN3), ("0.34.0", QWEN3),
                                           ("0.11.0", NO_FLAG + ["--no-disable-sliding-window"]),
                                           ("0.11.0", QWEN3 + ["--hf-overrides", '{"rope_scaling": null}'])],
                         ids=["no-flag", "0.28.0", "0.34.0", "negated", "hf-overrides"])
def test_qwen3_moe_line_left_alone(release, argv):
    assert DEFAULT_ROPE not in warned(release, argv)


@pytest.mark.parametrize("rope, refused", [
    ({"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "rope_theta": 500000.0}}, False),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}}, True),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}, False),
    ({"model_type": "kimi_k3"}, False),   # not a transformers 5 config with default rope parameters
], ids=["rope-parameters-llama3", "rope-parameters-default", "rope-scaling-written", "other-model-type"])
def test_what_config_json_says(tmp_path, rope, refused):
    cfg = json.loads(open(qwen3_config()).read())
    cfg.update(rope)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    found = warned("0.11.0", QWEN3, config=str(path))
    assert (DEFAULT_ROPE in found) is refused, found


MEDIA = ["/models/shape-mla-moe", "--tensor-parallel-size", "8", "--media-io-kwargs"]


@pytest.mark.parametrize("release", ["0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0"])
def test_media_io_kwargs_on_a_text_only_model(release):
    bad = product(release, MEDIA + ['{"bogus": 1}'], shape="mla-moe")
    assert "vllm-config-field-bounds" in bad["rules"], bad
    assert "media_io_kwargs key 'bogus': Input should be a valid dictionary" in bad["message"], bad
    good = product(release, MEDIA + ['{"bogus": {}}'], shape="mla-moe")
    assert "vllm-config-field-bounds" not in good["rules"], good
