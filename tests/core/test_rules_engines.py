"""The rules brought up to the released engines, version by version (each fact read in the wheel; the catalog
and the rule sources cite file:line@version): fire and quiet cases across the versions where the engines differ."""
from __future__ import annotations

import pytest

from gpustack_k3.core.plan import PlanUnavailable
from gpustack_k3.core.rules import validate

from .conftest import preset_doc


def found(preset: str, patch: dict, strict: bool = False) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in validate(preset_doc(preset, patch), strict=strict):
        out.setdefault(f.rule, []).append(f)
    return out


def dcp_dspark(version: str, **spec) -> dict:
    return {"engine": {"version": version}, "parallel": {"dcp": 8}, **spec}


# ------------------------------------------------------------------ vLLM DCP + DSpark: refused up to 0.28, gated after

@pytest.mark.parametrize("version,refused", [("kimi-k3", True), ("0.28.0", True), ("0.29.0", False), ("0.33.0", False)])
def test_vllm_dcp_with_dspark_refused_up_to_0_28(version, refused):
    f = found("vllm-seed", dcp_dspark(version))
    assert ("vllm-dcp-with-dspark" in f) is refused
    assert "vllm-dspark-dcp-backend" not in f          # the seed's draft backend FLASHINFER_MLA has DSpark DCP support
    assert not [x for x in f.values() if x[0].severity == "error"] or refused


def test_the_refusal_cites_the_version_it_applies_to():
    assert "config/speculative.py:1050-1057@0.28.0" in found("vllm-seed", dcp_dspark("0.28.0"))["vllm-dcp-with-dspark"][0].source
    assert "978-986" in found("vllm-seed", dcp_dspark("kimi-k3"))["vllm-dcp-with-dspark"][0].source


@pytest.mark.parametrize("version", ["0.29.0", "0.33.0"])
@pytest.mark.parametrize("draft,target,bad_field", [
    ("CUTLASS_MLA", None, "spec.speculative.attentionBackend"),       # no supports_non_causal_multi_token_dcp
    ("TRITON_MLA", None, "spec.speculative.attentionBackend"),
    ("FLASHINFER_MLA", "TRITON_MLA", "spec.vllm.attentionBackend"),   # no supports_dcp_with_varlen
    ("FLASHINFER_MLA", "CUTLASS_MLA", "spec.vllm.attentionBackend"),
    (None, "FLASH_ATTN_MLA", "spec.vllm.attentionBackend"),           # the draft inherits the target's backend
])
def test_forced_backend_without_dspark_dcp_support_refused(version, draft, target, bad_field):
    patch = dcp_dspark(version, speculative={"attentionBackend": draft}, vllm={"attentionBackend": target})
    f = found("vllm-seed", patch)["vllm-dspark-dcp-backend"]
    assert bad_field in {x.field for x in f}
    assert f"vLLM {version}" in f[0].message


@pytest.mark.parametrize("draft,target", [("FLASHINFER_MLA", None), (None, None), ("TOKENSPEED_MLA", "FLASHINFER_MLA"),
                                          ("FLASHINFER_MLA", "FLASH_ATTN_MLA"), ("FLASHINFER_MLA", "FLASHMLA_SPARSE"),
                                          ("FLASHINFER_MLA", "FLASHINFER_MLA_SPARSE")])
def test_backends_with_dspark_dcp_support_admitted(draft, target):
    patch = dcp_dspark("0.33.0", speculative={"attentionBackend": draft}, vllm={"attentionBackend": target})
    assert "vllm-dspark-dcp-backend" not in found("vllm-seed", patch)


def test_backend_table_is_per_version():
    """ROCM_AITER_MLA gained supports_non_causal_multi_token_dcp between 0.29.0 and 0.33.0 (rocm_aiter_mla.py:708)."""
    patch = {"speculative": {"attentionBackend": "ROCM_AITER_MLA"}}
    assert "vllm-dspark-dcp-backend" in found("vllm-seed", dcp_dspark("0.29.0", **patch))
    assert "vllm-dspark-dcp-backend" not in found("vllm-seed", dcp_dspark("0.33.0", **patch))
    f = found("vllm-seed", dcp_dspark("0.29.0", **patch))["vllm-dspark-dcp-backend"][0]
    assert "mla_attention.py:2132-2154@0.29.0" in f.source


