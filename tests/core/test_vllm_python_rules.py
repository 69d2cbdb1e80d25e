"""The vLLM Python rules of gpustack_k3/core/rules/vllm_checks_vmiss5.py (dual batch overlap and the shm object size
with a multimodal model, routed experts on a dense model, 0.11.0's sliding window with RoPE scaling, histogram
buckets, FP8 scale paths, the reasoning effort map), vllm_checks_vmiss6.py (--mm-tensor-ipc torch_shm across ranks
with a multimodal model, --device-ids values, the MoonEP all2all backend's conditions, 0.11.0's microbatching
all2all assertion) and vllm_checks_vmiss7.py: each refuses its line and passes the line flipped, only for the
releases its sources name; one set of tests over the modules' case lists. Also how check-args reads a vLLM
--speculative-config the spec cannot hold (core/flags.py) and the list values of vllm-config-field-bounds.
tests/engine_oracle/test_vllm_python_rules_oracle.py has each release judge the same lines."""
from __future__ import annotations

import os

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.envs import PARSERS
from gpustack_k3.core.rules.vllm_checks_vmiss6 import device_ids_refusal
from tests.core.test_vllm_checks import product, shape_config

K3 = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8"]            # KimiK3ForConditionalGeneration: multimodal
DS = ["/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "-tp", "8"]  # DeepseekV41ForCausalLM, fp8 (deepseek_v4_fp8)
SMOL = "/models/smollm2-hf"
DENSE = ["/models/shape-gqa-dense", "-tp", "8"]    # Llama 3.1 shape: no experts, rope_type llama3, bfloat16
YARN = ["/models/shape-gqa-yarn", "-tp", "8"]      # GPT-OSS shape: rope_type yarn
MOE = ["/models/shape-mla-moe", "-tp", "8"]        # DeepSeek-V3 shape: 256 routed experts
V2 = {"VLLM_USE_V2_MODEL_RUNNER": "1"}
SHM = "--mm-shm-cache-max-object-size-mb"
MOONEP = ["--all2all-backend", "moonep"]
IPC = ["--mm-tensor-ipc", "torch_shm"]

# ================================================================ core/rules/vllm_checks_vmiss5.py
# (rule id, release, refused line, its env, the line flipped, its env, catalog model)
VMISS5_CASES = [
    ("vllm-dbo-multimodal-model", "0.34.0", K3 + ["--enable-dbo"], {}, K3, {}, None),
    ("vllm-dbo-multimodal-model", "0.34.0", DS + ["--ubatch-size", "2"], {}, DS, {}, None),
    ("vllm-dbo-multimodal-model", "0.33.0", K3 + ["--enable-dbo"], V2, K3, V2, None),
    ("vllm-routed-experts-dense-model", "0.33.0", DENSE + ["--enable-return-routed-experts"], {}, DENSE, {},
     "shape-gqa-dense"),
    ("vllm-routed-experts-dense-model", "0.34.0", DENSE + ["--enable-return-routed-experts"], {}, DENSE, {},
     "shape-gqa-dense"),
    ("vllm-disable-sliding-window-rope-scaling", "0.11.0", YARN + ["--disable-sliding-window"], {}, YARN, {},
     "shape-gqa-yarn"),
    ("vllm-mm-shm-object-size-needs-shm-cache", "0.34.0", DS + [SHM, "64"], {},
     DS + [SHM, "64", "--mm-processor-cache-type", "shm"], {}, None),
]
for _rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
    VMISS5_CASES.append(("vllm-mm-shm-object-size-needs-shm-cache", _rel, K3 + [SHM, "64"], {},
                  K3 + [SHM, "64", "--mm-processor-cache-type", "shm"], {}, "kimi-k3"))
# vfr6: --custom-histogram-buckets (ObservabilityConfig's validators), one line per refusal of the release
HIST = "--custom-histogram-buckets"
for _rel in ("0.33.0", "0.34.0"):
    for _bad in ('{"synth": [1.0]}', '{"request_latency": []}', '{"request_latency": [0, 1]}',
                 '{"request_latency": [1.0, 0.5]}', '{"iteration_tokens": [1, true]}'):
        VMISS5_CASES.append(("vllm-custom-histogram-buckets-invalid", _rel, [SMOL, HIST, _bad], {},
                      [SMOL, HIST, '{"request_latency": [0.5, 1.0], "iteration_tokens": [1, 8]}'], {}, None))
# vfr6: MultiModalConfig's FP8 scale paths (a multimodal model)
FP8_LOAD, FP8_SAVE = ["--mm-encoder-fp8-scale-path", "/tmp/vfr6-scales.json"], ["--mm-encoder-fp8-scale-save-path",
                                                                                 "/tmp/vfr6-scales-out.json"]
for _rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
    VMISS5_CASES.append(("vllm-mm-encoder-fp8-scale-paths", _rel, K3 + FP8_LOAD, {}, K3, {}, "kimi-k3"))
    VMISS5_CASES.append(("vllm-mm-encoder-fp8-scale-paths", _rel, K3 + ["--mm-encoder-attn-dtype", "fp8"] + FP8_LOAD + FP8_SAVE,
                  {}, K3, {}, "kimi-k3"))
# vfr6: --reasoning-effort-map (validate_reasoning_effort_map)
for _rel in ("0.33.0", "0.34.0"):
    for _bad in ('{"bogus": 1}', '{"bogus": "x"}', '["high"]'):
        VMISS5_CASES.append(("vllm-reasoning-effort-map-invalid", _rel, [SMOL, "--reasoning-effort-map", _bad], {},
                      [SMOL, "--reasoning-effort-map", '{"high": "think hard", "none": "no"}'], {}, None))
# lines a rule must not refuse (release, line, env, catalog model, the rule)
VMISS5_NOT_REFUSED = [
    # 0.33.0 without VLLM_USE_V2_MODEL_RUNNER=1 picks Model Runner V1 for DBO (config/vllm.py:3231-3232@0.33.0)
    ("0.33.0", K3 + ["--enable-dbo"], {}, None, "vllm-dbo-multimodal-model"),
    ("0.34.0", [SMOL, "--ubatch-size", "1"], {}, None, "vllm-dbo-multimodal-model"),
    # a text-only model never builds MultiModalConfig
    ("0.34.0", [SMOL, SHM, "64"], {}, None, "vllm-mm-shm-object-size-needs-shm-cache"),
    ("0.34.0", MOE + ["--enable-return-routed-experts", "--enable-prefix-caching"], {}, "shape-mla-moe",
     "vllm-routed-experts-dense-model"),
    # rope_type llama3 keeps the sliding window switch
    ("0.11.0", DENSE + ["--disable-sliding-window"], {}, "shape-gqa-dense", "vllm-disable-sliding-window-rope-scaling"),
    # the rules are switched on for the releases their sources name only
    ("0.29.0", DENSE + ["--enable-return-routed-experts"], {}, "shape-gqa-dense", "vllm-routed-experts-dense-model"),
    ("0.33.0", YARN + ["--disable-sliding-window"], {}, "shape-gqa-yarn", "vllm-disable-sliding-window-rope-scaling"),
    # a text-only model never builds MultiModalConfig
    ("0.34.0", [SMOL] + FP8_LOAD, {}, None, "vllm-mm-encoder-fp8-scale-paths"),
    # a bound pydantic must coerce (a string) is left to the release
    ("0.34.0", [SMOL, "--custom-histogram-buckets", '{"request_latency": ["0.5", "1"]}'], {}, None,
     "vllm-custom-histogram-buckets-invalid"),
]


# ================================================================ core/rules/vllm_checks_vmiss6.py
# (rule id, release, refused line, its env, the line flipped, its env, catalog model)
VMISS6_CASES = []
for _rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
    VMISS6_CASES.append(("vllm-mm-tensor-ipc-torch-shm-parallel", _rel, K3 + IPC, {}, K3, {}, "kimi-k3"))
    for _bad in ("auto", "0,0", "0,GPU-0b1c2d3e-0000-0000-0000-000000000000"):
        VMISS6_CASES.append(("vllm-device-ids-invalid", _rel, [SMOL, "--device-ids", _bad], {},
                      [SMOL, "--device-ids", "0,1"], {}, None))
for _rel in ("0.33.0", "0.34.0"):
    VMISS6_CASES += [
        ("vllm-moonep-all2all-conditions", _rel, DS + ["--enable-expert-parallel"] + MOONEP, {}, DS, {}, None),
        ("vllm-moonep-all2all-conditions", _rel, DENSE + MOONEP + ["--quantization", "fp8"], {}, DENSE + MOONEP, {},
         "shape-gqa-dense"),
        ("vllm-moonep-all2all-conditions", _rel, DENSE + MOONEP + ["--dtype", "half"], {},
         DENSE + MOONEP + ["--dtype", "bfloat16"], {}, "shape-gqa-dense"),
        ("vllm-moonep-all2all-conditions", _rel, DENSE + MOONEP + ["--expert-placement-strategy", "round_robin"], {},
         DENSE + MOONEP, {}, "shape-gqa-dense"),
    ]
VMISS6_CASES.append(("vllm-dbo-needs-deepep-all2all-011", "0.11.0", YARN + ["--enable-dbo"], {},
              YARN + ["--enable-dbo"], {"VLLM_ALL2ALL_BACKEND": "deepep_low_latency"}, "shape-gqa-yarn"))
VMISS6_CASES.append(("vllm-dbo-needs-deepep-all2all-011", "0.11.0", YARN + ["--enable-dbo"], {"VLLM_ALL2ALL_BACKEND": "naive"},
              YARN, {"VLLM_ALL2ALL_BACKEND": "naive"}, "shape-gqa-yarn"))
# lines a rule must not refuse (release, line, env, catalog model, the rule); the engine oracle judges them too
VMISS6_NOT_REFUSED = [
    # one rank: torch_shm is fine (the multimodal model on one GPU)
    ("0.34.0", ["/models/Kimi-K3", "--trust-remote-code", "-tp", "1"] + IPC, {}, "kimi-k3",
     "vllm-mm-tensor-ipc-torch-shm-parallel"),
    # a text-only model never builds MultiModalConfig
    ("0.34.0", [SMOL, "-pp", "2"] + IPC, {}, None, "vllm-mm-tensor-ipc-torch-shm-parallel"),
    # int() reads a sign: '-1' is not all digits, stays a string and maps to -1
    ("0.34.0", [SMOL, "--device-ids", "-1"], {}, None, "vllm-device-ids-invalid"),
    ("0.33.0", [SMOL, "--device-ids", "3, 1"], {}, None, "vllm-device-ids-invalid"),
    # moonep on an unquantized BF16 model
    ("0.34.0", DENSE + MOONEP + ["--dtype", "bfloat16"], {}, "shape-gqa-dense", "vllm-moonep-all2all-conditions"),
    # the rules are switched on for the releases their sources name only
    ("0.11.0", [SMOL, "--enable-lora", "--lora-dtype", "auto"], {}, None, "vllm-device-ids-invalid"),
    # (0.34.0 reads --all2all-backend, not the variable: vllm-ubatching-needs-ep-all2all of the checks table)
    ("0.34.0", YARN + ["--enable-dbo", "--all2all-backend", "deepep_low_latency"],
     {"VLLM_ALL2ALL_BACKEND": "allgather_reducescatter"}, "shape-gqa-yarn", "vllm-dbo-needs-deepep-all2all-011"),
    ("0.11.0", YARN + ["--enable-dbo"], {"VLLM_ALL2ALL_BACKEND": "deepep_high_throughput"}, "shape-gqa-yarn",
     "vllm-dbo-needs-deepep-all2all-011"),
    # env_with_choices is case-sensitive: another spelling is refused by envs.py (not as microbatching's assertion)
    ("0.11.0", YARN + ["--enable-dbo"], {"VLLM_ALL2ALL_BACKEND": "DeepEP_Low_Latency"}, "shape-gqa-yarn",
     "vllm-dbo-needs-deepep-all2all-011"),
]


# ================================================================ core/rules/vllm_checks_vmiss7.py
def _local_checkpoint(name: str) -> str:
    """A local model directory both sides read, made once per test process: the oracle's own files of catalog model
    ``name`` (config.json and the tokenizer double, no params.json; gpustack_k3/oracle/models.py) and an empty weights
    file, so the oracle takes it for a checkpoint, not its config-only stand-in (a refusal over a file a stand-in
    lacks is not decided there). The product reads its config.json (cli/model_source.py), the release its files."""
    import atexit
    import shutil
    import tempfile

    from gpustack_k3.oracle.models import model_root, write_models

    src = model_root() / name
    if not (src / "config.json").is_file():
        write_models()
    parent = tempfile.mkdtemp(prefix="vmiss7-")
    atexit.register(shutil.rmtree, parent, True)
    d = os.path.join(parent, name)
    shutil.copytree(src, d)
    open(os.path.join(d, "pytorch_model.bin"), "wb").close()
    return d


LOCAL_SMOL = _local_checkpoint("smollm2-135m")
MISTRAL = ["--config-format", "mistral"]
VMISS7_CASES = [("vllm-config-format-mistral-needs-params-json", _rel, [LOCAL_SMOL] + MISTRAL, {},
                 [LOCAL_SMOL, "--config-format", "hf"], {}, None)
                for _rel in ("0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0")]
# a model path the product does not read (mounted in the pod, judged from a --model-config FILE): params.json is an
# unknown term, a warning (the oracle's stand-in directories have no params.json, nor has a real Llama or GPT-OSS checkpoint)
VMISS7_WARNS = [("vllm-config-format-mistral-params-json-unknown", _rel, line, {}, model)
                for _rel in ("0.11.0", "0.34.0")
                for line, model in ((["/models/shape-hybrid", "-tp", "8"] + MISTRAL, "shape-hybrid"),
                                    (YARN + MISTRAL, "shape-gqa-yarn"), ([SMOL] + MISTRAL, None))]
VMISS7_NOT_REFUSED: list = []   # a local checkpoint with params.json: test_a_local_mistral_checkpoint_with_params_json_passes

# ================================================================ the modules' lines, one set of tests
# module -> (its cases, the lines its rules leave, whether a rule's sources are exactly the releases of its cases,
# its warning rules' lines)
MODULES = {"gpustack_k3.core.rules.vllm_checks_vmiss5": (VMISS5_CASES, VMISS5_NOT_REFUSED, False, []),
           "gpustack_k3.core.rules.vllm_checks_vmiss6": (VMISS6_CASES, VMISS6_NOT_REFUSED, True, []),
           "gpustack_k3.core.rules.vllm_checks_vmiss7": (VMISS7_CASES, VMISS7_NOT_REFUSED, True, VMISS7_WARNS)}
CASES = [c for cases, _, _, _ in MODULES.values() for c in cases]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]
NOT_REFUSED = [n for _, leaves, _, _ in MODULES.values() for n in leaves]
WARNS = [w for _, _, _, warns in MODULES.values() for w in warns]

