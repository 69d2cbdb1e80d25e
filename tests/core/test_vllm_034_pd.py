"""vLLM 0.34.0 next to 0.33.0: check-pd with a release per side (NIXL connector 15 vs 16: refused, naming both), and
`upgrade-check 0.33.0 -> 0.34.0` against the pinned 0.34.0 entry: what the upgrade data calls refused, the pinned
release's rules refuse too, and the rewritten line passes them."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from gpustack_k3.cli.main import cli
from gpustack_k3.core import upgrade

KV = '\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\''
LINE = f"vllm serve /models/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code --kv-transfer-config {KV}"
ENV = ("--prefill-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.1", "--decode-env", "VLLM_NIXL_SIDE_CHANNEL_HOST=10.0.0.2")


def check_pd(prefill: str, decode: str) -> tuple[int, list[dict]]:
    res = CliRunner().invoke(cli, ["check-pd", "--engine", "vllm", "--model", "kimi-k3", "--prefill", LINE,
                                   "--decode", LINE, "-o", "json", *ENV, "--prefill-engine-version", prefill,
                                   "--decode-engine-version", decode], catch_exceptions=False)
    return res.exit_code, json.loads(res.output)["findings"]


@pytest.mark.parametrize("prefill,decode", [("0.33.0", "0.34.0"), ("0.34.0", "0.33.0")])
def test_a_0_33_side_and_a_0_34_side_do_not_handshake(prefill, decode):
    code, findings = check_pd(prefill, decode)
    assert code == 1
    (f,) = [f for f in findings if f["rule"] == "pd-compat-hash" and f["severity"] == "error"]
    connector = {"0.33.0": 15, "0.34.0": 16}
    assert (f"prefill '{prefill} (connector {connector[prefill]})' != "
            f"decode '{decode} (connector {connector[decode]})'") in f["message"], f


def test_both_sides_on_0_34_0_pass():
    code, findings = check_pd("0.34.0", "0.34.0")
    assert code == 0 and not [f for f in findings if f["severity"] == "error"], findings


def check_args(version: str, argv: list[str], env: dict[str, str]) -> set[str]:
    envs = [a for k, v in env.items() for a in ("--env", f"{k}={v}")]
    res = CliRunner().invoke(cli, ["check-args", "--engine", "vllm", "--engine-version", version, "-o", "json",
                                   *envs, "--", *argv], catch_exceptions=False)
    return {f["rule"] for f in json.loads(res.stdout)["findings"] if f["severity"] == "error"}


BASE = ["vllm", "serve", "moonshotai/Kimi-K3", "--tensor-parallel-size", "8", "--trust-remote-code",
        "--gpu-memory-utilization", "0.9", "--max-model-len", "262144"]
SC = "--speculative-config"
# Kimi-K3's public config.json declares no MTP layers (num_nextn_predict_layers 0), so method mtp on it is refused by
# both releases for that reason (spec-mtp-needs-mtp-layers, vllm-kimi-k3-mtp-zero-layers-034): the removed-key
# cases ride on the DSpark draft the seed deployment runs, a line both releases otherwise accept
K3_DRAFT = "Inferact/Kimi-K3-DSpark"
# (upgrade change the 0.33.0 line meets, the line, its env, the pinned 0.34.0 rule that refuses it)
BREAKING = [
    ("model-runner-v1-removed", BASE, {"VLLM_USE_V2_MODEL_RUNNER": "0"}, "vllm-model-runner-v1-removed"),
    ("speculative-disable-padded-drafter-batch-removed",
     BASE + [SC, json.dumps({"method": "dspark", "model": K3_DRAFT, "num_speculative_tokens": 7, "disable_padded_drafter_batch": True})], {},
     "vllm-speculative-removed-key"),
    ("speculative-use-heterogeneous-vocab-removed",
     BASE + [SC, json.dumps({"method": "dspark", "model": K3_DRAFT, "num_speculative_tokens": 7, "use_heterogeneous_vocab": False})], {},
     "vllm-speculative-removed-key"),
    ("speculative-parallel-drafting-other-methods",
     BASE + [SC, json.dumps({"method": "mtp", "num_speculative_tokens": 1, "parallel_drafting": True})], {},
     "vllm-parallel-drafting-method"),
    ("marlin-input-dtype-removed", BASE, {"VLLM_MARLIN_INPUT_DTYPE": "int8"}, "vllm-env-refused"),
]


@pytest.mark.parametrize("change,argv,env,rule", BREAKING, ids=[b[0] for b in BREAKING])
def test_upgrade_data_and_the_pinned_0_34_0_rules_agree(change, argv, env, rule):
    r = upgrade.check("vllm", "0.33.0", "0.34.0", argv, env)
    assert change in [x["id"] for x in r["refused"]]
    assert rule not in check_args("0.33.0", argv, env)          # 0.33.0 ran the line
    assert rule in check_args("0.34.0", argv, env)              # the pinned 0.34.0 refuses it
    rw = r["rewrite"]
    if rw is not None and rw["complete"]:                       # the mechanical rewrite passes 0.34.0's rules
        assert check_args("0.34.0", rw["argv"], rw["env"]) == set(), rw


def test_every_refusal_of_the_upgrade_data_is_a_rule_of_the_pinned_release_or_named_here():
    up = upgrade.find_upgrade("vllm", "0.33.0", "0.34.0")
    refused = {c.id for c in up.changes if c.kind == "refused"}
    # custom_class: the catalog's speculative methods (spec.speculative.method) never include it: a line with it is
    # unusable input for check-args on every release
    assert refused == {b[0] for b in BREAKING} | {"speculative-custom-class-removed"}


def upgrade_cli(*args: str):
    from gpustack_k3.cli.upgrade_cmd import upgrade_check

    return CliRunner().invoke(upgrade_check, ["--engine", "vllm", "--from", "0.33.0", "--to", "0.34.0", *args],
                              catch_exceptions=False)


def test_upgrade_check_is_also_judged_by_the_pinned_target_rules():
    res = upgrade_cli("--env", "VLLM_USE_V2_MODEL_RUNNER=0", "-o", "json", "--", *BASE)
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["ok"] is False
    t = doc["target_rules"]
    assert t["version"] == "0.34.0" and [f["rule"] for f in t["refused"]] == ["vllm-model-runner-v1-removed"]
    assert "@0.34.0" in t["refused"][0]["source"]
    assert t["rewrite_refused"] == [] and doc["rewrite"]["unset_env"] == ["VLLM_USE_V2_MODEL_RUNNER"]
    text = upgrade_cli("--env", "VLLM_USE_V2_MODEL_RUNNER=0", "--", *BASE)
    assert "refused by vllm 0.34.0's rules: vllm-model-runner-v1-removed" in text.stdout


def test_what_both_releases_refuse_is_not_blamed_on_the_upgrade():
    # 1M context on a KV cache sized at 30 % of the GPU: refused on 0.33.0 already
    line = ["vllm", "serve", "moonshotai/Kimi-K3", "--tensor-parallel-size", "8", "--trust-remote-code",
            "--gpu-memory-utilization", "0.3"]
    doc = json.loads(upgrade_cli("-o", "json", "--", *line).stdout)
    t = doc["target_rules"]
    assert t["refused"] == [] and t["already_refused"], t
    assert doc["ok"] is True
