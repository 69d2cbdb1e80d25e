"""The SGLang rules of gpustack_k3/core/rules/sglang_checks_smiss.py (refusals the checks table cannot express): each
case is a command line the release refuses at the rule's cited source and the nearest line it accepts; here the
product's side (check-args refuses the first with the rule, passes the second), in tests/engine_oracle/
test_checks_sglang_smiss.py the release's own verdict on the same lines."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES

KIMI = ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "8"]
KIMI_DSPARK = KIMI + ["--speculative-algorithm", "DSPARK", "--speculative-draft-model-path",
                      "/models/sglang-Kimi-K3-DSpark", "--speculative-dspark-block-size", "7"]
DSV41_DSPARK = ["--model-path", "/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "--tp-size", "2", "--ep-size",
                "2", "--attn-dp-size", "2", "--enable-dp-lm-head", "--speculative-algorithm", "DSPARK",
                "--speculative-draft-model-path", "/models/DeepSeek-V4.1-Flash-DSpark", "--speculative-dspark-block-size",
                "5"]
LORA = ["--enable-lora", "--max-lora-rank", "16", "--lora-target-modules", "all", "--enable-lora-overlap-loading"]

# (rule, release, refused line, accepted line)
SMISS_CASES = [
    ("sglang-dspark-device", "0.5.23", KIMI_DSPARK + ["--device", "auto"], KIMI_DSPARK),
    ("sglang-dspark-device", "0.5.23", DSV41_DSPARK + ["--device", "1"], DSV41_DSPARK + ["--device", "cuda"]),
    ("sglang-dspark-device", "0.5.22", KIMI_DSPARK + ["--device", "auto"], KIMI_DSPARK + ["--device", "cuda"]),
    ("sglang-lora-overlap-loading-max-loaded-loras", "0.5.23", KIMI + LORA + ["--max-loaded-loras", "17"],
     KIMI + LORA + ["--max-loaded-loras", "16"]),
    ("sglang-lora-overlap-loading-max-loaded-loras", "0.5.22", KIMI + LORA + ["--max-loaded-loras", "9", "--max-loras-per-batch", "4"],
     KIMI + LORA + ["--max-loaded-loras", "8", "--max-loras-per-batch", "4"]),
    ("sglang-tp-pp-divisible-by-nnodes", "0.5.23", KIMI[:-1] + ["4", "--pp-size", "2", "--nnodes", "3"],
     KIMI[:-1] + ["4", "--pp-size", "2", "--nnodes", "2"]),
    ("sglang-tp-pp-divisible-by-nnodes", "0.5.22", KIMI[:-1] + ["4", "--pp-size", "2", "--nnodes", "3"],
     KIMI[:-1] + ["4", "--pp-size", "2", "--nnodes", "2"]),
]
SMISS_DIRECT = {c[0] for c in SMISS_CASES}
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(SMISS_CASES)]


def product(release: str, argv: list[str]) -> dict:
    """check-args in-process, as the differential runs it (tools/engine_oracle/product.py)."""
    from tools.engine_oracle.product import check_args

    return check_args("sglang", release, {"argv": argv, "env": {}, "model": None, "gpu_type": "b300", "gpus": 8})


def test_every_rule_of_the_module_is_registered_and_has_a_case():
    # the package registers the module (imported by gpustack_k3/core/rules/sglang.py): not imported here
    mine = {rid for rid, r in RULES.items() if r.check.__module__ == "gpustack_k3.core.rules.sglang_checks_smiss"}
    assert mine == SMISS_DIRECT


def test_each_rule_names_its_releases():
    for rid in SMISS_DIRECT:
        assert {k.split(" ", 1)[1] for k in RULES[rid].sources} == {c[1] for c in SMISS_CASES if c[0] == rid}


@pytest.mark.parametrize("rid,release,bad,good", SMISS_CASES, ids=IDS)
def test_the_rule_refuses_the_line_and_passes_the_nearest(rid, release, bad, good):
    mine = product(release, bad)
    assert mine["verdict"] == "refuse" and rid in mine["rules"], mine
    assert product(release, good)["verdict"] == "pass", product(release, good)