# the rules of each module with a firing case above (tests/core/test_registry.py test_every_rule_has_a_firing_case
# and tests/core/test_rules.py count them)
VMISS5_DIRECT = {c[0] for c in VMISS5_CASES}
VMISS6_DIRECT = {c[0] for c in VMISS6_CASES}
VMISS7_DIRECT = {c[0] for c in VMISS7_CASES} | {w[0] for w in VMISS7_WARNS}


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_rule_refuses_its_line_and_passes_the_flip(rid, release, bad, bad_env, good, good_env, model):
    refused = product(release, bad, bad_env, model)
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    flipped = product(release, good, good_env, model)
    assert rid not in flipped["rules"], flipped


@pytest.mark.parametrize("release,line,env,model,rid", NOT_REFUSED)
def test_the_rule_leaves_these_lines(release, line, env, model, rid):
    assert rid not in product(release, line, env, model)["rules"]


@pytest.mark.parametrize("rid,release,line,env,model", WARNS)
def test_the_warning_rule_warns_and_passes(rid, release, line, env, model):
    out = product(release, line, env, model)
    assert out["verdict"] == "pass", out
    assert rid in warning_rules(release, line, env, model), out


def warning_rules(release: str, line: list[str], env: dict, model: str | None) -> set[str]:
    """The warning findings' rule ids of check-args on the line (tests/core/test_vllm_checks.py product's inputs)."""
    import json

    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args
    from tools.engine_oracle.product import _common

    cfg = shape_config(model) if model is not None and model.startswith("shape-") else None
    args = _common("vllm", release, None if cfg else model, "b300", cfg) + ["--gpus", "8"]
    for k, v in sorted(env.items()):
        args += ["--env", f"{k}={v}"]
    res = CliRunner().invoke(check_args, [*args, "--", *line])
    return {f["rule"] for f in json.loads(res.stdout).get("findings", []) if f["severity"] == "warning"}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_rule_cites_every_release_it_runs_on(module):
    cases, _, exact, _ = MODULES[module]
    for rid in {c[0] for c in cases}:
        releases = {c[1] for c in cases if c[0] == rid}
        cites = {k.split()[1] for k in RULES[rid].sources}
        assert (cites == releases) if exact else (cites >= releases), rid


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_rule_of_the_module_has_a_case(module):
    cases, _, _, warns = MODULES[module]
    assert {r.id for r in RULES.values() if r.check.__module__ == module} == {c[0] for c in [*cases, *warns]}


