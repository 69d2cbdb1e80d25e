"""vLLM checks beyond the table's own examples: the Python rules of gpustack_k3/core/rules/vllm_checks.py (a JSON
option's keys) refuse their lines and pass the flipped ones, each only for the releases its sources name; the
table's vLLM entries (gpustack_k3/catalog/data/checks/vllm.yaml, whose examples tests/core/test_checks_table.py
runs) are switched on per release and read the model's config.json where they need it.
tests/engine_oracle/test_checks_vllm.py has each release's own code judge all these lines."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules import checks

SMOL = "/models/smollm2-hf"            # LlamaForCausalLM, text only (the catalog's smollm2-135m)
MOE = "/models/shape-mla-moe"           # DeepseekV3ForCausalLM (an oracle shape model: MLA, 256 routed experts)

# (rule id, release, refused line, its env, the line flipped, its env, catalog model); a line is the engine's argv
PY_CASES = [
    ("vllm-rope-scaling-needs-type", "0.11.0",
     [SMOL, "--rope-scaling", json.dumps({"factor": 2.0})], {},
     [SMOL, "--rope-scaling", json.dumps({"rope_type": "linear", "factor": 2.0})], {}, None),
    ("vllm-rope-scaling-needs-type", "0.11.0",          # the legacy key is copied into rope_type
     [SMOL, "--rope-scaling", json.dumps({"factor": 2.0})], {},
     [SMOL, "--rope-scaling", json.dumps({"type": "linear", "factor": 2.0})], {}, None),
    ("vllm-rope-scaling-type-conflict", "0.11.0",
     [SMOL, "--rope-scaling", json.dumps({"rope_type": "linear", "type": "dynamic", "factor": 2.0})], {},
     [SMOL, "--rope-scaling", json.dumps({"rope_type": "linear", "type": "linear", "factor": 2.0})], {}, None),
    ("vllm-pcp-dcp-span", "0.28.0", [MOE, "-tp", "2", "-pcp", "2", "-dcp", "3"], {},
     [MOE, "-tp", "2", "-pcp", "2", "-dcp", "2"], {}, None),
    ("vllm-pcp-dcp-span", "0.29.0", [MOE, "-tp", "2", "-pcp", "2", "-dcp", "3"], {},
     [MOE, "-tp", "2", "-pcp", "2", "-dcp", "2"], {}, None),
    ("vllm-pcp-dcp-span", "0.33.0", [MOE, "-tp", "2", "-pcp", "2", "-dcp", "3"], {},
     [MOE, "-tp", "2", "-pcp", "2", "-dcp", "2"], {}, None),
    ("vllm-pcp-dcp-span", "0.34.0", [MOE, "-tp", "2", "--prefill-context-parallel-size", "2", "-dcp", "3"], {},
     [MOE, "-tp", "2", "--prefill-context-parallel-size", "2", "-dcp", "2"], {}, None),
]
PROF = "--profiler-config"
EAGER = "--enforce-eager"   # Proton with CUDA graphs needs graph attribution (config/vllm.py:3279-3300@0.33.0)
for _rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
    PY_CASES += [
        ("vllm-profiler-config-invalid", _rel, [SMOL, PROF, json.dumps({"profiler": "proton"})], {},
         [SMOL, EAGER, PROF, json.dumps({"profiler": "proton", "proton_profiler_dir": "/tmp/proton"})], {}, None),
        ("vllm-profiler-config-invalid", _rel, [SMOL, PROF, json.dumps({"profiler": "torch"})], {},
         [SMOL, PROF, json.dumps({"profiler": "torch", "torch_profiler_dir": "/tmp/torch"})], {}, None),
        # the options of proton without it, listed in the validator's order
        ("vllm-profiler-config-invalid", _rel, [SMOL, PROF, json.dumps({"proton_data": "trace", "proton_mode": "x"})],
         {}, [SMOL, EAGER, PROF, json.dumps({"profiler": "proton", "proton_data": "trace", "proton_mode": "x",
                                      "proton_profiler_dir": "/tmp/p"})], {}, None),
        ("vllm-profiler-config-invalid", _rel,
         [SMOL, PROF, json.dumps({"profiler": "proton", "proton_profiler_dir": "/tmp/p",
                                  "proton_output_format": "chrome_trace"})], {},
         [SMOL, EAGER, PROF, json.dumps({"profiler": "proton", "proton_profiler_dir": "/tmp/p", "proton_data": "trace",
                                         "proton_output_format": "chrome_trace"})], {}, None),
    ]
for _rel in ("0.33.0", "0.34.0"):
    PY_CASES += [
        ("vllm-profiler-config-invalid", _rel,
         [SMOL, PROF, json.dumps({"profiler": "proton", "proton_profiler_dir": "/tmp/p", "proton_data": "trace",
                                  "proton_graph_attribution": True})], {},
         [SMOL, EAGER, PROF, json.dumps({"profiler": "proton", "proton_profiler_dir": "/tmp/p",
                                         "proton_graph_attribution": True})], {}, None),
        ("vllm-profiler-config-invalid", _rel, [SMOL, PROF, json.dumps({"torch_profiler_activities": ["CPU"]})], {},
         [SMOL, PROF, json.dumps({"profiler": "torch", "torch_profiler_dir": "/tmp/t",
                                  "torch_profiler_activities": ["CPU"]})], {}, None),
    ]
# --quantization: a name outside the release's methods on a checkpoint without quantization_config; a method other
# than the checkpoint's (Kimi-K3: compressed-tensors MXFP4 in its config.json, read as mxfp4; shape-mla-moe,
# DeepSeek-V3: fp8)
K3 = ["/models/Kimi-K3", "-tp", "8", "--trust-remote-code"]
for _rel in ("0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0"):
    PY_CASES += [("vllm-quantization-unknown", _rel, [SMOL, "--quantization", "none"], {},
                  [SMOL, "--quantization", "fp8"], {}, "smollm2-135m")]
    PY_CASES += [("vllm-quantization-mismatch", _rel, [MOE, "-tp", "8", "--quantization", "mxfp4"], {},
                  [MOE, "-tp", "8", "--quantization", "fp8"], {}, "shape-mla-moe")]
PY_CASES += [("vllm-quantization-mismatch", "0.11.0",   # GPT-OSS mxfp4: 0.11.0 has no override claiming it
              [MOE.replace("mla-moe", "gqa-yarn"), "-tp", "8", "--quantization", "x"], {},
              [MOE.replace("mla-moe", "gqa-yarn"), "-tp", "8", "--quantization", "mxfp4"], {}, "shape-gqa-yarn")]
for _rel in ("0.33.0", "0.34.0"):
    PY_CASES += [("vllm-quantization-mismatch", _rel, [*K3, "--quantization", "fp8"], {},
                  [*K3, "--quantization", "mxfp4"], {}, "kimi-k3")]
DSV41 = ["/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "-tp", "8", "--speculative-config"]
for _rel in ("0.33.0", "0.34.0"):   # one rule for both (0.34.0's -034 rule folded in)
    PY_CASES += [("vllm-spec-mtp-on-deepseek-v41", _rel,
                  [*DSV41, json.dumps({"method": "deepseek_mtp", "num_speculative_tokens": 1})], {},
                  [*DSV41, json.dumps({"method": "dspark", "num_speculative_tokens": 1})], {}, "deepseek-v4.1-flash")]
SPEC = "--speculative-config"
for _rel in ("0.11.0", "0.28.0", "0.29.0", "0.33.0"):
    PY_CASES += [("vllm-spec-ngram-lookup-range", _rel,
                  [SMOL, SPEC, json.dumps({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4,
                                           "prompt_lookup_max": 3})], {},
                  [SMOL, SPEC, json.dumps({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 3,
                                           "prompt_lookup_max": 3})], {}, None)]
PY_CASES += [("vllm-spec-ngram-lookup-range", "0.11.0",     # max defaults to min, 0 < 1
              [SMOL, SPEC, json.dumps({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 0})], {},
              [SMOL, SPEC, json.dumps({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 1})], {},
              None)]
CC = "--compilation-config"
for _rel in ("0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0"):
    PY_CASES += [("vllm-compilation-config-invalid", _rel, [SMOL, CC, json.dumps({"custom_ops": ["rms_norm"]})], {},
                  [SMOL, CC, json.dumps({"custom_ops": ["+rms_norm"]})], {}, None)]
for _rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
    PY_CASES += [
        ("vllm-compilation-config-invalid", _rel, [SMOL, CC, json.dumps({"custom_ops": ["+rms_norm", "-rms_norm"]})],
         {}, [SMOL, CC, json.dumps({"custom_ops": ["+rms_norm"]})], {}, None),
        ("vllm-compilation-config-invalid", _rel, [SMOL, CC, json.dumps({"mode": 3, "backend": "cudagraphs"})], {},
         [SMOL, CC, json.dumps({"mode": 3, "backend": "inductor"})], {}, None),
        ("vllm-compilation-config-invalid", _rel,
         [SMOL, CC, json.dumps({"cudagraph_mm_encoder": True, "encoder_cudagraph_max_vision_items_per_batch": -1})],
         {}, [SMOL, CC, json.dumps({"cudagraph_mm_encoder": False,
                                    "encoder_cudagraph_max_vision_items_per_batch": -1})], {}, None),
    ]
for _rel in ("0.33.0", "0.34.0"):
    PY_CASES += [("vllm-compilation-config-invalid", _rel,
                  [SMOL, CC, json.dumps({"decoder_replay_cudagraph_capture_sizes": [0, 8]})], {},
                  [SMOL, CC, json.dumps({"decoder_replay_cudagraph_capture_sizes": [8]})], {}, None)]
NUMA = ["--numa-bind", "--numa-bind-cpus"]   # tests/core/test_numa_bind_cpus.py holds more values
for _rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
    PY_CASES += [("vllm-numa-bind-cpus-syntax", _rel, [SMOL, *NUMA, "synth-numa-bind-cpus"], {},
                  [SMOL, *NUMA, "0,2,4-7"], {}, None)]
PY_IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(PY_CASES)]
PYTHON_RULES = ("vllm-rope-scaling-needs-type", "vllm-rope-scaling-type-conflict", "vllm-pcp-dcp-span",
                "vllm-profiler-config-invalid", "vllm-quantization-unknown", "vllm-quantization-mismatch",
                "vllm-spec-mtp-on-deepseek-v41", "vllm-spec-ngram-lookup-range", "vllm-compilation-config-invalid",
                "vllm-numa-bind-cpus-syntax")
# the rules these cases fire (tests/core/test_registry.py: every rule has a firing case)
VLLM_CHECKS_DIRECT = set(PYTHON_RULES)


def product(release: str, argv: list[str], env: dict, model: str | None = None) -> dict:
    """check-args in-process, as the differential runs it (tools/engine_oracle/product.py)."""
    from tools.engine_oracle.product import check_args

    line = {"argv": argv, "env": env, "model": model, "gpu_type": "b300", "gpus": 8}
    if model is not None and model.startswith("shape-"):   # a model the catalog does not know: its config.json
        line.update(model=None, model_config=shape_config(model))
    return check_args("vllm", release, line)


def refused_by_and_not_on_the_flip(rid: str, release: str, bad: list[str], bad_env: dict, good: list[str],
                                   good_env: dict, model: str | None) -> None:
    """The product refuses ``bad`` with rule ``rid`` and leaves ``good`` (the same line with the condition flipped)
    to other rules: the shared check of the helper rounds' rule modules (tests/core/test_*_rules.py)."""
    got = product(release, bad, bad_env, model)
    assert got["verdict"] == "refuse" and rid in got["rules"], got
    assert rid not in product(release, good, good_env, model)["rules"]


