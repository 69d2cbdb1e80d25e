"""The rules of gpustack_k3/core/rules/vllm_checks_mfix11.py (helper mfix11, vLLM 0.11.0): method eagle3 for a target
whose model type names none of llama/qwen/minicpm/gpt_oss is refused, a supported one is left; MTP
num_speculative_tokens above num_nextn_predict_layers and not a multiple of it is refused, a multiple or a count at
most the layers is left; -O compile_sizes with a string other than "cudagraph_capture_sizes" is refused, integers and
that name are left; a ModelOpt quant_algo other than FP8/NVFP4 is refused, another producer left; --dtype float16 for gemma2 (and the other listed types) is refused, bfloat16 is left. Each rule
runs on 0.11.0 only. tests/engine_oracle/test_mfix11_oracle.py has the release judge the same lines."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.vllm_checks_mfix11 import (bad_compile_sizes, eagle3_unsupported_target, mtp_n_predict,
                                                        mtp_tokens_refused)
from tests.core.test_vllm_checks import shape_config

E3 = "vllm-eagle3-target-model-type-011"
MTP = "vllm-mtp-spec-tokens-not-multiple-of-layers-011"
CS = "vllm-compile-sizes-unknown-name-011"
F16 = "vllm-float16-unsupported-model-type-011"
MO = "vllm-modelopt-unknown-quant-algo-011"
SW = "vllm-swap-space-above-host-ram-011"
SP = "vllm-prefix-caching-sliding-window-v0-011"
MFIX11_DIRECT = {E3, MTP, CS, F16, MO, SW, SP}   # wired in tests/core/test_registry.py and tests/core/test_rules.py


def spec(d: dict) -> list[str]:
    return ["--speculative-config", json.dumps(d)]


def variant(tmp: Path, shape: str, **fields) -> str:
    """A copy of the oracle's shape config.json with ``fields`` set (what an aimed line's ``config:`` writes)."""
    cfg = json.loads(Path(shape_config(shape)).read_text())
    cfg.update(fields)
    d = tmp / f"{shape}-{abs(hash(json.dumps(fields, sort_keys=True)))}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d / "config.json")


def product(release: str, argv: list[str], config: str, env: dict | None = None) -> dict:
    from tools.engine_oracle.product import check_args

    return check_args("vllm", release, {"argv": argv, "env": env or {}, "model": None, "model_config": config,
                                        "gpu_type": "b300", "gpus": 8})


MLA = ["/models/shape-mla-moe", "-tp", "8"]
DENSE = ["/models/shape-gqa-dense", "-tp", "8"]
EAGLE3 = spec({"method": "eagle3", "model": "/models/smollm2-hf", "num_speculative_tokens": 1,
               "draft_tensor_parallel_size": 1})


# (rule, refused line, its config: shape name or {shape: fields}, the flipped line, its config)
CASES = [
    (E3, MLA + EAGLE3, "shape-mla-moe", DENSE + EAGLE3, "shape-gqa-dense"),
    (MTP, MLA + spec({"method": "mtp", "num_speculative_tokens": 4}), {"shape-mla-moe": {"num_nextn_predict_layers": 3}},
     MLA + spec({"method": "mtp", "num_speculative_tokens": 6}), {"shape-mla-moe": {"num_nextn_predict_layers": 3}}),
    (MTP, MLA + spec({"method": "deepseek_mtp", "num_speculative_tokens": 3}),
     {"shape-mla-moe": {"num_nextn_predict_layers": 2}},
     MLA + spec({"method": "deepseek_mtp", "num_speculative_tokens": 2}), {"shape-mla-moe": {"num_nextn_predict_layers": 2}}),
    (CS, DENSE + ["--compilation-config", '{"compile_sizes": ["foo"]}'], "shape-gqa-dense",
     DENSE + ["--compilation-config", '{"compile_sizes": ["cudagraph_capture_sizes", 8]}'], "shape-gqa-dense"),
    (F16, DENSE + ["--dtype", "float16"], {"shape-gqa-dense": {"model_type": "gemma2"}},
     DENSE + ["--dtype", "bfloat16"], {"shape-gqa-dense": {"model_type": "gemma2"}}),
    (F16, DENSE + ["--dtype", "half"], {"shape-gqa-dense": {"model_type": "glm4"}},
     DENSE + ["--dtype", "half"], "shape-gqa-dense"),
    (MO, DENSE, {"shape-gqa-dense": {"quantization_config": {"producer": {"name": "modelopt"},
                                                              "quantization": {"quant_algo": "W4A8_AWQ"}}}},
     DENSE, {"shape-gqa-dense": {"quantization_config": {"producer": {"name": "other"},
                                                          "quantization": {"quant_algo": "W4A8_AWQ"}}}}),
    (SP, DENSE + ["--enable-prefix-caching"], {"shape-gqa-dense": {"sliding_window": 4096}},
     DENSE + ["--enable-prefix-caching", "--disable-sliding-window"], {"shape-gqa-dense": {"sliding_window": 4096}}),
    (SP, DENSE + ["--runner", "generate"], {"shape-gqa-dense": {"model_type": "mistral",
                                                                 "architectures": ["MistralForCausalLM"],
                                                                 "sliding_window": 4096}},
     DENSE + ["--runner", "generate", "--no-enable-prefix-caching"],
     {"shape-gqa-dense": {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "sliding_window": 4096}}),
]
ENV = {SP: {"VLLM_USE_V1": "0"}}   # the environment of a rule's lines (both)
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def config_of(tmp: Path, c) -> str:
    if isinstance(c, str):
        return shape_config(c)
    (shape, fields), = c.items()
    return variant(tmp, shape, **fields)


@pytest.mark.parametrize("rid,bad,bad_cfg,good,good_cfg", CASES, ids=IDS)
def test_the_rule_refuses_its_line_and_leaves_the_flip(tmp_path, rid, bad, bad_cfg, good, good_cfg):
    got = product("0.11.0", bad, config_of(tmp_path, bad_cfg), ENV.get(rid))
    assert got["verdict"] == "refuse" and rid in got["rules"], got
    assert rid not in product("0.11.0", good, config_of(tmp_path, good_cfg), ENV.get(rid))["rules"]


@pytest.mark.parametrize("rid,bad,bad_cfg,good,good_cfg", CASES, ids=IDS)
def test_the_rule_is_off_on_later_releases(tmp_path, rid, bad, bad_cfg, good, good_cfg):
    assert rid not in product("0.33.0", bad, config_of(tmp_path, bad_cfg), ENV.get(rid))["rules"]


def test_eagle3_target_is_a_substring_test():
    assert not eagle3_unsupported_target("qwen3_moe")      # "qwen" in it: supported
    assert not eagle3_unsupported_target("llama4_text")
    assert eagle3_unsupported_target("deepseek_v3")
    assert not eagle3_unsupported_target(None)              # no model type written: not judged


def test_mtp_n_predict_and_remainder():
    assert mtp_n_predict({"model_type": "deepseek_v3", "num_nextn_predict_layers": 3}) == 3
    assert mtp_n_predict({"architectures": ["Glm4MoeForCausalLM"], "num_nextn_predict_layers": 1}) == 1
    assert mtp_n_predict({"model_type": "llama", "num_nextn_predict_layers": 3}) is None
    assert mtp_tokens_refused(4, 3) and mtp_tokens_refused(5, 2)
    assert not mtp_tokens_refused(6, 3) and not mtp_tokens_refused(2, 3) and not mtp_tokens_refused(3, 1)
    assert not mtp_tokens_refused(4, None)


def test_modelopt_quant_algo():
    from gpustack_k3.core.rules.vllm_checks_mfix11 import modelopt_quant_algo

    mo = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "INT4_AWQ"}}
    assert modelopt_quant_algo({"quantization_config": mo}) == "INT4_AWQ"
    assert modelopt_quant_algo({"text_config": {"quantization_config": mo}}) == "INT4_AWQ"
    assert modelopt_quant_algo({"quantization_config": {**mo, "quantization": {"quant_algo": "NVFP4"}}}) is None
    assert modelopt_quant_algo({"quantization_config": {**mo, "producer": {"name": "x"}}}) is None
    assert modelopt_quant_algo({"compression_config": {}, "text_config": {"quantization_config": mo}}) is None


def warnings_of(release: str, argv: list[str]) -> set[str]:
    """The warning rules check-args reports for a line (its JSON output)."""
    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args as cmd

    res = CliRunner().invoke(cmd, ["--engine", "vllm", "--engine-version", release, "-o", "json", "--", *argv])
    return {f["rule"] for f in json.loads(res.output)["findings"] if f["severity"] == "warning"}


def test_swap_space_above_the_host_ram_warns_and_does_not_refuse():
    # 100000 GiB x TP 1 against the b300 catalog figure (1862.6 GiB): a warning, not a refusal (the node's RAM is
    # not on the line); 1000 GiB is under 70 % of it
    line = ["/models/smollm2-hf", "-tp", "1", "--swap-space"]
    assert SW in warnings_of("0.11.0", line + ["100000"])
    assert SW not in warnings_of("0.11.0", line + ["1000"])
    assert SW not in warnings_of("0.33.0", line + ["100000"])
    got = product("0.11.0", DENSE + ["--swap-space", "100000"], shape_config("shape-gqa-dense"))
    assert SW not in got["rules"], got
    from gpustack_k3.core.rules.vllm_checks_mfix11 import swap_gib

    assert swap_gib(100000, 8) == 800000.0 and swap_gib(4.5, 8) == 36.0 and swap_gib(None, 8) is None


def test_prefix_caching_sliding_window_needs_v0_and_a_kept_window(tmp_path):
    from gpustack_k3.core.model_config import arch_from_config
    from gpustack_k3.core.rules.vllm_checks_mfix11 import kept_sliding_window

    cfg = config_of(tmp_path, {"shape-gqa-dense": {"sliding_window": 4096}})
    assert SP not in product("0.11.0", DENSE + ["--enable-prefix-caching"], cfg)["rules"]        # V1 (default)
    assert SP not in product("0.11.0", DENSE + ["--enable-prefix-caching"], cfg, {"VLLM_USE_V1": "1"})["rules"]
    assert kept_sliding_window(arch_from_config({"model_type": "qwen2", "sliding_window": 4096}, "x")) is None
    assert kept_sliding_window(arch_from_config({"model_type": "mistral", "sliding_window": 4096,
                                                 "layer_types": ["sliding_attention", "full_attention"]}, "x")) is None
    assert kept_sliding_window(arch_from_config({"model_type": "mistral", "sliding_window": 4096}, "x")) == 4096


def test_bad_compile_sizes():
    assert bad_compile_sizes({"compile_sizes": ["foo", 8]}) == ["foo"]
    assert bad_compile_sizes({"compile_sizes": ["cudagraph_capture_sizes", 1, 2]}) == []
    assert bad_compile_sizes({"compile_sizes": None}) == [] and bad_compile_sizes(None) == []


def test_each_rule_cites_0_11_0_only():
    for rid in MFIX11_DIRECT:
        assert {k.split()[1] for k in RULES[rid].sources} == {"0.11.0"}, rid


def test_every_rule_of_the_module_has_a_case():
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.vllm_checks_mfix11"} \
        == MFIX11_DIRECT == {c[0] for c in CASES} | {SW}
