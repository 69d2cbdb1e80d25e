"""vLLM config-time refusals the engine-check table (gpustack_k3/catalog/data/checks/vllm.yaml) cannot express: a
multimodal model with --mm-tensor-ipc torch_shm across ranks, the values of --device-ids, the MoonEP all2all
backend's conditions (the checkpoint's quantization among them) and 0.11.0's microbatching all2all assertion (an
environment variable the release reads as a plain string). Each rule lists the releases whose code refuses, with
each release's own source; tests/core/test_vllm_python_rules.py holds their lines and
tests/engine_oracle/test_vllm_python_rules_oracle.py has the releases judge them."""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.envs import env_value
from gpustack_k3.core.rules.model_quant import vllm_quant
from gpustack_k3.core.rules.multimodal import builds_multimodal_config
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule


def _where(r, flag: str) -> str | None:
    found = extra_arg(r, flag)
    return f"spec.extraArgs[{found[0]}]" if found else None


def _int(x) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


# ModelConfig.verify_with_parallel_config: a multimodal model (MultiModalConfig built: core/rules/multimodal.py) with
# mm_tensor_ipc torch_shm refuses a world across DP above 1 (ParallelConfig.world_size_across_dp = PP x TP x PCP x DP)
_SHM_IPC_SOURCES = {
    "0.28.0": "vllm config/model.py:1361,1418-1431@0.28.0, config/parallel.py:549-551,833-837@0.28.0",
    "0.29.0": "vllm config/model.py:1407,1464-1477@0.29.0, config/parallel.py:580-582,865-869@0.29.0",
    "0.33.0": "vllm config/model.py:1545,1610-1623@0.33.0, config/parallel.py:627-629,964-968@0.33.0",
    "0.34.0": "vllm config/model.py:1565,1630-1643@0.34.0, config/parallel.py:702-704,1057-1061@0.34.0",
}


@rule("vllm-mm-tensor-ipc-torch-shm-parallel", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--mm-tensor-ipc torch_shm with more than one rank (tensor, pipeline, prefill-context or data parallel)",
      why="torch_shm hands multimodal tensors to rank 0 over a single shared-memory queue: API servers cannot know "
          "which engine of a data-parallel group gets the request, and tensor parallel ranks would need the tensors "
          "broadcast. For a multimodal model ModelConfig refuses it unless PP x TP x PCP x DP is 1.",
      fix="Drop --mm-tensor-ipc torch_shm (the default direct_rpc works with every parallel layout), or run on one "
          "GPU.",
      source=_SHM_IPC_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _SHM_IPC_SOURCES.items()},
      no_cel="whether the release registers the model's architecture as multimodal and options of spec.extraArgs; "
             "left to validate")
def check_vllm_mm_tensor_ipc_torch_shm(r, c):
    v = line_view(r)
    if v is None or v.value("mm_tensor_ipc") != "torch_shm" or builds_multimodal_config(r) is not True:
        return
    sizes = [_int(v.value(d)) for d in ("pipeline_parallel_size", "tensor_parallel_size",
                                        "prefill_context_parallel_size", "data_parallel_size")]
    world = 1
    for n in sizes:
        world *= 1 if n is None else n
    if world <= 1:
        return
    yield _where(r, "--mm-tensor-ipc"), (
        "mm_tensor_ipc='torch_shm' is not supported with data_parallel_size > 1 or tensor_parallel_size > 1 or "
        f"pipeline_parallel_size > 1 (PP x TP x PCP x DP = {world})")


# EngineArgs._resolve_device_ids (create_engine_config): the parser's type splits --device-ids at commas, an
# all-digit part becoming an int; duplicates, integers mixed with strings, and (all strings) an entry the platform
# cannot map are refused. On the CUDA platform a non-integer entry is looked up as a GPU UUID through NVML
# (platforms/cuda.py:795-800@0.34.0); the engine oracle's NVML-less platform refuses every one
# (platforms/interface.py:278-286@0.34.0). An entry that is not an integer and not a GPU/MIG UUID is refused by
# both; a UUID is left to the node.
_DEVICE_IDS_SOURCES = {
    "0.28.0": "vllm engine/arg_utils.py:1038-1043,1871-1893@0.28.0, platforms/interface.py:264-272@0.28.0, "
              "platforms/cuda.py:728-733@0.28.0",
    "0.29.0": "vllm engine/arg_utils.py:1094-1099,1954-1976@0.29.0, platforms/interface.py:264-272@0.29.0, "
              "platforms/cuda.py:734-739@0.29.0",
    "0.33.0": "vllm engine/arg_utils.py:1195-1200,2141-2163@0.33.0, platforms/interface.py:267-275@0.33.0, "
              "platforms/cuda.py:754-759@0.33.0",
    "0.34.0": "vllm engine/arg_utils.py:1210-1215,2174-2196@0.34.0, platforms/interface.py:278-286@0.34.0, "
              "platforms/cuda.py:795-800@0.34.0",
}
_UUID_PREFIXES = ("GPU-", "MIG-")