def shape_config(name: str) -> str:
    """The config.json the oracle writes for a model shape (gpustack_k3/oracle/models.py SHAPES)."""
    from gpustack_k3.oracle.models import model_root, write_models

    path = model_root() / name / "config.json"
    if not path.is_file():
        write_models()
    if not path.is_file():
        pytest.skip(f"no {name} config.json: aiconfigurator-core is not installed (.ci/setup_predict.sh)")
    return str(path)


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", PY_CASES, ids=PY_IDS)
def test_the_rule_refuses_its_line_and_passes_the_flip(rid, release, bad, bad_env, good, good_env, model):
    refused = product(release, bad, bad_env, model)
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    passed = product(release, good, good_env, model)
    assert passed["verdict"] == "pass", passed


def test_every_python_rule_has_a_case_for_each_release_it_names():
    named = {(rid, key.split(" ", 1)[1]) for rid in PYTHON_RULES for key in RULES[rid].sources}
    assert named == {(c[0], c[1]) for c in PY_CASES}
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.vllm_checks"} == set(PYTHON_RULES)


def test_a_python_rule_is_off_for_a_release_it_does_not_name():
    # 0.33.0 has no --rope-scaling (its parser refuses it: argv-refused); the rule applies to 0.11.0 alone
    from gpustack_k3.catalog import load_catalog

    assert RULES["vllm-rope-scaling-needs-type"].versions(load_catalog()) == [("vllm", "0.11.0")]
    res = product("0.33.0", [SMOL, "--rope-scaling", json.dumps({"factor": 2.0})], {})
    assert "vllm-rope-scaling-needs-type" not in res["rules"] and "argv-refused" in res["rules"], res


