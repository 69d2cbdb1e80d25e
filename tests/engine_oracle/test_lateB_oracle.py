"""Helper lateB's fixes, judged by the releases (tests/core/test_lateB_rules.py holds the product side):

- --disable-sliding-window with Qwen3-30B-A3B (no rope_scaling in its config.json; model type qwen3_moe) on vLLM
  0.11.0: refused at config/model.py:1851@0.11.0 because the oracle's transformers (5.19) answers a default
  rope_scaling; rule vllm-disable-sliding-window-default-rope warns (transformers 4.x, the release's image, keeps it
  None and the release accepts), and leaves the line without the flag;
- --media-io-kwargs '{"bogus": 1}' on a text-only model (shape-mla-moe): ModelConfig refuses it on every release
  (config/model.py:281@0.11.0 ... :453@0.34.0), rule vllm-config-field-bounds too; '{"bogus": {}}' passes both;
- DEFAULT_ROPE_MODEL_TYPES (core/rules/vllm_checks_lateB.py) is what the oracle's transformers says."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from gpustack_k3.core.rules.vllm_checks_lateB import _VMISS5_TYPES, DEFAULT_ROPE_MODEL_TYPES
from tests.core.test_lateB_rules import DEFAULT_ROPE, MEDIA, NO_FLAG, QWEN3, product
from tests.support import tiers

pytestmark = pytest.mark.engine_oracle

RELEASES = ["0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0"]


@pytest.mark.parametrize("release, argv, refused", [("vllm-0.11.0", QWEN3, True), ("vllm-0.11.0", NO_FLAG, False),
                                                    ("vllm-0.28.0", QWEN3, False)],
                         ids=["0.11.0-flag", "0.11.0-no-flag", "0.28.0-flag"])
def test_disable_sliding_window_qwen3_moe(oracles, release, argv, refused):
    version = release.split("-", 1)[1]
    tiers.engine_wheel("vllm", version)
    v = oracles(release).judge_line(argv, {})
    if refused:
        assert v["verdict"] == "refused", v
        assert "Disabling sliding window is not supported for models with rope_scaling" in v["message"], v
        assert v["where"].startswith("vllm/config/model.py:"), v
    else:
        assert v["verdict"] == "accepted", v
    pv = product(version, argv)
    assert pv["verdict"] == "pass", pv   # a warning since helper miss8: the refusal rests on the oracle's transformers 5
    from tests.core.test_lateB_rules import warned
    assert (DEFAULT_ROPE in warned(version, argv)) is refused


@pytest.mark.parametrize("release", [f"vllm-{r}" for r in RELEASES])
@pytest.mark.parametrize("value, refused", [('{"bogus": 1}', True), ('{"bogus": {}}', False)], ids=["int", "dict"])
def test_media_io_kwargs_text_only_model(oracles, release, value, refused):
    version = release.split("-", 1)[1]
    tiers.engine_wheel("vllm", version)
    v = oracles(release).judge_line(MEDIA + [value], {})
    assert (v["verdict"] == "refused") is refused, v
    if refused:
        assert "validation error for ModelConfig\nmedia_io_kwargs.bogus" in v["message"], v
    pv = product(version, MEDIA + [value], shape="mla-moe")
    assert ("vllm-config-field-bounds" in pv["rules"]) is refused, pv


_PROBE = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
from transformers import CONFIG_MAPPING
own, out = set(json.loads(sys.argv[1])), []
for mt in sorted(CONFIG_MAPPING.keys()):
    if mt in own or "gemma3" in mt:
        continue
    try:
        c = CONFIG_MAPPING[mt]()
    except Exception:
        continue
    if getattr(c, "get_text_config", lambda: c)() is not c:
        continue
    rs = getattr(c, "rope_scaling", None)
    if isinstance(rs, dict) and rs.get("rope_type") == "default":
        out.append(mt)
print(json.dumps(out))
"""
# vLLM 0.11.0's own config classes (transformers_utils/config.py:66-88@0.11.0 _CONFIG_REGISTRY)
_VLLM_OWN = ["chatglm", "deepseek_vl_v2", "deepseek_v3", "deepseek_v32", "kimi_vl", "jais", "mlp_speculator", "medusa",
             "midashenglm", "eagle", "speculators", "nemotron", "olmo3", "ovis", "ultravox", "step3_vl", "step3_text",
             "qwen3_next"]


def test_default_rope_model_types_are_the_oracles_transformers():
    from gpustack_k3.oracle.judge import cpu_python

    py = cpu_python()
    if not py.exists():
        tiers.unavailable(f"the oracle's interpreter {py} is not set up", require_env="GPUSTACK_K3_REQUIRE_WHEELS")
    wheel = tiers.engine_wheel("vllm", "0.11.0")
    assert wheel
    src = (tiers.cache_dir() / "engine-parsers" / "unpacked")
    reg = next(src.glob("vllm-0.11.0-*/vllm/transformers_utils/config.py"), None)
    if reg is not None:   # the registry's keys as the release writes them
        text = reg.read_text(encoding="utf-8")
        block = text[text.index("_CONFIG_REGISTRY"):text.index("_CONFIG_ATTRS_MAPPING")]
        for name in _VLLM_OWN:
            assert f"{name}=" in block or f'"{name}"' in block, name
    # offline, as the oracle's worker runs (gpustack_k3/oracle/engine_side/worker.py HF_HUB_OFFLINE,
    # TRANSFORMERS_OFFLINE): online, the edgetam configs' timm backbone lookups waited ~24 s each on the hub before
    # failing on a machine without network (the same model types listed, 50 s sooner)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([str(py), "-c", _PROBE, json.dumps(_VLLM_OWN)], capture_output=True, text=True, timeout=600,
                         check=True, env=env)
    assert set(json.loads(out.stdout.strip().splitlines()[-1])) - _VMISS5_TYPES == DEFAULT_ROPE_MODEL_TYPES
