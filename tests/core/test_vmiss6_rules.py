"""The vLLM rules of gpustack_k3/core/rules/vllm_checks_vmiss6.py (--mm-tensor-ipc torch_shm across ranks with a
multimodal model, --device-ids values, the MoonEP all2all backend's conditions, 0.11.0's microbatching all2all
assertion): each refuses its line and passes the line flipped, only for the releases its sources name.
tests/engine_oracle/test_vllm_python_rules_oracle.py has each release judge the same lines."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.vllm_checks_vmiss6 import device_ids_refusal
from tests.core.test_vllm_checks import product

K3 = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8"]            # KimiK3ForConditionalGeneration: multimodal
DS = ["/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "-tp", "8"]  # an fp8 checkpoint (deepseek_v4_fp8)
SMOL = "/models/smollm2-hf"
DENSE = ["/models/shape-gqa-dense", "-tp", "8"]    # Llama 3.1 shape: unquantized, torch_dtype bfloat16
YARN = ["/models/shape-gqa-yarn", "-tp", "8"]
MOONEP = ["--all2all-backend", "moonep"]
IPC = ["--mm-tensor-ipc", "torch_shm"]

# (rule id, release, refused line, its env, the line flipped, its env, catalog model)
CASES = []
for _rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
    CASES.append(("vllm-mm-tensor-ipc-torch-shm-parallel", _rel, K3 + IPC, {}, K3, {}, "kimi-k3"))
    for _bad in ("auto", "0,0", "0,GPU-0b1c2d3e-0000-0000-0000-000000000000"):
        CASES.append(("vllm-device-ids-invalid", _rel, [SMOL, "--device-ids", _bad], {},
                      [SMOL, "--device-ids", "0,1"], {}, None))
for _rel in ("0.33.0", "0.34.0"):
    CASES += [
        ("vllm-moonep-all2all-conditions", _rel, DS + ["--enable-expert-parallel"] + MOONEP, {}, DS, {}, None),
        ("vllm-moonep-all2all-conditions", _rel, DENSE + MOONEP + ["--quantization", "fp8"], {}, DENSE + MOONEP, {},
         "shape-gqa-dense"),
        ("vllm-moonep-all2all-conditions", _rel, DENSE + MOONEP + ["--dtype", "half"], {},
         DENSE + MOONEP + ["--dtype", "bfloat16"], {}, "shape-gqa-dense"),
        ("vllm-moonep-all2all-conditions", _rel, DENSE + MOONEP + ["--expert-placement-strategy", "round_robin"], {},
         DENSE + MOONEP, {}, "shape-gqa-dense"),
    ]
CASES.append(("vllm-dbo-needs-deepep-all2all-011", "0.11.0", YARN + ["--enable-dbo"], {},
              YARN + ["--enable-dbo"], {"VLLM_ALL2ALL_BACKEND": "deepep_low_latency"}, "shape-gqa-yarn"))
CASES.append(("vllm-dbo-needs-deepep-all2all-011", "0.11.0", YARN + ["--enable-dbo"], {"VLLM_ALL2ALL_BACKEND": "naive"},
              YARN, {"VLLM_ALL2ALL_BACKEND": "naive"}, "shape-gqa-yarn"))
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]

# lines a rule must not refuse (release, line, env, catalog model, the rule); the engine oracle judges them too
NOT_REFUSED = [
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
]


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_rule_refuses_its_line_and_passes_the_flip(rid, release, bad, bad_env, good, good_env, model):
    refused = product(release, bad, bad_env, model)
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    flipped = product(release, good, good_env, model)
    assert rid not in flipped["rules"], flipped


@pytest.mark.parametrize("release,line,env,model,rid", NOT_REFUSED)
def test_the_rule_leaves_these_lines(release, line, env, model, rid):
    assert rid not in product(release, line, env, model)["rules"]


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


def test_each_rule_cites_every_release_it_runs_on():
    for rid in VMISS6_DIRECT:
        releases = {c[1] for c in CASES if c[0] == rid}
        assert {k.split()[1] for k in RULES[rid].sources} == releases, rid


# the rules of gpustack_k3/core/rules/vllm_checks_vmiss6.py with a firing case above (tests/core/test_registry.py
# test_every_rule_has_a_firing_case counts them)
VMISS6_DIRECT = {c[0] for c in CASES}


def test_every_rule_of_the_module_has_a_case():
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.vllm_checks_vmiss6"} \
        == VMISS6_DIRECT
