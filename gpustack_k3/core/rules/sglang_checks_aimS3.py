"""SGLang refusals that depend on the GPU (helper aimS3, issue 31), beyond what the engine-check table
(gpustack_k3/catalog/data/checks/sglang.yaml) can express: the FlashInfer linear-attention kernels need a bfloat16
SSM state on SM100+ (attention_hook.py handle_linear_attn_backend); an NVFP4 / MXFP8 KV cache needs Blackwell
(kv_cache_hook.py).

Each rule reads the values the release's own parser gives the command line (checks.line_view), lists the releases
whose code it follows with each release's own source, and is verified against the release by
tests/engine_oracle/test_aimS3_rules_oracle.py (unit lines: tests/core/test_aimS3_rules.py)."""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.checks import NO_CEL, line_view
from gpustack_k3.core.rules.registry import rule

# handle_linear_attn_backend: decode = --linear-attn-decode-backend or --linear-attn-backend (an inherited flashkda
# becomes triton); verify = --linear-attn-verify-backend, else flashinfer when decode is; on a CUDA GPU of compute
# capability major >= 10 either on flashinfer with --mamba-ssm-dtype other than bfloat16 is refused. SGLANG_ENABLE_PP_SPEC
# turns a flashinfer verify into triton on KDA models first (left to the release). The SM100 defaults of the same
# function and of kimi_k3_hook.py only fill an unset decode backend with a bfloat16 SSM state.
_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/attention_hook.py:281-377@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/attention_hook.py:280-376@0.5.22",
}


def sm_major(r) -> int | None:
    """The compute capability major of the document's GPU (catalog/data/hardware.yaml ``sm``: SM90 -> 9, SM103 -> 10),
    None without one."""
    hw = getattr(r, "hardware", None)
    sm = str(getattr(hw, "sm", "") or "").upper()
    if not sm.startswith("SM") or not sm[2:].isdigit():
        return None
    return int(sm[2:]) // 10


def linear_flashinfer_ssm_refusal(v) -> str | None:
    """The phase ('decode' / 'verify') the release refuses for a non-bfloat16 SSM state on SM100+, None if neither
    (or the line leaves the SSM dtype, or the verify backend under SGLANG_ENABLE_PP_SPEC, to the release)."""
    dtype = v.value("mamba_ssm_dtype")
    if dtype is None or dtype == "bfloat16":
        return None
    decode = v.value("linear_attn_decode_backend") or v.value("linear_attn_backend")
    if decode == "flashinfer":
        # from --linear-attn-backend alone it also moves the attention backend, which other hooks refuse first
        # (mamba_hook.py:161@0.5.23 on a hybrid model): left to the release
        return "decode" if v.value("linear_attn_decode_backend") == "flashinfer" else None
    if decode == "flashkda" and v.value("linear_attn_decode_backend") == "flashkda":
        return None   # refused before, as FlashKDA decode
    verify = v.value("linear_attn_verify_backend")
    if verify == "flashinfer" and not v.env_set("SGLANG_ENABLE_PP_SPEC"):
        return "verify"
    return None


@rule("sglang-linear-flashinfer-needs-bf16-ssm", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="FlashInfer linear-attention decode/verify on SM100+ needs --mamba-ssm-dtype bfloat16",
      why="On an SM100-family GPU (B200, B300, GB300) SGLang's FlashInfer GDN/KDA decode and verify kernels keep the "
          "SSM state in bfloat16; with --linear-attn-decode-backend (or --linear-attn-backend) flashinfer, or "
          "--linear-attn-verify-backend flashinfer, and another --mamba-ssm-dtype the release refuses to start.",
      fix="Give --mamba-ssm-dtype bfloat16, or a triton linear-attention decode/verify backend.",
      source=_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_linear_flashinfer_needs_bf16_ssm(r, c):
    major = sm_major(r)
    if major is None or major < 10:
        return
    v = line_view(r)
    if v is None:
        return
    phase = linear_flashinfer_ssm_refusal(v)
    if phase is None:
        return
    yield "spec.extraArgs", (f"--linear-attn-{phase}-backend flashinfer on SM100+ requires --mamba-ssm-dtype "
                             f"bfloat16, got {v.value('mamba_ssm_dtype')!r} ({r.hardware.sm}).")


# An NVFP4 KV cache needs Blackwell SM100 or SM120 (handle_kv4_compatibility; with
# --prefill-kv-cache-dequant-dtype nvfp4 handle_nvfp4_prefill_kv_dequant_dtype refuses first, SM100 only), an MXFP8 KV
# cache an SM100+ Blackwell GPU (handle_mxfp8_kv_cache_compatibility: is_blackwell, majors 10, 11, 12). Both hooks run
# on every line (pipeline.py:241,254-255@0.5.23), so a line that reaches them with that dtype on another GPU is refused.
_KV_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/kv_cache_hook.py:34-39,59-63,100-109,112-131@0.5.23; "
              "sglang/srt/utils/common.py:296-312@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/kv_cache_hook.py:34-39,59-63,100-109,112-131@0.5.22",
}
KV_DTYPE_SM_MAJORS = {"nvfp4": (10, 12), "mxfp8": (10, 11, 12)}


@rule("sglang-kv-cache-dtype-needs-blackwell", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="--kv-cache-dtype nvfp4 / mxfp8 needs a Blackwell GPU",
      why="SGLang's NVFP4 KV cache runs only on Blackwell SM100/SM120 and its MXFP8 KV cache on SM100+ Blackwell "
          "(block-scaled operands); on another GPU (H200: SM90) the release refuses to start.",
      fix="Use --kv-cache-dtype fp8_e4m3 (or fp4_mx_block16 for a block-16 FP4 recipe) on this GPU, or a Blackwell GPU.",
      source=_KV_SOURCES["0.5.23"], sources={f"sglang {k}": s for k, s in _KV_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_kv_cache_dtype_needs_blackwell(r, c):
    major = sm_major(r)
    if major is None:
        return
    v = line_view(r)
    if v is None:
        return
    dtype = v.value("kv_cache_dtype")
    majors = KV_DTYPE_SM_MAJORS.get(dtype) if isinstance(dtype, str) else None
    if majors is None or major in majors:
        return
    yield "spec.extraArgs", (f"--kv-cache-dtype {dtype} requires a Blackwell GPU (compute capability major "
                             f"{' or '.join(map(str, majors))}); {r.hardware.sm} is not one.")