def test_an_empty_rope_scaling_is_no_override():
    assert product("0.11.0", [SMOL, "--rope-scaling", "{}"], {})["verdict"] == "pass"


MM = [SMOL, "--default-mm-loras", json.dumps({"image": "/loras/vision"})]


def test_the_text_only_model_entry_reads_the_models_config_json():
    eid = "vllm-default-mm-loras-text-only-model"
    assert checks.TABLE[eid].reads_model
    # with SmolLM2's config.json (LlamaForCausalLM): refused; with none for the line's model: not run
    assert eid in product("0.33.0", MM, {}, "smollm2-135m")["rules"]
    assert eid not in product("0.33.0", MM, {})["rules"]


def test_the_text_only_model_entry_leaves_a_multimodal_architecture_alone(tmp_path):
    from tools.engine_oracle.product import check_args

    cfg = json.loads(open(product_config("smollm2-135m")).read())
    cfg.update(architectures=["Qwen2VLForConditionalGeneration"], model_type="qwen2_vl")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    res = check_args("vllm", "0.33.0", {"argv": MM, "env": {}, "model": None, "gpu_type": "b300", "gpus": 8,
                                        "model_config": str(path)})
    assert "vllm-default-mm-loras-text-only-model" not in res["rules"], res


def product_config(model: str) -> str:
    from tools.engine_oracle.product import model_config

    return model_config(model)