def test_a_local_mistral_checkpoint_with_params_json_passes(tmp_path):
    # get_hf_file_to_dict finds the directory's params.json (transformers_utils/repo_utils.py:513-520@0.34.0)
    import shutil

    d = tmp_path / "mistral"
    shutil.copytree(LOCAL_SMOL, d)
    (d / "params.json").write_text('{"dim": 576, "n_layers": 30, "head_dim": 64, "hidden_dim": 1536, "n_heads": 9, '
                                   '"n_kv_heads": 3, "norm_eps": 1e-05, "vocab_size": 49152}')
    for release in ("0.11.0", "0.34.0"):
        out = product(release, [str(d)] + MISTRAL, {})
        assert out["verdict"] == "pass", out
        assert not {"vllm-config-format-mistral-needs-params-json", "vllm-config-format-mistral-params-json-unknown"} \
            & warning_rules(release, [str(d)] + MISTRAL, {}, None)


# ---------------------------------------------------------------- vllm-spec-mtp-on-deepseek-v41

def test_the_mtp_on_v41_rule_of_each_release():
    line = DS + ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 5}']
    assert product("0.33.0", line, {})["rules"] == ["vllm-spec-mtp-on-deepseek-v41"]
    assert product("0.34.0", line, {})["rules"] == ["vllm-spec-mtp-on-deepseek-v41"]   # one rule, both releases