def test_without_dcp_or_dspark_no_backend_gate():
    assert "vllm-dspark-dcp-backend" not in found("vllm-seed", {"engine": {"version": "0.33.0"},
                                                               "speculative": {"attentionBackend": "TRITON_MLA"}})
    assert "vllm-dspark-dcp-backend" not in found("vllm-dcp-no-spec", {"engine": {"version": "0.33.0"},
                                                                      "vllm": {"attentionBackend": "TRITON_MLA"}})


@pytest.mark.parametrize("interleave,refused", [("2", True), ("1", False)])
def test_interleave_caveat_for_flash_attn_mla(interleave, refused):
    patch = dcp_dspark("0.33.0", vllm={"attentionBackend": "FLASHMLA_SPARSE"},
                       extraArgs=[f"--cp-kv-cache-interleave-size={interleave}"])
    assert ("vllm-dspark-dcp-backend-extra" in found("vllm-seed", patch)) is refused


def test_attention_config_backend_is_the_target():
    patch = dcp_dspark("0.33.0", vllm={"attentionConfig": {"backend": "CUTLASS_MLA"}})
    f = found("vllm-seed", patch)["vllm-dspark-dcp-backend-extra"]
    assert "CUTLASS_MLA" in f[0].message and f[0].field == "spec.vllm.attentionConfig"


# ------------------------------------------------------------------ SGLang Kimi-K3 DCP + DSPARK

@pytest.mark.parametrize("mode,refused", [("compact", True), ("cap-accept", True), ("bogus", True), ("static", False)])
def test_sglang_dcp_dspark_needs_static_ragged_verify(mode, refused):
    f = found("sglang-seed", {"env": {"SGLANG_RAGGED_VERIFY_MODE": mode}})
    assert ("sglang-dcp-dspark-ragged-verify" in f) is refused
    if refused:
        assert f["sglang-dcp-dspark-ragged-verify"][0].field == "spec.env.SGLANG_RAGGED_VERIFY_MODE"


def test_sglang_ragged_verify_only_matters_with_dcp():
    assert "sglang-dcp-dspark-ragged-verify" not in found("sglang-no-dcp", {"env": {"SGLANG_RAGGED_VERIFY_MODE": "compact"}})


def test_sglang_seed_warns_symm_mem_is_turned_off():
    f = found("sglang-seed", {})
    assert f["sglang-dcp-symm-mem-off"][0].severity == "warning"
    assert "kimi_k3.py:56-61@0.5.23" in found("sglang-seed", {"engine": {"version": "0.5.23"}})["sglang-dcp-symm-mem-off"][0].source


@pytest.mark.parametrize("version,backend,refused", [
    ("0.5.23", "tokenspeed_mla", True), ("0.5.22", "tokenspeed_mla", False), ("kimi-k3", "tokenspeed_mla", True),
    ("0.5.22", "trtllm_mla", True), ("0.5.23", "aiter", False), ("0.5.22", "cutedsl_mla", False)])
def test_sglang_kimi_k3_dcp_decode_backends_per_version(version, backend, refused):
    f = found("sglang-seed", {"engine": {"version": version}, "sglang": {"decodeAttentionBackend": backend}})
    assert ("sglang-kimi-k3-dcp-decode-backend" in f) is refused
    if refused:
        msg, src = f["sglang-kimi-k3-dcp-decode-backend"][0].message, f["sglang-kimi-k3-dcp-decode-backend"][0].source
        assert ("'tokenspeed_mla'" in msg.split(", got")[0]) is (version == "0.5.22")
        assert ("@0.5.22" in src) is (version == "0.5.22")


# ------------------------------------------------------------------ vLLM 0.33: VLLM_ALL2ALL_BACKEND is gone