@pytest.mark.parametrize("line,on,off", [
    # TP 2 on 0.11.0 may run on Ray (a world larger than the node): the 0.11.0 entry leaves it undecided; the
    # 0.28-and-later entry refuses it (mp), and is not switched on for 0.11.0
    ([SMOL, "--ray-workers-use-nsight", "-tp", "2"], {"0.33.0": "vllm-nsight-needs-ray"},
     {"0.11.0": ("vllm-nsight-needs-ray", "vllm-nsight-needs-ray-single-rank")}),
    # 0.34.0 refuses the NUMA lists only with an explicit --no-numa-bind (they imply --numa-bind)
    ([SMOL, "--numa-bind-nodes", "0"], {"0.33.0": "vllm-numa-lists-need-numa-bind"},
     {"0.34.0": ("vllm-numa-lists-need-numa-bind", "vllm-numa-lists-with-numa-bind-off")}),
])
def test_entries_are_switched_on_per_release(line, on, off):
    for release, eid in on.items():
        assert eid in product(release, line, {})["rules"]
    for release, eids in off.items():
        assert not set(eids) & set(product(release, line, {})["rules"])


@pytest.mark.parametrize("release", ["0.28.0", "0.29.0", "0.33.0", "0.34.0"])
def test_dcp_may_span_tp_times_pcp(release):
    # TP 2 x PCP 2 = DCP 4: the releases accept it (tests/engine_oracle/test_checks_vllm.py judges the line)
    assert product(release, PCP_TP_TIMES, {})["verdict"] == "pass"


