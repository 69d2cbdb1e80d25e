"""The rules of gpustack_k3/core/rules/vllm_checks_lora7.py: --enable-lora on an architecture whose class the release
does not let run LoRA -- refused where the release refuses it when building the config (0.33.0, 0.34.0), a warning
where it fails only when the worker loads the model (0.11.0, 0.28.0, 0.29.0), nothing for a LoRA-capable model or an
architecture the release's registry does not hold. tests/engine_oracle/test_lora7_rules_oracle.py has each release
judge the same lines, and checks the generated table against the wheels."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.catalog.loader import DATA
from gpustack_k3.core.rules import RULES
from tests.core.test_vllm_checks import product, shape_config


def findings(release: str, argv: list[str], model: str | None = None, config: str | None = None) -> dict[str, dict]:
    """{rule: finding} of check-args on the line (warnings too: product() lists the rules of a refusal only)."""
    from gpustack_k3.cli.core_cmds import check_args as cmd
    from tools.engine_oracle.product import _RUNNER, _common

    if model is not None and model.startswith("shape-"):
        model, config = None, shape_config(model)
    res = _RUNNER.invoke(cmd, _common("vllm", release, model, "b300", config) + ["--gpus", "8", "--", *argv])
    out = res.stdout if hasattr(res, "stdout") else res.output
    assert res.exit_code in (0, 1), (res.exit_code, out, res.exception)
    return {f["rule"]: f for f in json.loads(out)["findings"]}

ERROR = "vllm-lora-architecture-unsupported"
AT_LOAD = "vllm-lora-architecture-unsupported-at-load"
LORA = ["--enable-lora"]
K3 = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8"]               # KimiK3ForConditionalGeneration
DS = ["/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "-tp", "8"]   # DeepseekV41ForCausalLM
SMOL = ["/models/smollm2-hf"]                                             # LlamaForCausalLM (dense)
YARN = ["/models/shape-gqa-yarn"]                                         # GptOssForCausalLM

# (rule id, release, refused/warned line, its env, the line flipped, its env, catalog model or shape-X)
CASES = [
    (ERROR, "0.34.0", K3 + LORA, {}, K3, {}, "kimi-k3"),
    (ERROR, "0.33.0", K3 + LORA, {}, K3, {}, "kimi-k3"),
    # DeepSeek-V4.1's class gained SupportsLoRA in 0.34.0: refused on 0.33.0 only (accepted below)
    (ERROR, "0.33.0", DS + LORA, {}, DS, {}, "deepseek-v4.1-flash"),
    (AT_LOAD, "0.29.0", K3 + LORA, {}, K3, {}, "kimi-k3"),
    (AT_LOAD, "0.28.0", K3 + LORA, {}, K3, {}, "kimi-k3"),
    # 0.11.0 registers no Kimi-K3; its GptOssForCausalLM has no SupportsLoRA (0.28.0 and later's has)
    (AT_LOAD, "0.11.0", YARN + LORA, {}, YARN, {}, "shape-gqa-yarn"),
]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]

# lines the rules must leave (release, line, env, catalog model or shape-X, the rule); the engine oracle judges them
NOT_REFUSED = [
    ("0.34.0", DS + LORA, {}, "deepseek-v4.1-flash", ERROR),
    *((rel, SMOL + LORA, {}, None, ERROR) for rel in ("0.33.0", "0.34.0")),
    *((rel, SMOL + LORA, {}, None, AT_LOAD) for rel in ("0.11.0", "0.28.0", "0.29.0")),
    ("0.34.0", YARN + LORA, {}, "shape-gqa-yarn", ERROR),
    ("0.29.0", YARN + LORA, {}, "shape-gqa-yarn", AT_LOAD),
    ("0.34.0", ["/models/shape-gqa-dense", "-tp", "8"] + LORA, {}, "shape-gqa-dense", ERROR),
    # --no-enable-lora builds no LoRAConfig
    ("0.34.0", K3 + ["--no-enable-lora"], {}, "kimi-k3", ERROR),
]


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_rule_fires_on_its_line_and_not_on_the_flip(rid, release, bad, bad_env, good, good_env, model):
    got = product(release, bad, bad_env, model)
    # refused where the release refuses at config time; only a warning where it fails at model load
    if RULES[rid].severity == "error":
        assert got["verdict"] == "refuse" and rid in got["rules"], got
    else:
        assert got["verdict"] == "pass", got
        assert findings(release, bad, model)[rid]["severity"] == "warning"
    assert rid not in findings(release, good, model)


@pytest.mark.parametrize("release,line,env,model,rid", NOT_REFUSED)
def test_the_rules_leave_these_lines(release, line, env, model, rid):
    got = findings(release, line, model)
    assert ERROR not in got and AT_LOAD not in got, got


def test_the_rules_are_switched_on_per_release():
    # the config-time refusal is 0.33.0's and 0.34.0's; 0.28.0 and 0.29.0 only warn (the worker refuses at load)
    for release in ("0.33.0", "0.34.0"):
        got = findings(release, K3 + LORA, "kimi-k3")
        assert ERROR in got and AT_LOAD not in got
    for release in ("0.28.0", "0.29.0"):
        got = findings(release, K3 + LORA, "kimi-k3")
        assert AT_LOAD in got and ERROR not in got


def test_an_architecture_the_registry_does_not_hold_is_left_alone(tmp_path):
    cfg = json.loads(open(shape_config("shape-gqa-dense"), encoding="utf-8").read())
    cfg["architectures"] = ["NotARealArchForCausalLM"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    for release in ("0.29.0", "0.34.0"):
        got = findings(release, ["/models/shape-gqa-dense", "--enable-lora"], None, str(path))
        assert ERROR not in got and AT_LOAD not in got, got
    # the same config with a registered LoRA-less architecture: the rule reads the config's architecture
    cfg["architectures"] = ["KimiLinearForCausalLM"]
    path.write_text(json.dumps(cfg), encoding="utf-8")
    assert ERROR in findings("0.34.0", ["/models/shape-gqa-dense", "--enable-lora"], None, str(path))


def test_the_refusal_names_the_field_the_value_and_the_way_out():
    f = findings("0.34.0", K3 + LORA, "kimi-k3")[ERROR]
    # the model, --trust-remote-code and -tp are typed fields of the spec: --enable-lora is its first extra arg
    assert f["field"] == "spec.extraArgs[0]", f
    assert "KimiK3ForConditionalGeneration" in f["message"] and "without --enable-lora" in f["message"], f
    assert "Drop --enable-lora" in f["fix"], f


def test_the_table_holds_every_release_and_the_kimi_k3_facts():
    d = json.loads((DATA / "engines/vllm-lora-architectures.json").read_text(encoding="utf-8"))
    assert d["made_by"] == "tools/engine_parsers/lora_archs.py"
    rel = d["releases"]
    assert set(rel) >= {"0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0"}
    for v, r in rel.items():
        assert set(r["not_lora_capable"]) <= set(r["architectures"]) and set(r["unresolved"]) <= set(r["architectures"])
        assert "LlamaForCausalLM" in r["architectures"] and "LlamaForCausalLM" not in r["not_lora_capable"], v
        assert f"@{v}" in r["source"]
    assert "KimiK3ForConditionalGeneration" not in rel["0.11.0"]["architectures"]
    for v in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
        assert "KimiK3ForConditionalGeneration" in rel[v]["not_lora_capable"], v


def test_each_rule_cites_every_release_it_runs_on():
    for rid in LORA7_DIRECT:
        releases = {c[1] for c in CASES if c[0] == rid}
        assert {k.split()[1] for k in RULES[rid].sources} == releases, rid


# the rules of gpustack_k3/core/rules/vllm_checks_lora7.py with a firing case above (tests/core/test_registry.py
# test_every_rule_has_a_firing_case counts them)
LORA7_DIRECT = {c[0] for c in CASES}


def test_every_rule_of_the_module_has_a_case():
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.vllm_checks_lora7"} \
        == LORA7_DIRECT