@pytest.mark.parametrize("version,warned", [("0.33.0", True), ("0.29.0", True), ("0.28.0", True), ("0.11.0", False)])
def test_all2all_env_removed(version, warned):
    patch = {"engine": {"version": version}, "speculative": {"method": "none"}, "env": {"VLLM_ALL2ALL_BACKEND": "deepep_low_latency"}}
    if version == "0.11.0":
        patch["vllm"] = {"moeBackend": None, "attentionConfig": None}
    f = found("vllm-seed", patch)
    assert ("env-removed" in f) is warned
    if warned:
        assert "--all2all-backend" in f["env-removed"][0].message


def test_all2all_backend_flag_known_on_0_33_not_on_0_11():
    assert "extra-arg-unknown" not in found("vllm-seed", {"engine": {"version": "0.33.0"},
                                                         "extraArgs": ["--all2all-backend", "deepep_low_latency"]})
    patch = {"engine": {"version": "0.11.0"}, "speculative": {"method": "none"}, "vllm": {"moeBackend": None, "attentionConfig": None},
             "extraArgs": ["--all2all-backend", "deepep_low_latency"]}
    assert "extra-arg-unknown" in found("vllm-seed", patch)


# ------------------------------------------------------------------ vLLM 0.33 Kimi-K3 specialized decode

SPECIAL = {"engine": {"version": "0.33.0"}, "vllm": {"additionalConfig": {"decode_backend": "latency_specialized"}}}


def with_special(**patch) -> dict:
    out = {**SPECIAL, **patch}
    out["vllm"] = {**SPECIAL["vllm"], **patch.get("vllm", {})}
    return out


@pytest.mark.parametrize("patch,reason", [
    ({"hardware": {"gpuType": "h200"}}, "this GPU"),
    ({"parallel": {"tp": 4}}, "TP other than 8/16"),
    ({"parallel": {"pp": 2}}, "pipeline parallelism"),
    ({"parallel": {"expertParallel": True}}, "expert parallelism"),
    ({"extraArgs": ["--enable-dbo"]}, "DBO"),
    ({"parallel": {"dcp": 2}}, "decode context parallel other than 1 or TP"),
    ({"extraArgs": ["--enable-sleep-mode"]}, "sleep mode"),
    ({"extraArgs": ["--enable-lora"]}, "LoRA"),
    ({"env": {"VLLM_USE_V2_MODEL_RUNNER": "0"}}, "the V1 model runner"),
    ({"extraArgs": ["--compilation-config", '{"mode": 1}']}, "torch.compile"),
    ({"vllm": {"enforceEager": True}}, "FULL decode CUDA graphs"),
    ({"extraArgs": ["--compilation-config", '{"cudagraph_mode": "PIECEWISE"}']}, "FULL decode CUDA graphs"),
    ({"speculative": {"method": "mtp", "draftModel": None, "attentionBackend": None, "numTokens": 1,
                      "draftSampleMethod": None, "rejectionSampleMethod": None}}, "speculative methods but DSpark"),
    ({"speculative": {"extraConfig": {"enable_adaptive_verification": True}}}, "adaptive verification"),
    ({"extraArgs": ["--mamba-cache-dtype", "float32"]}, "BF16 conv state"),
    ({"model": {"dtype": "float16"}}, "BF16 conv state"),
    ({"extraArgs": ["--mamba-ssm-cache-dtype", "bfloat16"]}, "FP32 recurrent state"),
    ({"extraArgs": ["--use-replayssm"]}, "ReplaySSM"),
    ({"speculative": {"numTokens": 8}}, "more than 7 speculative tokens"),
    ({"env": {"VLLM_KIMI_K3_AUX_ATTN_RES_STREAM": "1"}}, "AttnRes aux stream"),
])
def test_specialized_decode_refusals(patch, reason):
    f = found("vllm-seed", with_special(**patch))["vllm-kimi-k3-specialized-decode"]
    assert any(reason in x.message for x in f), [x.message for x in f]
    assert all(x.severity == "error" and "__init__.py:19-135@0.33.0" in x.source for x in f)


def test_specialized_decode_seed_config_admitted_and_only_on_0_33():
    assert "vllm-kimi-k3-specialized-decode" not in found("vllm-seed", SPECIAL)
    assert "vllm-kimi-k3-specialized-decode" not in found("vllm-seed", with_special(parallel={"dcp": 8}))   # DCP = TP
    on_029 = {**SPECIAL, "engine": {"version": "0.29.0"}, "speculative": {"numTokens": 8}}
    assert "vllm-kimi-k3-specialized-decode" not in found("vllm-seed", on_029)   # no specialized decode before 0.33