PCP_TP_TIMES = [MOE, "-tp", "2", "-pcp", "2", "-dcp", "4"]


def test_quantization_mismatch_leaves_checkpoints_an_override_claims_to_the_release():
    # GPT-OSS mxfp4 (shape-gqa-yarn): Mxfp4Config.override_quantization_method claims it as gpt_oss_mxfp4 whatever
    # --quantization says (model_executor/layers/quantization/mxfp4.py:130-147@0.34.0)
    for rel in ("0.28.0", "0.33.0", "0.34.0"):
        res = product(rel, [MOE.replace("mla-moe", "gqa-yarn"), "--quantization", "fp8"], {}, "shape-gqa-yarn")
        assert "vllm-quantization-mismatch" not in res["rules"], res


def _catalog_line(release, *argv):
    from gpustack_k3.cli.core_cmds import check_args
    from tools.engine_oracle.product import _invoke

    return _invoke(check_args, ["--engine", "vllm", "--engine-version", release, "-o", "json", "--", *argv])


def test_quantization_is_judged_on_the_catalog_block_as_the_release_resolves_it():
    """The catalog's architecture block is the engine oracle's config.json (gpustack_k3/oracle/models.py): without a
    config.json it decides. Kimi-K3's public compressed-tensors mxfp4-pack-quantized is read as mxfp4
    (model_executor/models/config.py:492-522@0.33.0); DeepSeek-V4.1's fp8 is claimed as deepseek_v4_fp8 whatever
    --quantization says (models/deepseek_v41/quant_config.py:164-192@0.33.0). The engine oracle's verdicts on these
    lines: vLLM 0.33.0 refuses K3 with fp8 / compressed-tensors, accepts mxfp4; accepts V4.1 with fp8 and mxfp4."""
    for rel in ("0.33.0", "0.34.0"):
        for q, refused in (("fp8", True), ("compressed-tensors", True), ("mxfp4", False)):
            res = _catalog_line(rel, "/models/Kimi-K3", "-tp", "8", "--trust-remote-code", "--quantization", q)
            assert ("vllm-quantization-mismatch" in res["rules"]) is refused, (rel, q, res)
            with_cfg = product(rel, [*K3, "--quantization", q], {}, "kimi-k3")   # the oracle's config.json given
            assert ("vllm-quantization-mismatch" in with_cfg["rules"]) is refused, (rel, q, with_cfg)
        for q in ("fp8", "mxfp4"):
            res = _catalog_line(rel, "/models/DeepSeek-V4.1-Flash", "-tp", "8", "--trust-remote-code", "--quantization", q)
            assert "vllm-quantization-mismatch" not in res["rules"], (rel, q, res)


def test_dtype_is_judged_against_the_method_the_release_resolves():
    # vLLM 0.33.0 (the engine oracle): Kimi-K3 float16 refused (mxfp4: bfloat16 only); DeepSeek-V4.1 float32 refused,
    # float16 accepted (deepseek_v4_fp8 inherits Fp8Config's bfloat16/half: quantization/fp8.py:142-143@0.33.0)
    for argv, refused in ((["/models/Kimi-K3", "--trust-remote-code", "--dtype", "float16"], True),
                          (["/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "--dtype", "float32"], True),
                          (["/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "--dtype", "float16"], False)):
        res = _catalog_line("0.33.0", *argv, "-tp", "8")
        assert ("dtype-vs-quantization" in res["rules"]) is refused, (argv, res)