def _parse_int(s: str) -> int | None:
    try:
        return int(s)
    except ValueError:
        return None


def device_ids_refusal(raw: str) -> str | None:
    """The release's refusal of a --device-ids value (None: accepted, or a UUID left to the node's NVML)."""
    ids = [int(p) if p.isdigit() else p for p in (part.strip() for part in raw.split(","))]
    if not ids:
        return None
    if len(set(ids)) != len(ids):
        return f"--device-ids must not contain duplicates: {ids}"
    if all(isinstance(i, str) for i in ids):
        for i in ids:
            if _parse_int(i) is None:
                if i.startswith(_UUID_PREFIXES):
                    return None   # NVML's answer on the node
                return f"Non-integer device ID {i!r} is not supported by cuda."
        return None
    if any(isinstance(i, str) for i in ids):
        return "--device-ids must not mix integer IDs and UUIDs"
    return None


@rule("vllm-device-ids-invalid", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--device-ids holds a duplicate, mixes integers with UUIDs, or names a device that is neither",
      why="--device-ids lists physical GPU indices or GPU UUIDs (comma-separated); the engine refuses duplicates, "
          "a mix of indices and UUIDs, and an entry that is neither an integer nor a GPU UUID (e.g. 'auto').",
      fix="Give distinct GPU indices (e.g. --device-ids 0,1,2,3) or GPU UUIDs (GPU-...), or drop --device-ids.",
      source=_DEVICE_IDS_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _DEVICE_IDS_SOURCES.items()},
      no_cel="reads the list in an option of spec.extraArgs; left to validate")
def check_vllm_device_ids(r, c):
    v = line_view(r)
    if v is None or not v.given("device_ids"):
        return
    raw = v.value("device_ids")
    if isinstance(raw, list):   # the release's parser type applied
        raw = ",".join(str(x) for x in raw)
    if not isinstance(raw, str):
        return
    problem = device_ids_refusal(raw)
    if problem:
        yield _where(r, "--device-ids"), problem


# VllmConfig.__post_init__ with --all2all-backend moonep: the model must be unquantized, BF16, without EPLB, with
# linear expert placement (checked in this order)
_MOONEP_SOURCES = {
    "0.33.0": "vllm config/vllm.py:2106-2140@0.33.0",
    "0.34.0": "vllm config/vllm.py:2016-2050@0.34.0",
}
# --dtype values that never resolve to bfloat16 -> the torch dtype the release names (config/model.py _STR_DTYPE_TO_TORCH_DTYPE)
_NOT_BF16 = {"half": "torch.float16", "float16": "torch.float16", "float": "torch.float32", "float32": "torch.float32"}


def moonep_refusal(r) -> str | None:
    """The release's refusal of --all2all-backend moonep for the line, or None."""
    v = line_view(r)
    if v is None or v.value("all2all_backend") != "moonep":
        return None
    user_quant = v.value("quantization")
    if user_quant is not None:
        return (
            "The moonep all2all backend currently supports unquantized BF16 models only; got "
            f"quantization={user_quant!r}. Use a different --all2all-backend for quantized models.")
    decidable, method, claimed = vllm_quant(r.model_arch, getattr(r.version, "key", ""), None)
    if not decidable:
        return None
    if method is not None:
        return (
            "The moonep all2all backend currently supports unquantized BF16 models only; got "
            f"quantization={(claimed or method)!r}. Use a different --all2all-backend for quantized models.")
    dtype = v.value("dtype")
    if isinstance(dtype, str) and dtype in _NOT_BF16:
        return (f"The moonep all2all backend currently supports BF16 models only; got dtype={_NOT_BF16[dtype]}. "
                "Use a different --all2all-backend or --dtype bfloat16.")
    if dtype not in (None, "auto", "bfloat16"):
        return None   # a dtype the model resolves: left to the release
    if dtype == "auto" and str((r.model_arch.raw or {}).get("torch_dtype") or
                               (r.model_arch.raw or {}).get("dtype") or "") not in ("bfloat16",):
        return None   # auto: the checkpoint's dtype as the release resolves it
    if v.value("enable_eplb") is True:
        return (
            "The moonep all2all backend does not support EPLB yet: EPLB rearranges expert parameters in a layout "
            "MoonEP's replicated [E+B] weights do not follow. Disable --enable-eplb or use a different "
            "--all2all-backend.")
    placement = v.value("expert_placement_strategy")
    if isinstance(placement, str) and placement != "linear":
        return (
            "The moonep all2all backend requires linear expert placement: its load-time all-gather assumes each "
            f"rank holds a contiguous chunk of the global expert range. Got --expert-placement-strategy "
            f"{placement!r}.")
    return None