# ---------------------------------------------------------------- vllm-device-ids-invalid

@pytest.mark.parametrize("raw,problem", [
    ("auto", "Non-integer device ID 'auto'"),
    ("", "Non-integer device ID ''"),
    ("1,1", "must not contain duplicates"),
    ("0,GPU-x", "must not mix integer IDs and UUIDs"),
    ("GPU-x,auto", None),    # the first UUID is NVML's to answer on the node (it may refuse it first)
    ("GPU-x,MIG-y", None),
    ("0,1,2,3", None),
    ("+2,-1", None),         # int() takes a sign
])
def test_device_ids_as_the_release_reads_them(raw, problem):
    got = device_ids_refusal(raw)
    assert (got is None) if problem is None else (got is not None and problem in got), got


def test_a_gpu_uuid_is_left_to_the_node():
    # the node's NVML maps a GPU UUID (platforms/cuda.py:795-800@0.34.0); the engine oracle has no NVML
    assert "vllm-device-ids-invalid" not in product("0.34.0", [SMOL, "--device-ids", "GPU-0b1c2d3e"], {})["rules"]


def test_0_11_0_reads_vllm_all2all_backend_as_written():
    # env_with_choices is case-sensitive (envs.py:236-271@0.11.0): 'DeepEP_Low_Latency' is not a DeepEP backend to
    # the release (it refuses it as a choice), and the catalog's parser keeps the value as written
    assert PARSERS["vllm_str"].read(" deepep_low_latency") == " deepep_low_latency"
    line = YARN + ["--enable-dbo"]
    ok = product("0.11.0", line, {"VLLM_ALL2ALL_BACKEND": "deepep_low_latency"}, "shape-gqa-yarn")
    assert "vllm-dbo-needs-deepep-all2all-011" not in ok["rules"], ok
    assert "vllm-dbo-needs-deepep-all2all-011" in product("0.11.0", line, {"VLLM_ALL2ALL_BACKEND": "pplx"},
                                                          "shape-gqa-yarn")["rules"]
    # a value outside the choices is the release's own refusal (envs.py), not this rule's
    odd = product("0.11.0", line, {"VLLM_ALL2ALL_BACKEND": "DeepEP_Low_Latency"}, "shape-gqa-yarn")
    assert "vllm-dbo-needs-deepep-all2all-011" not in odd["rules"], odd


