"""The SGLang-only rules of the spec family: Kimi-K3 with DCP and DSPARK, and SGLang's degrading combinations.

The rules both engines share, and the vLLM ones, are in ``spec.py``; the registry reads both (one family, ``spec``).
"""
from __future__ import annotations

from gpustack_k3.core.rules import log as logrules
from gpustack_k3.core.rules.cel import Builder, conj, lit
from gpustack_k3.core.rules.registry import rule
from gpustack_k3.core.rules.spec import cel_dcp, cel_method

RAGGED_VERIFY_ENV = "SGLANG_RAGGED_VERIFY_MODE"


# ------------------------------------------------------------------ SGLang Kimi-K3 with DCP

def _decode_backend_cel(b: Builder) -> str | None:
    p = "sglang.decodeAttentionBackend"
    versions = b.catalog.engines[b.engine].versions
    table = b.by_catalog(lambda v, m, g: list(versions[v].traits.get("kimi_k3_dcp_decode_backends") or []))
    if not any(table.values()):
        return None
    has_list = b.compile({k: bool(v) for k, v in table.items()})
    return conj(f"{cel_dcp(b)} > 1 && {b.dim('model')} == 'kimi-k3' && {b.present(p)}", has_list,
                f"!({b.member(b.ref(p), table)})")


@rule("sglang-kimi-k3-dcp-decode-backend", checked_by="oracle", family="spec", severity="error", engines=["sglang"],
      field="spec.sglang.decodeAttentionBackend", title="Kimi-K3 with DCP needs a decode backend with a DCP path",
      why="SGLang asserts the decode attention backend for Kimi-K3 DCP is one with a DCP decode kernel: 'cutedsl_mla' "
          "or 'aiter' in 0.5.23; 0.5.22 also accepted 'tokenspeed_mla' (and then forced the KV cache to fp8_e4m3).",
      fix="Leave spec.sglang.decodeAttentionBackend unset (default cutedsl_mla) or set one the message lists; or set "
          "spec.parallel.dcp to 1.",
      source="gpustack_k3/catalog/data/engines/sglang.yaml (kimi_k3_dcp_decode_backends per version); "
             "sglang arg_groups/model_overrides/kimi_k3.py:84-112@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/model_overrides/kimi_k3.py:84-127@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/model_overrides/kimi_k3.py:84-112@0.5.23"},
      cel=_decode_backend_cel)
def check_sglang_kimi_k3_dcp_decode_backend(r, c):
    b = r.spec.sglang.decodeAttentionBackend
    ok = r.trait("kimi_k3_dcp_decode_backends") or []
    if r.dcp > 1 and r.spec.model.name == "kimi-k3" and b is not None and ok and b not in ok:
        yield None, (f"Decode attention backend for Kimi-K3 DCP must be {' or '.join(repr(x) for x in ok)} in SGLang "
                     f"{r.version.key}, got {b!r}")


def _ragged_verify_cel(b: Builder) -> str:
    env, k = b.present("env"), lit(RAGGED_VERIFY_ENV)
    return (f"{cel_dcp(b)} > 1 && {cel_method(b)} == 'dspark' && {b.dim('model')} == 'kimi-k3' && "
            f"{env} && {k} in self.env && self.env[{k}] != 'static'")


@rule("sglang-dcp-dspark-ragged-verify", checked_by="oracle", family="spec", severity="error", engines=["sglang"],
      when={"dspark_dcp_static_verify": [True]}, field="spec.env.SGLANG_RAGGED_VERIFY_MODE",
      title="Kimi-K3 DCP with DSPARK requires SGLANG_RAGGED_VERIFY_MODE=static",
      why="SGLang raises at start-up when Kimi-K3 runs DSPARK with DCP and the ragged verify mode is not 'static' "
          "(compact and cap-accept are not validated under DCP). 'static' is the default.",
      fix="Remove SGLANG_RAGGED_VERIFY_MODE from spec.env (the default is static) or set it to static; or set "
          "spec.parallel.dcp to 1.",
      source="sglang arg_groups/model_overrides/kimi_k3.py:63-75, environ.py:1572@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/model_overrides/kimi_k3.py:63-75, environ.py:1424@0.5.22"},
      cel=_ragged_verify_cel)
def check_sglang_dcp_dspark_ragged_verify(r, c):
    mode = r.spec.env.get(RAGGED_VERIFY_ENV)
    if r.dcp > 1 and r.spec.speculative.method == "dspark" and r.spec.model.name == "kimi-k3" \
            and mode is not None and mode != "static":
        yield None, (f"{RAGGED_VERIFY_ENV}={mode!r} with dcp={r.dcp} and DSPARK: Kimi-K3 DCP + DSPARK requires static "
                     "(compact/cap-accept are not validated under DCP)")


@rule("sglang-dcp-static-verify", checked_by="oracle", family="spec", severity="warning", engines=["sglang"],
      when={"dspark_dcp_static_verify": [True]}, field="spec.speculative.method",
      title="SGLang DCP with DSPARK runs static verification only",
      why="Kimi-K3 DSPARK with dcp_size > 1 is accepted only under SGLANG_RAGGED_VERIFY_MODE=static (the default): the "
          "adaptive machinery (SPS cost table, STS calibration, confidence planner, block-acceptance estimator) is "
          "off and every request verifies the full block+1 window.",
      fix="Accept it (the launch spec sets SGLANG_RAGGED_VERIFY_MODE=static explicitly), or compare with preset "
          "sglang-no-dcp.",
      source="sglang arg_groups/model_overrides/kimi_k3.py:63-82@0.5.23, arg_groups/speculative_hook.py:874-884@0.5.23; "
             "docs/sources.md#sglang-dcp-dspark",
      sources={"sglang 0.5.22": "sglang arg_groups/model_overrides/kimi_k3.py:63-82@0.5.22; docs/sources.md#sglang-dcp-dspark"})