@rule("vllm-moonep-all2all-conditions", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="--all2all-backend moonep on a quantized or non-BF16 model, with EPLB, or with non-linear expert "
            "placement",
      why="MoonEP's dispatch/combine kernels take unquantized BF16 expert weights replicated in a contiguous "
          "per-rank layout: VllmConfig refuses moonep for a quantized checkpoint (or --quantization), a dtype other "
          "than bfloat16, --enable-eplb, and an expert placement other than linear.",
      fix="Use a different --all2all-backend (e.g. allgather_reducescatter or deepep_*) for this model, or drop "
          "--enable-eplb / --expert-placement-strategy as the message says.",
      source=_MOONEP_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _MOONEP_SOURCES.items()},
      no_cel="the checkpoint's quantization (its config.json) against options of spec.extraArgs; left to validate")
def check_vllm_moonep_all2all(r, c):
    problem = moonep_refusal(r)
    if problem:
        yield _where(r, "--all2all-backend"), problem


# 0.11.0 VllmConfig.__post_init__: with --enable-dbo, VLLM_ALL2ALL_BACKEND (envs.py env_with_choices: the raw
# string, case-sensitive, default allgather_reducescatter) must be one of the DeepEP backends. A value outside the
# variable's choices is refused by envs.py itself (another message): left to the release.
_DBO_A2A_SOURCES = {"0.11.0": "vllm config/__init__.py:480-488@0.11.0, envs.py:160-165,1240-1246@0.11.0"}
_A2A_CHOICES_011 = ("naive", "pplx", "deepep_high_throughput", "deepep_low_latency", "allgather_reducescatter",
                    "flashinfer_all2allv")
_DBO_A2A_OK = ("deepep_low_latency", "deepep_high_throughput")


@rule("vllm-dbo-needs-deepep-all2all-011", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--enable-dbo without a DeepEP all2all backend (VLLM_ALL2ALL_BACKEND, vLLM 0.11.0)",
      why="vLLM 0.11.0 microbatches (dual batch overlap) only over the DeepEP all2all kernels; VllmConfig asserts "
          "that VLLM_ALL2ALL_BACKEND is deepep_low_latency or deepep_high_throughput (unset it is "
          "allgather_reducescatter).",
      fix="Set VLLM_ALL2ALL_BACKEND=deepep_low_latency or deepep_high_throughput (and install the DeepEP kernels), "
          "or drop --enable-dbo.",
      source=_DBO_A2A_SOURCES["0.11.0"], sources={f"vllm {k}": v for k, v in _DBO_A2A_SOURCES.items()},
      no_cel="an environment variable against an option of spec.extraArgs; left to validate")
def check_vllm_dbo_needs_deepep_011(r, c):
    v = line_view(r)
    if v is None or v.value("enable_dbo") is not True:
        return
    backend = env_value(r, "VLLM_ALL2ALL_BACKEND")   # the catalog's parser for the release (vllm_str: as written)
    if backend is None:
        backend = "allgather_reducescatter"
    if backend not in _A2A_CHOICES_011 or backend in _DBO_A2A_OK:
        return
    yield _where(r, "--enable-dbo"), (
        "Microbatching currently only supports the deepep_low_latency and deepep_high_throughput all2all backend. "
        f"{backend} is not supported.")


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("vllm-mm-tensor-ipc-torch-shm-parallel", "vllm-device-ids-invalid", "vllm-moonep-all2all-conditions",
            "vllm-dbo-needs-deepep-all2all-011"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