# ---------------------------------------------------------------- check-args's reading of --speculative-config

@pytest.mark.parametrize("line,rid", [
    # neither method nor model: the release infers draft_model without a draft (not the MTP the spec would render)
    ([SMOL, "--speculative-config", '{"num_speculative_tokens": 2}'], "vllm-spec-tokens-without-model"),
    ([SMOL, "--spec-tokens", "2"], "vllm-spec-tokens-without-model"),
    # a --spec-* flag beside the JSON: the JSON is judged as written
    ([SMOL, "--spec-method", "ngram", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}'],
     "vllm-spec-method-flag-and-json-key"),
])
def test_a_speculative_json_the_spec_cannot_hold_is_judged_as_written(line, rid):
    for release in ("0.33.0", "0.34.0"):
        out = product(release, line, {})
        assert out["verdict"] == "refuse" and rid in out["rules"], out


@pytest.mark.parametrize("line", [
    [SMOL, "--spec-method", "ngram", "--speculative-config", '{"num_speculative_tokens": 2}'],
    [SMOL, "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}'],
])
def test_the_merged_speculative_config_passes(line):
    for release in ("0.33.0", "0.34.0"):
        out = product(release, line, {})
        assert out["verdict"] == "pass", out


def test_parse_argv_keeps_a_method_less_json_and_folds_a_complete_one():
    from gpustack_k3.catalog.loader import load_catalog
    from gpustack_k3.core.flags import parse_argv

    cat = load_catalog()
    engine = cat.engines["vllm"]
    version = engine.versions["0.34.0"]
    kept = parse_argv(engine, [SMOL, "--speculative-config", '{"num_speculative_tokens": 2}'], version=version)
    assert "speculative" not in kept.spec and "--speculative-config" in kept.extra_args, kept
    folded = parse_argv(engine, [SMOL, "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}'],
                        version=version)
    assert folded.spec["speculative"]["method"] == "ngram" and "--speculative-config" not in folded.extra_args


# ---------------------------------------------------------------- vllm-config-field-bounds: a list's values

def test_a_list_value_keeps_its_own_spaces():
    from gpustack_k3.catalog.loader import load_catalog
    from gpustack_k3.core.flags import read_extra

    version = load_catalog().engines["vllm"].versions["0.34.0"]
    flags, _ = read_extra(["--collect-detailed-traces", "model", "worker "], version)
    assert flags[0].items == ["model", "worker "] and flags[0].value == "model worker "
    inline, _ = read_extra(["--collect-detailed-traces=model"], version)
    assert inline[0].items == ["model"]
    plain, _ = read_extra(["--max-num-seqs", "8"], version)
    assert plain[0].items is None


def test_field_bounds_name_the_entry_as_the_parser_receives_it():
    # a document's extraArgs reach no parser: the rule judges each entry against the field's schema (Literal
    # model/worker/all), naming the entry that is outside it, not an empty one made by splitting at spaces
    from gpustack_k3.catalog.loader import load_catalog
    from gpustack_k3.core.argv import version_dump
    from gpustack_k3.core.rules.config_fields import config_field_refusal

    opt = version_dump(load_catalog().engines["vllm"].versions["0.34.0"]).flag("--collect-detailed-traces")
    msg = config_field_refusal(opt, "model worker ", ["model", "worker "])
    assert msg is not None and "key '1'" in msg, msg
    assert config_field_refusal(opt, "model worker", ["model", "worker"]) is None