def check_sglang_dcp_static_verify(r, c):
    if r.dcp > 1 and r.spec.speculative.method == "dspark":
        n = r.spec.speculative.numTokens or 7
        yield None, (f"dcp={r.dcp} with DSPARK: SGLANG_RAGGED_VERIFY_MODE=static, every request verifies the full "
                     f"{n + 1}-token window (block {n} + 1); adaptive verification is off")


@rule("sglang-dcp-symm-mem-off", checked_by="oracle", family="spec", severity="warning", engines=["sglang"],
      when={"dcp_forces_symm_mem_off": [True]}, field="spec.sglang.symmMem",
      title="SGLang turns symmetric memory off under Kimi-K3 DCP",
      why="--enable-symm-mem is overridden to off when Kimi-K3 runs with DCP (decode CUDA graph correctness), with "
          "only a log warning; the flag the write-up's command sets does nothing.",
      fix="Drop spec.sglang.symmMem, or run without DCP.",
      source="sglang arg_groups/model_overrides/kimi_k3.py:56-61@0.5.23; docs/sources.md#seed-sglang-deployment",
      sources={"sglang 0.5.22": "sglang arg_groups/model_overrides/kimi_k3.py:56-61@0.5.22"})
def check_sglang_dcp_symm_mem_off(r, c):
    if r.dcp > 1 and r.spec.sglang.symmMem and r.spec.model.name == "kimi-k3":
        yield None, f"--enable-symm-mem is forced off with dcp={r.dcp} on Kimi-K3"


@rule("sglang-kv-pool-below-context", checked_by="runtime-only", fails_at="a request near the full context length (does not fail at start-up)",
      family="spec", severity="warning", engines=["sglang"],
      field="spec.scheduling.maxModelLen", title="The full-attention KV pool is smaller than the context length",
      why="A single full-length request does not fit; SGLang only warns and caps max_req_len at the pool.",
      fix="Raise spec.memory.fraction (e.g. 0.88, preset sglang-fixed) or lower spec.memory.mambaFullMemoryRatio, or "
          "lower the context length.",
      source="sglang managers/tp_worker.py:556-571, managers/scheduler.py:1267-1276@0.5.23; "
             "docs/sources.md#sglang-pool-below-context",
      log=logrules.kv_pool_below_context)
def check_sglang_kv_pool_below_context(r, c):
    p = c.plan
    if p and p.full_attention_tokens is not None and p.full_attention_tokens < p.max_model_len:
        short = 100 * (1 - p.full_attention_tokens / p.max_model_len)
        yield None, (f"full-attention pool {p.full_attention_tokens:,} tokens < context length {p.max_model_len:,} "
                     f"({short:.1f} % short)")


@rule("sglang-mamba-caps-running-requests", checked_by="runtime-only", fails_at="under load: running requests capped by the Mamba pool (does not fail)",
      family="spec", severity="warning", engines=["sglang"],
      field="spec.scheduling.maxNumSeqs", title="The Mamba state cache caps running requests",
      why="Each running request needs its KDA/Mamba state (plus speculative intermediates); the state pool is smaller "
          "than max_running_requests.",
      fix="Raise spec.memory.fraction or spec.memory.mambaFullMemoryRatio, or accept the lower cap.",
      source="sglang mem_cache/kv_cache_configurator.py:3229-3409@0.5.23; docs/sources.md#sglang-mamba-cap")
def check_sglang_mamba_caps_running_requests(r, c):
    p = c.plan
    if p and p.requested_running_requests and p.max_running_requests is not None \
            and p.max_running_requests < p.requested_running_requests:
        yield None, (f"Mamba state cache caps max_running_requests {p.requested_running_requests} -> {p.max_running_requests} "
                     f"({p.mamba_state_gib:.2f} GiB of state)")


@rule("sglang-custom-all-reduce-off", checked_by="oracle", family="spec", severity="warning", engines=["sglang"],
      field="spec.sglang.customAllReduce", title="Custom all-reduce disabled",
      why="--disable-custom-all-reduce falls back to plain NCCL, costly for small-batch decode.",
      fix="Remove spec.sglang.customAllReduce: false unless a measurement shows NCCL is faster here.",
      source="sglang arg_groups/fields/exec_.py:725-731@0.5.23; docs/sources.md#custom-all-reduce")
def check_sglang_custom_all_reduce_off(r, c):
    if r.spec.sglang.customAllReduce is False:
        yield None, "--disable-custom-all-reduce: all-reduce falls back to NCCL"


@rule("sglang-kda-verify-triton-fallback", checked_by="runtime-only", fails_at="run time: the Triton verify fallback (does not fail)",
      family="spec", severity="info", engines=["sglang"],
      field="spec.speculative.method", title="The fused KDA verify kernel usually falls back to Triton",
      why="linear_attn_verify_backend=nv_cutedsl is parsed, but the dispatcher points verify_kernel at the Triton "
          "kernel unless strict shape constraints hold.",
      fix="Expect verify=TritonKDAKernel in the log; nothing to set. Do not attribute verify-side speed to the CuTe "
          "kernel.",
      source="docs/sources.md#kda-verify (the kimi-k3 image's kda_backend.py:97-98)",
      log=logrules.kda_verify_fallback)
def check_sglang_kda_verify_triton_fallback(r, c):
    if r.spec_enabled and r.spec.model.name == "kimi-k3":
        yield None, "verify kernel is likely TritonKDAKernel, not nv_cutedsl"