def test_specialized_decode_backend_value_checked():
    f = found("vllm-seed", {**SPECIAL, "vllm": {"additionalConfig": {"decode_backend": "fastest"}}})
    assert "auto/latency_specialized" in f["vllm-kimi-k3-specialized-decode"][0].message
    assert "vllm-kimi-k3-specialized-decode" not in found("vllm-seed", {**SPECIAL, "vllm": {"additionalConfig": {"mla_core": "x"}}})


def test_additional_config_renders_as_the_engine_flag():
    from gpustack_k3.core.flags import render_args
    from gpustack_k3.core.resolve import resolve

    args = [t for a in render_args(resolve(preset_doc("vllm-seed", SPECIAL))) for t in a.tokens]
    i = args.index("--additional-config")
    assert args[i + 1] == '{"decode_backend":"latency_specialized"}'


# ------------------------------------------------------------------ compile-cache reuse

@pytest.mark.parametrize("version,env,warned", [
    ("0.33.0", {"VLLM_DP_RANK": "$(LWS_WORKER_INDEX)"}, True),
    ("0.33.0", {"VLLM_ENGINE_READY_TIMEOUT_S": "${HOSTNAME}"}, True),
    ("0.33.0", {"MOONCAKE_REQUESTER_LOCAL_HOSTNAME": "$POD_NAME"}, True),      # hashed without the VLLM_ prefix
    ("0.33.0", {"VLLM_HOST_IP": "$(POD_IP)"}, False),                          # on the ignore list
    ("0.33.0", {"VLLM_NIXL_SIDE_CHANNEL_HOST": "$(POD_IP)"}, False),           # ai-dynamo/dynamo#10695's variable, ignored now
    ("0.33.0", {"VLLM_DP_RANK": "3"}, False),                                  # the same on every pod
    ("0.33.0", {"NCCL_SOCKET_IFNAME": "$(POD_NAME)"}, False),                  # not a vLLM variable
    ("0.11.0", {"VLLM_DP_RANK": "$(POD_NAME)"}, True),                         # 0.11 hashes an allow list
    ("0.11.0", {"VLLM_ENGINE_READY_TIMEOUT_S": "$(POD_NAME)"}, False),         # ... which does not hold this one
    ("kimi-k3", {"VLLM_DP_RANK": "$(POD_NAME)"}, True),
])
def test_per_pod_value_in_a_compile_cache_variable(version, env, warned):
    patch = {"engine": {"version": version}, "env": env}
    if version == "0.11.0":
        patch.update(speculative={"method": "none"}, vllm={"moeBackend": None, "attentionConfig": None})
    f = found("vllm-seed", patch)
    assert ("vllm-compile-cache-env-per-pod" in f) is warned
    if warned:
        x = f["vllm-compile-cache-env-per-pod"][0]
        name = next(iter(env))
        assert x.field == f"spec.env.{name}" and name in x.message and x.severity == "warning"


# ------------------------------------------------------------------ the planner: input errors vs bugs

def test_planner_input_error_is_a_finding_not_silence():
    f = found("vllm-seed", {"memory": {"kvCacheDtype": "nvfp4"}})
    assert "nvfp4" in f["plan-unavailable"][0].message
    assert "vllm-kv-overcommit" not in f


def test_planner_bug_surfaces(monkeypatch):
    """A planner bug (TypeError, ValueError, ZeroDivisionError) must not silently switch off the memory rules."""
    from gpustack_k3.core.rules import runner

    for exc in (ZeroDivisionError("float division by zero"), TypeError("unsupported operand"), ValueError("bad")):
        def broken(r, exc=exc):
            raise exc
        monkeypatch.setattr(runner, "plan", broken)
        with pytest.raises(type(exc)):
            validate(preset_doc("vllm-seed"))
    monkeypatch.setattr(runner, "plan", lambda r: (_ for _ in ()).throw(PlanUnavailable("no figures")))
    assert "plan-unavailable" in {f.rule for f in validate(preset_doc("vllm-seed"))}
