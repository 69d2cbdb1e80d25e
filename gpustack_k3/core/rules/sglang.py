"""The SGLang-only rules of the spec family: Kimi-K3 with DCP and DSPARK, and SGLang's degrading combinations.

The rules both engines share, and the vLLM ones, are in ``spec.py``; the registry reads both (one family, ``spec``).
"""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules import log as logrules
from gpustack_k3.core.rules.args import extra_arg, extra_arg_int, extra_arg_switch, extra_arg_value, extra_tokens
from gpustack_k3.core.rules.cel import Builder, conj, lit
from gpustack_k3.core.rules.registry import rule
from gpustack_k3.core.rules.sglang_checks_miss9 import deepseek_family_trtllm_page
from gpustack_k3.core.rules.spec import cel_dcp, cel_method, cel_tp, ranks_exceed_gpus
from gpustack_k3.core import argv as engine_argv

# SGLang's own --attention-backend (both sides' fallback, model_override_base.py:138-152@0.5.23): no spec field
# carries it, so the rules read it from extraArgs under this one spelling
ATTENTION_BACKEND = "--attention-backend"

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


@rule("sglang-kimi-k3-dcp-decode-backend", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
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
    # the decode backend falls back to --attention-backend (arg_groups/model_override_base.py:138-152@0.5.23,
    # attention_backends_of), which the spec has no field for: read from extraArgs
    b = r.spec.sglang.decodeAttentionBackend or extra_arg_value(r, ATTENTION_BACKEND)
    ok = r.trait("kimi_k3_dcp_decode_backends") or []
    if r.dcp > 1 and r.spec.model.name == "kimi-k3" and b is not None and ok and b not in ok:
        yield None, (f"Decode attention backend for Kimi-K3 DCP must be {' or '.join(repr(x) for x in ok)} in SGLang "
                     f"{r.version.key}, got {b!r}")


def attn_dp_size(r) -> int:
    """SGLang's attention DP width: --attn-dp-size, or the deprecated spelling --dp-size N --enable-dp-attention
    (arg_groups/fields/parallel.py:192-193@0.5.23 and @0.5.22: resolves to attn_dp_size = N)."""
    n = int(r.value("sglang.attnDpSize") or 1)     # --attn-dp-size is a spec field (sglang.attnDpSize)
    if n == 1 and extra_arg_switch(r, "--enable-dp-attention"):
        return int(r.value("parallel.dp") or 1)
    return n


def _ragged_verify_cel(b: Builder) -> str:
    env, k = b.present("env"), lit(RAGGED_VERIFY_ENV)
    return (f"{cel_dcp(b)} > 1 && {cel_method(b)} == 'dspark' && {b.dim('model')} == 'kimi-k3' && "
            f"{env} && {k} in self.env && self.env[{k}] != 'static'")


@rule("sglang-dcp-dspark-ragged-verify", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
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


@rule("sglang-dcp-static-verify", checked_by="oracle", family="spec", severity="warning", engines=[ENGINE_SGLANG],
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


@rule("sglang-dcp-symm-mem-off", checked_by="oracle", family="spec", severity="warning", engines=[ENGINE_SGLANG],
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
      family="spec", severity="warning", engines=[ENGINE_SGLANG],
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
      family="spec", severity="warning", engines=[ENGINE_SGLANG],
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


@rule("sglang-custom-all-reduce-off", checked_by="oracle", family="spec", severity="warning", engines=[ENGINE_SGLANG],
      field="spec.sglang.customAllReduce", title="Custom all-reduce disabled",
      why="--disable-custom-all-reduce falls back to plain NCCL, costly for small-batch decode.",
      fix="Remove spec.sglang.customAllReduce: false unless a measurement shows NCCL is faster here.",
      source="sglang arg_groups/fields/exec_.py:725-731@0.5.23; docs/sources.md#custom-all-reduce")
def check_sglang_custom_all_reduce_off(r, c):
    if r.spec.sglang.customAllReduce is False:
        yield None, "--disable-custom-all-reduce: all-reduce falls back to NCCL"


@rule("sglang-kda-verify-triton-fallback", checked_by="runtime-only", fails_at="run time: the Triton verify fallback (does not fail)",
      family="spec", severity="info", engines=[ENGINE_SGLANG],
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


# ------------------------------------------------------------------ SGLang start-up checks beyond ServerArgs resolution

@rule("sglang-parallel-fits-node", checked_by="runtime-only",
      fails_at="start-up, after ServerArgs resolution: the DP controller gives each scheduler process the GPU "
               "base_gpu_id + pp/tp offset (managers/data_parallel_controller.py:445-449,747-752@0.5.23, "
               "418-422,693-698@0.5.22); an index beyond the node's GPUs fails when that process selects its device",
      family="spec", severity="error", engines=[ENGINE_SGLANG], field="spec.parallel.tp",
      title="SGLang's TP x PP (x DP without DP attention) ranks of one pod must fit its GPUs",
      why="SGLang's resolve_once checks no device count. Each scheduler process takes its own GPU: a DP replica is "
          "TP x PP GPUs, unless DP attention (--enable-dp-attention / --attn-dp-size) puts the DP ranks inside the TP "
          "group; --nnodes spreads them over nodes.",
      fix="Lower spec.parallel.tp/pp/dp so they fit spec.hardware.gpuCount, or enable DP attention "
          "(--enable-dp-attention) so the DP ranks share the TP GPUs.",
      source="sglang managers/data_parallel_controller.py:421-449,692-752@0.5.23 (GPU ids per DP rank and TP/PP rank)",
      sources={"sglang 0.5.22": "sglang managers/data_parallel_controller.py:394-422,640-698@0.5.22",
               "sglang 0.5.23": "sglang managers/data_parallel_controller.py:421-449,692-752@0.5.23"},
      # the spec fields' part, as parallel-fits-node's: DP attention and --nnodes live in extraArgs (argv tokenising)
      cel=lambda b: f"{cel_tp(b)} * {b.eff('parallel.pp')[0]} * {b.eff('parallel.dp')[0]} > "
                    f"{b.eff('hardware.gpuCount')[0]}")
def check_sglang_parallel_fits_node(r, c):
    yield from ranks_exceed_gpus(r)


@rule("sglang-dcp-divides-tp", checked_by="runtime-only",
      fails_at="start-up, at distributed initialisation (initialize_model_parallel raises RuntimeError: "
               "distributed/parallel_state.py:2665-2669@0.5.23, 2660-2664@0.5.22); ServerArgs resolution accepts it",
      family="spec", severity="error", engines=[ENGINE_SGLANG], field="spec.parallel.dcp",
      title="SGLang's DCP must divide TP",
      why="SGLang builds the DCP groups inside each TP group: tensor_model_parallel_size % decode_context_parallel_size "
          "must be 0. resolve_once does not check it on CUDA; the scheduler processes raise when they initialise "
          "the process groups.",
      fix="Pick spec.parallel.dcp among the divisors of spec.parallel.tp (for TP 8: 1, 2, 4, 8).",
      source="sglang distributed/parallel_state.py:2665-2669@0.5.23",
      sources={"sglang 0.5.22": "sglang distributed/parallel_state.py:2660-2664@0.5.22",
               "sglang 0.5.23": "sglang distributed/parallel_state.py:2665-2669@0.5.23"},
      cel=lambda b: f"{cel_dcp(b)} > 1 && {cel_tp(b)} % {cel_dcp(b)} != 0")
def check_sglang_dcp_divides_tp(r, c):
    if r.dcp > 1 and r.tp % r.dcp:
        yield None, f"tp={r.tp} is not divisible by dcp={r.dcp}"


@rule("sglang-mem-fraction-above-one", checked_by="runtime-only",
      fails_at="KV-pool sizing after the weights load: the headroom pre_model_load_memory x (1 - mem_fraction_static) "
               "turns negative and the pool is sized beyond the free memory "
               "(model_executor/model_runner_components/kv_pool_runtime.py:75-77@0.5.23, :75-77@0.5.22)",
      family="spec", severity="error", engines=[ENGINE_SGLANG], field="spec.memory.fraction",
      title="SGLang --mem-fraction-static above 1 over-commits GPU memory",
      why="SGLang's ServerArgs resolution accepts any --mem-fraction-static; above 1 the KV pool is sized for more "
          "memory than the GPU has, and start-up fails at the pool allocation, minutes into the start.",
      fix="Set spec.memory.fraction to at most 1 (the write-up's deployment uses 0.85-0.88).",
      source="sglang model_executor/model_runner_components/kv_pool_runtime.py:75-77@0.5.23",
      sources={"sglang 0.5.22": "sglang model_executor/model_runner_components/kv_pool_runtime.py:75-77@0.5.22",
               "sglang 0.5.23": "sglang model_executor/model_runner_components/kv_pool_runtime.py:75-77@0.5.23"},
      no_cel="a per-engine bound of spec.memory.fraction: the schema carries the engine-independent (0, ...) part "
             "and no CEL rule restates the field's range (tests/crd/test_crd_schema.py)")
def check_sglang_mem_fraction_above_one(r, c):
    f = r.spec.memory.fraction
    if f is not None and f > 1:
        yield None, f"--mem-fraction-static {f} > 1"


@rule("sglang-dspark-num-draft-tokens", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.extraArgs", title="DSPARK's --speculative-num-draft-tokens must be the block size + 1",
      why="SGLang's DSpark hook derives the verify window from the block size (gamma, --speculative-dspark-block-size) "
          "and raises when --speculative-num-draft-tokens is given with another value than gamma + 1.",
      fix="Drop --speculative-num-draft-tokens from spec.extraArgs (SGLang sets it to block + 1), or set it to "
          "spec.speculative.numTokens + 1.",
      source="sglang arg_groups/speculative_hook.py:806-834@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/speculative_hook.py:731-757@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/speculative_hook.py:806-834@0.5.23"},
      no_cel="reads --speculative-num-draft-tokens from spec.extraArgs (argv tokenising)")
def check_sglang_dspark_num_draft_tokens(r, c):
    # the block size (spec.speculative.numTokens) given: gamma is known. Without it gamma comes from the draft
    # checkpoint's config (draft_config.resolve_gamma), which the product does not read: no verdict then
    block, n = r.spec.speculative.numTokens, extra_arg_int(r, "--speculative-num-draft-tokens")
    if r.spec.speculative.method == "dspark" and block is not None and n is not None and n != block + 1:
        yield None, (f"--speculative-num-draft-tokens {n} with DSPARK block size {block}: SGLang requires "
                     f"block + 1 = {block + 1}")


@rule("sglang-speculative-algorithm-known", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.extraArgs", title="SGLang does not know this --speculative-algorithm",
      why="SpeculativeAlgorithm.from_string accepts the release's algorithm names (any case), the alias NEXTN and "
          "plugin-registered algorithms; any other name raises 'Unknown speculative algorithm name'.",
      fix="Use one of the names the message lists (spec.speculative.method for DSPARK, NEXTN, EAGLE3, NGRAM).",
      source="gpustack_k3/catalog/data/engines/sglang.yaml (speculative_algorithms per version); "
             "sglang speculative/spec_info.py:32-65, speculative/spec_registry.py:183@0.5.23",
      sources={"sglang 0.5.22": "sglang speculative/spec_info.py:32-65@0.5.22",
               "sglang 0.5.23": "sglang speculative/spec_info.py:32-65, speculative/spec_registry.py:183@0.5.23"},
      no_cel="reads --speculative-algorithm from spec.extraArgs (argv tokenising)")
def check_sglang_speculative_algorithm_known(r, c):
    known = [str(a).upper() for a in r.trait("speculative_algorithms") or []]
    algo = extra_arg_value(r, r.engine.flag_of("speculative"))
    if known and r.spec.speculative.method == "none" and algo is not None and algo.upper() not in known:
        yield None, f"--speculative-algorithm {algo}: SGLang {r.version.key} knows {', '.join(known)}"


_TRTLLM_MLA_KV = ("fp8_e4m3", "bf16", "auto")                  # arg_groups/overrides.py _mla_kv_cache_dtype_checks (1204@0.5.23)
_CUTEDSL_MLA_KV = ("fp8_e4m3", "bf16", "bfloat16", "auto")     # overrides.py _cutedsl_prefill_backend_fill (1233@0.5.23)


def kimi_k3_mla_backends(r) -> tuple[str | None, str | None, str | None]:
    """(attention, decode, prefill) backends SGLang resolves for Kimi-K3 on SM100/SM103 before its MLA kv-dtype
    checks: --attention-backend as given; with DCP an unset (or cutedsl_mla) decode backend becomes cutedsl_mla
    with trtllm_mla prefill (model_overrides/kimi_k3.py:84-93); without DCP, no backend given at all -> trtllm_mla
    for both (kimi_k3.py:122-149@0.5.23, 137-164@0.5.22)."""
    att = extra_arg_value(r, ATTENTION_BACKEND)
    dec, pre = r.spec.sglang.decodeAttentionBackend, r.spec.sglang.prefillAttentionBackend
    if r.dcp > 1:
        if (dec or att) in (None, "cutedsl_mla"):
            dec, pre = "cutedsl_mla", "trtllm_mla"
    elif att is None and dec is None and pre is None:
        dec = pre = "trtllm_mla"
    return att, dec, pre


@rule("sglang-kimi-k3-mla-kv-cache-dtype", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.memory.kvCacheDtype", title="Kimi-K3's MLA backends on SM100/SM103 take fp8_e4m3, bf16 or auto KV",
      why="On SM100/SM103 SGLang gives Kimi-K3 the TRT-LLM MLA backend (no DCP, no backend set) or the CuteDSL MLA "
          "decode backend (DCP); their post-process checks accept the KV-cache dtypes fp8_e4m3, bf16 or auto (CuteDSL "
          "also bfloat16) and raise on any other (e.g. fp8_e5m2).",
      fix="Set spec.memory.kvCacheDtype to fp8_e4m3 (the write-up's), bf16 or auto; or pick another attention backend "
          "(without DCP).",
      source="sglang arg_groups/overrides.py:1204-1258, model_overrides/kimi_k3.py:84-169@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/overrides.py:1154-1221, model_overrides/kimi_k3.py:84-184@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/overrides.py:1204-1258, model_overrides/kimi_k3.py:84-169@0.5.23"},
      no_cel="resolves the backends from --attention-backend in spec.extraArgs (argv tokenising)")
def check_sglang_kimi_k3_mla_kv_cache_dtype(r, c):
    if r.spec.model.name != "kimi-k3" or r.hardware is None or str(r.hardware.sm).upper() not in ("SM100", "SM103"):
        return
    kv = r.spec.memory.kvCacheDtype or "auto"
    att, dec, pre = kimi_k3_mla_backends(r)
    if "trtllm_mla" in (att, dec) and kv not in _TRTLLM_MLA_KV:
        yield None, f"--kv-cache-dtype {kv} with the TRT-LLM MLA backend: it takes {', '.join(_TRTLLM_MLA_KV)}"
    elif "cutedsl_mla" in (att, dec, pre) and kv not in _CUTEDSL_MLA_KV:
        yield None, f"--kv-cache-dtype {kv} with the CuteDSL MLA decode backend: it takes {', '.join(_CUTEDSL_MLA_KV)}"


@rule("sglang-trtllm-mla-kv-cache-dtype", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.memory.kvCacheDtype", title="The TRT-LLM MLA backend takes fp8_e4m3, bf16 or auto KV (DeepSeek-V3 and others)",
      why="SGLang's TRT-LLM MLA post-process check raises on a KV-cache dtype other than fp8_e4m3, bf16 or auto (e.g. "
          "fp8_e5m2, or the bfloat16 spelling) when the attention or decode backend is trtllm_mla on Blackwell; on "
          "SM100/SM103 DeepseekV3ForCausalLM gets trtllm_mla when no backend is given. (Kimi-K3: rule "
          "sglang-kimi-k3-mla-kv-cache-dtype.)",
      fix="Set spec.memory.kvCacheDtype to fp8_e4m3, bf16 or auto; or give another --attention-backend in "
          "spec.extraArgs.",
      source="sglang arg_groups/overrides.py:1204-1218, model_overrides/deepseek_v2.py:178-189@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/overrides.py:1154-1168, model_overrides/deepseek_v2.py:179-190@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/overrides.py:1204-1218, model_overrides/deepseek_v2.py:178-189@0.5.23"},
      no_cel="resolves the backends from --attention-backend in spec.extraArgs and the architecture from config.json")
def check_sglang_trtllm_mla_kv_cache_dtype(r, c):
    if r.spec.model.name == "kimi-k3" or r.hardware is None or str(r.hardware.sm).upper() not in ("SM100", "SM103"):
        return
    kv = r.spec.memory.kvCacheDtype or "auto"
    if kv in _TRTLLM_MLA_KV:
        return
    att = extra_arg_value(r, ATTENTION_BACKEND)
    dec, pre = r.spec.sglang.decodeAttentionBackend, r.spec.sglang.prefillAttentionBackend
    if (att is None and dec is None and pre is None
            and getattr(r.arch, "architecture", None) == "DeepseekV3ForCausalLM"):
        att = "trtllm_mla"                          # deepseek_v2.py:178-189@0.5.23: the SM100 default
    if "trtllm_mla" in (att, dec):
        yield None, f"--kv-cache-dtype {kv} with the TRT-LLM MLA backend: it takes {', '.join(_TRTLLM_MLA_KV)}"


_EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")   # speculative/spec_info.py:102-109,262-264@0.5.23


def speculative_algorithm(r) -> str | None:
    """SGLang's --speculative-algorithm in upper case: the spec method's name, else the one in extraArgs."""
    methods = (r.engine.speculative or {}).get("methods", {})
    algo = methods.get(r.spec.speculative.method) if r.spec.speculative.method != "none" else \
        extra_arg_value(r, r.engine.flag_of("speculative"))
    return str(algo).upper() if algo is not None else None


# SGLang serves DeepSeek-V4 and V4.1 as DeepseekV4ForCausalLM: a V4.1 config.json's DeepseekV41ForCausalLM is
# rewritten to it (configs/deepseek_v41.py:38-39@0.5.23 and @0.5.22); the catalog key names the model when no
# config.json is given
DSV4_ARCHITECTURES = ("DeepseekV4ForCausalLM", "DeepseekV41ForCausalLM")
DSV4_CATALOG_MODELS = ("deepseek-v4.1-flash",)


def _deepseek_v4(r) -> bool:
    arch = getattr(r.arch, "architecture", None)
    return arch in DSV4_ARCHITECTURES if arch else r.spec.model.name in DSV4_CATALOG_MODELS


@rule("sglang-dsv4-speculative-algorithm", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.speculative.method", title="DeepSeek-V4 speculates with EAGLE (top-k 1) or DSPARK only",
      why="SGLang's DeepSeek-V4 hook asserts the speculative algorithm is EAGLE or DSPARK (NEXTN, EAGLE3, NGRAM, ... are "
          "refused at start-up), and EAGLE only with --speculative-eagle-topk 1 (unset is refused too).",
      fix="Use spec.speculative.method dspark (or EAGLE with --speculative-eagle-topk 1 in spec.extraArgs), or none.",
      source="sglang arg_groups/deepseek_v4_hook.py:148-158@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/deepseek_v4_hook.py:102-112@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/deepseek_v4_hook.py:148-158@0.5.23"},
      no_cel="reads the model's architecture (config.json) and --speculative-eagle-topk from spec.extraArgs")
def check_sglang_dsv4_speculative_algorithm(r, c):
    algo = speculative_algorithm(r)
    if algo is None or algo == "NONE" or not _deepseek_v4(r):
        return
    if algo not in ("EAGLE", "DSPARK"):
        yield None, f"--speculative-algorithm {algo} on DeepSeek-V4: SGLang allows EAGLE and DSPARK only"
    elif algo == "EAGLE" and extra_arg_int(r, "--speculative-eagle-topk") != 1:
        yield None, "EAGLE on DeepSeek-V4 needs --speculative-eagle-topk 1 (unset or another top-k is refused)"


@rule("sglang-dsv4-kv-cache-dtype", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.memory.kvCacheDtype", title="DeepSeek-V4 keeps its KV cache in fp8_e4m3 or bfloat16",
      why="SGLang's DeepSeek-V4 KV-cache pass turns auto into fp8_e4m3 and asserts the result is fp8_e4m3 or bfloat16 "
          "(the 'bf16' spelling and fp8_e5m2 are refused at start-up).",
      fix="Set spec.memory.kvCacheDtype to fp8_e4m3 (or bfloat16), or leave it unset.",
      source="sglang arg_groups/overrides.py:891-913@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/overrides.py:868-889@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/overrides.py:891-913@0.5.23"},
      no_cel="reads the model's architecture (config.json)")
def check_sglang_dsv4_kv_cache_dtype(r, c):
    dtype = r.spec.memory.kvCacheDtype
    if dtype not in (None, "auto", "fp8_e4m3", "bfloat16") and _deepseek_v4(r):
        yield None, f"--kv-cache-dtype {dtype} on DeepSeek-V4: SGLang accepts fp8_e4m3 or bfloat16"


# The attention backends SGLang's model hook allows for GptOssForCausalLM, prefill and decode alike
# (arg_groups/model_hook.py:523-532@0.5.23, :517-526@0.5.22)
GPT_OSS_ATTENTION_BACKENDS = ("triton", "trtllm_mha", "fa3", "fa4", "ascend", "intel_amx", "intel_xpu", "aiter")


@rule("sglang-gpt-oss-attention-backend", checked_by="oracle", family="spec", severity="error",
      engines=[ENGINE_SGLANG], field="spec.sglang.decodeAttentionBackend",
      title="gpt-oss runs on triton, trtllm_mha, fa3, fa4 (or a vendor) attention backend only",
      why="SGLang's model hook asserts that GptOssForCausalLM's prefill and decode attention backends (each falling "
          "back to --attention-backend) are among the ones with sliding window and attention sinks; any other "
          "(flashinfer, ...) is refused when the server arguments are resolved.",
      fix="Give --attention-backend triton, trtllm_mha, fa3 or fa4 (and the same set for --prefill-/"
          "--decode-attention-backend), or leave them unset so SGLang picks one.",
      source="sglang arg_groups/model_hook.py:515-544@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/model_hook.py:509-538@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/model_hook.py:515-544@0.5.23"},
      no_cel="reads the model's architecture (config.json) and --attention-backend from spec.extraArgs")
def check_sglang_gpt_oss_attention_backend(r, c):
    if getattr(r.arch, "architecture", None) != "GptOssForCausalLM":
        return
    base = extra_arg_value(r, ATTENTION_BACKEND)     # attention_backends_of: model_override_base.py:138-152@0.5.23
    sides = (("prefill", r.spec.sglang.prefillAttentionBackend or extra_arg_value(r, r.engine.flag_of("sglang.prefillAttentionBackend"))),
             ("decode", r.spec.sglang.decodeAttentionBackend or extra_arg_value(r, r.engine.flag_of("sglang.decodeAttentionBackend"))))
    for side, given in sides:
        backend = given or base
        if backend is not None and backend not in GPT_OSS_ATTENTION_BACKENDS:
            yield None, (f"{side} attention backend {backend!r} on GptOssForCausalLM: SGLang {r.version.key} allows "
                         f"{', '.join(GPT_OSS_ATTENTION_BACKENDS)}")


# The architectures whose checkpoint carries its own draft layer: SGLang's EAGLE family hook defaults
# --speculative-draft-model-path to the model path for them (speculative_hook.py:1121-1146@0.5.23, the same list at
# :1030-1055@0.5.22)
EAGLE_SELF_DRAFT_ARCHITECTURES = (
    "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Glm4MoeForCausalLM",
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
    "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "HYV3ForCausalLM",
    "HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration")


@rule("sglang-eagle-draft-missing", checked_by="runtime-only",
      fails_at="start-up: the draft worker's ModelConfig is built from the unset draft path",
      family="spec", severity="error", engines=[ENGINE_SGLANG], field="spec.speculative.draftModel",
      title="SGLang EAGLE/EAGLE3 without a draft path on a model that carries no draft layer",
      why="SGLang's EAGLE family hook accepts EAGLE and EAGLE3 without --speculative-draft-model-path when it builds "
          "the configuration; it fills the path in only for the architectures whose checkpoint holds their own "
          "draft layer (DeepSeek-V3/V4, GLM-4 MoE, ...). For any other model the draft worker builds its "
          "ModelConfig from the unset path and start-up fails.",
      fix="Set spec.speculative.draftModel (--speculative-draft-model-path), or choose method mtp/ngram/none.",
      source="sglang arg_groups/speculative_hook.py:1121-1146@0.5.23, managers/tp_worker.py:458-472@0.5.22",
      sources={"sglang 0.5.22": "sglang arg_groups/speculative_hook.py:1030-1055@0.5.22, "
                                "managers/tp_worker.py:458-472@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/speculative_hook.py:1121-1146@0.5.23"},
      no_cel="reads the model's architecture (config.json) and the algorithm and draft path from spec.extraArgs")
def check_sglang_eagle_draft_missing(r, c):
    algo = speculative_algorithm(r)
    if algo not in ("EAGLE", "EAGLE3") or r.spec.speculative.draftModel:
        return
    if extra_arg_value(r, (r.engine.speculative or {}).get("draft_path_flag")) is not None:
        return
    arch = getattr(r.arch, "architecture", None)
    if arch is None:
        arch = DSV4_ARCHITECTURES[0] if r.spec.model.name in DSV4_CATALOG_MODELS else None
    if arch is None or arch in EAGLE_SELF_DRAFT_ARCHITECTURES or arch in DSV4_ARCHITECTURES:
        return
    yield None, f"--speculative-algorithm {algo} on {arch} without --speculative-draft-model-path"


@rule("sglang-eagle-draft-tokens-need-steps", checked_by="oracle", family="spec", severity="error",
      engines=[ENGINE_SGLANG], field="spec.speculative.numTokens",
      title="SGLang EAGLE/NEXTN: draft tokens or top-k need --speculative-num-steps",
      why="The EAGLE family (EAGLE, EAGLE3, NEXTN, STANDALONE) chooses steps, top-k and draft tokens together when "
          "--speculative-num-steps is unset (and not adaptive), and asserts that top-k and the draft-token count were "
          "not given either.",
      fix="Also give --speculative-num-steps (and --speculative-eagle-topk) in spec.extraArgs, or leave "
          "spec.speculative.numTokens unset so SGLang chooses all three.",
      source="sglang arg_groups/speculative_hook.py:1159-1163@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/speculative_hook.py:1068-1072@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/speculative_hook.py:1159-1163@0.5.23"},
      no_cel="reads the speculative algorithm and step flags from spec.extraArgs (argv tokenising)")
def check_sglang_eagle_draft_tokens_need_steps(r, c):
    algo = speculative_algorithm(r)
    if algo not in _EAGLE_FAMILY:
        return
    if extra_arg_switch(r, "--speculative-adaptive") or extra_arg_value(r, "--speculative-num-steps") is not None:
        return
    # spec.speculative.numTokens of NEXTN/EAGLE3 renders --speculative-num-draft-tokens (the argv reader keeps a
    # DSPARK block size given beside them in extraArgs); with an algorithm the spec does not model it is an extra arg
    drafts = r.spec.speculative.numTokens if r.spec.speculative.method != "none" else None
    given = [f for f in ("--speculative-num-draft-tokens", "--speculative-eagle-topk")
             if extra_arg_value(r, f) is not None or (f == "--speculative-num-draft-tokens" and drafts is not None)]
    if given:
        yield None, f"{str(algo).upper()} with {' and '.join(given)} but no --speculative-num-steps"


@rule("sglang-eagle-steps-need-topk", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.extraArgs", title="SGLang EAGLE/NEXTN: --speculative-num-steps needs --speculative-eagle-topk",
      why="With --speculative-num-steps given, the EAGLE family (EAGLE, EAGLE3, NEXTN, STANDALONE) does not choose "
          "the top-k; the page-size check then compares speculative_eagle_topk (None) with 1 and the resolution "
          "crashes (TypeError): the server does not start.",
      fix="Give --speculative-eagle-topk (e.g. 1) with --speculative-num-steps in spec.extraArgs, or drop "
          "--speculative-num-steps so SGLang chooses steps, top-k and draft tokens together.",
      source="sglang arg_groups/speculative_hook.py:1159-1172, 1271-1276@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/speculative_hook.py:1068-1081, 1181-1186@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/speculative_hook.py:1159-1172, 1271-1276@0.5.23"},
      no_cel="reads the speculative step flags from spec.extraArgs (argv tokenising)")
def check_sglang_eagle_steps_need_topk(r, c):
    algo = speculative_algorithm(r)
    if algo in _EAGLE_FAMILY and not extra_arg_switch(r, "--speculative-adaptive") \
            and extra_arg_value(r, "--speculative-num-steps") is not None \
            and extra_arg_value(r, "--speculative-eagle-topk") is None:
        yield None, f"{algo} with --speculative-num-steps and no --speculative-eagle-topk"


@rule("sglang-ngram-dp-attention", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.speculative.method", title="SGLang NGRAM speculative decoding does not support DP attention",
      why="SGLang's NGRAM hook raises 'Currently ngram speculative decoding does not support dp attention' when the "
          "attention DP width is above 1 (--attn-dp-size N, or --dp-size N with --enable-dp-attention).",
      fix="Run NGRAM without DP attention, or pick another speculative method.",
      source="sglang arg_groups/speculative_hook.py:1367-1371@0.5.23; runtime_context.py:191-199@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/speculative_hook.py:1277-1281@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/speculative_hook.py:1367-1371@0.5.23"},
      no_cel="reads --enable-dp-attention/--attn-dp-size from spec.extraArgs (argv tokenising)")
def check_sglang_ngram_dp_attention(r, c):
    width = attn_dp_size(r)
    if speculative_algorithm(r) == "NGRAM" and width > 1:
        yield None, f"NGRAM with attention DP width {width}"


def parser_default(r, flag: str):
    """The release parser's default for a flag (its options dump), None when the flag is unknown to it."""
    dump = engine_argv.version_dump(r.version) if r.version is not None else None
    opt = dump.flag(flag) if dump is not None else None
    return opt.default if opt is not None else None


_NGRAM_BREADTH = "--speculative-ngram-max-bfs-breadth"


@rule("sglang-ngram-topk-page-size", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.speculative.method", title="SGLang NGRAM: top-k above 1 with a paged MLA backend",
      why="The NGRAM hook sets speculative_eagle_topk to --speculative-ngram-max-bfs-breadth (default 10) and refuses "
          "a top-k above 1 with a page size above 1 on any attention backend but flashinfer. On SM100/SM103 without "
          "DCP and without an attention backend given, SGLang gives Kimi-K3 (its own override) and the DeepSeek "
          "family outside DSA (DeepseekV3ForCausalLM and the other architectures of the DeepSeek override whose "
          "config.json has no index_topk) trtllm_mla, which pages at 64 tokens (32 if --page-size 32; any other "
          "--page-size is raised to 64): NGRAM as given is refused.",
      fix="Give --speculative-ngram-max-bfs-breadth 1, or --attention-backend flashinfer, in spec.extraArgs; or use "
          "another speculative method.",
      source="sglang arg_groups/speculative_hook.py:1310-1313,1355-1366@0.5.23; model_overrides/kimi_k3.py:122-137"
             "@0.5.23; arg_groups/overrides.py:1143-1199@0.5.23 (trtllm_mla page size 32/64); "
             "arg_groups/model_overrides/deepseek_v2.py:37-51,99,178-189@0.5.23, configs/model_config.py:191-212@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/speculative_hook.py:1220-1223,1265-1276@0.5.22; "
                                "model_overrides/kimi_k3.py:137-150@0.5.22; "
                                "arg_groups/model_overrides/deepseek_v2.py:37-51,99,179-190@0.5.22, "
                                "configs/model_config.py:190-211@0.5.22, arg_groups/overrides.py:1085-1104,1148-1150"
                                "@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/speculative_hook.py:1310-1313,1355-1366@0.5.23; "
                                "model_overrides/kimi_k3.py:122-137@0.5.23; arg_groups/overrides.py:1143-1199@0.5.23; "
                                "arg_groups/model_overrides/deepseek_v2.py:37-51,99,178-189@0.5.23, "
                                "configs/model_config.py:191-212@0.5.23"},
      no_cel="reads the NGRAM breadth and the attention backends from spec.extraArgs (argv tokenising)")
def check_sglang_ngram_topk_page_size(r, c):
    if speculative_algorithm(r) != "NGRAM":
        return
    if r.spec.model.name == "kimi-k3":
        if r.hardware is None or str(r.hardware.sm).upper() not in ("SM100", "SM103") or r.dcp > 1:
            return
        att, dec, pre = kimi_k3_mla_backends(r)
        if (att, dec, pre) != (None, "trtllm_mla", "trtllm_mla"):
            return   # a backend was given: its page size is not modelled here (flashinfer and triton at 1 pass)
        what, page = "Kimi-K3", 64
    else:
        found = deepseek_family_trtllm_page(r)   # the DeepSeek family outside DSA (helper miss9)
        if found is None:
            return
        what, page = found
    topk = extra_arg_int(r, _NGRAM_BREADTH)
    if topk is None:
        topk = parser_default(r, _NGRAM_BREADTH)
    if isinstance(topk, int) and topk > 1:
        yield None, (f"NGRAM on {what}: speculative_eagle_topk({topk}) > 1 (--speculative-ngram-max-bfs-breadth) with "
                     f"page_size({page}) > 1 on the trtllm_mla backend SGLang picks on SM100/SM103; give "
                     "--speculative-ngram-max-bfs-breadth 1 or --attention-backend flashinfer")


@rule("sglang-dcp-prefill-cp", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.parallel.dcp", title="SGLang: decode context parallelism does not support --enable-prefill-cp",
      why="SGLang's decode-context-parallel hook refuses --dcp-size above 1 together with --enable-prefill-cp.",
      fix="Drop --enable-prefill-cp from spec.extraArgs, or set spec.parallel.dcp to 1.",
      source="sglang arg_groups/parallel_hook.py:249-250@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/parallel_hook.py:243-244@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/parallel_hook.py:249-250@0.5.23"},
      no_cel="reads --enable-prefill-cp from spec.extraArgs (argv tokenising)")
def check_sglang_dcp_prefill_cp(r, c):
    if r.dcp > 1 and extra_arg_switch(r, "--enable-prefill-cp"):
        yield None, f"--dcp-size {r.dcp} with --enable-prefill-cp"


@rule("sglang-prefill-cp-needs-strategy", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.extraArgs", title="SGLang: --enable-prefill-cp needs --cp-strategy",
      why="SGLang's context-parallel hook refuses --enable-prefill-cp without a --cp-strategy (it has no default).",
      fix="Give --cp-strategy with --enable-prefill-cp in spec.extraArgs (see the release's --help for its choices), "
          "or drop --enable-prefill-cp.",
      source="sglang arg_groups/parallel_hook.py:152-155@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/parallel_hook.py:145-148@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/parallel_hook.py:152-155@0.5.23"},
      no_cel="reads --enable-prefill-cp and --cp-strategy from spec.extraArgs (argv tokenising)")
def check_sglang_prefill_cp_needs_strategy(r, c):
    if extra_arg_switch(r, "--enable-prefill-cp") and extra_arg_value(r, "--cp-strategy") is None:
        yield None, "--enable-prefill-cp without --cp-strategy"


def _dcp_comm_backend(r) -> str | None:
    return r.spec.parallel.dcpCommBackend or extra_arg_value(r, r.engine.flag_of("parallel.dcpCommBackend"))


@rule("sglang-dcp-comm-backend-needs-dcp", checked_by="oracle", family="spec", severity="error",
      engines=[ENGINE_SGLANG], field="spec.parallel.dcpCommBackend",
      title="SGLang: --dcp-comm-backend a2a / fi_a2a needs decode context parallelism",
      why="The a2a and fi_a2a backends only change the decode-context-parallel attention reduction; SGLang refuses "
          "them with --dcp-size 1 (ag_rs, the default without DCP, is accepted).",
      fix="Set spec.parallel.dcp above 1, or drop spec.parallel.dcpCommBackend (or set it to ag_rs).",
      source="sglang arg_groups/parallel_hook.py:251-257@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/parallel_hook.py:245-251@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/parallel_hook.py:251-257@0.5.23"},
      cel=lambda b: (f"{cel_dcp(b)} <= 1 && {b.present('parallel.dcpCommBackend')} && "
                     f"{b.ref('parallel.dcpCommBackend')} in ['a2a', 'fi_a2a']"))
def check_sglang_dcp_comm_backend_needs_dcp(r, c):
    backend = _dcp_comm_backend(r)
    if r.dcp <= 1 and backend in ("a2a", "fi_a2a"):
        yield None, f"--dcp-comm-backend {backend} with dcp_size={r.dcp}"


@rule("sglang-dcp-replicate-q-proj", checked_by="oracle", family="spec", severity="error", engines=[ENGINE_SGLANG],
      field="spec.extraArgs", title="SGLang: --dcp-replicate-q-proj needs DCP with the a2a/fi_a2a backend",
      why="--dcp-replicate-q-proj removes the head-dim Q all-gather of the a2a/fi_a2a DCP reduction: SGLang refuses it "
          "with --dcp-size 1 and with --dcp-comm-backend ag_rs (with DCP on a GPU the backend left unset resolves to "
          "fi_a2a or a2a).",
      fix="Drop --dcp-replicate-q-proj, or run it with spec.parallel.dcp above 1 and dcpCommBackend a2a/fi_a2a (or "
          "unset).",
      source="sglang arg_groups/parallel_hook.py:265-275@0.5.23; arg_groups/overrides.py:1374-1396@0.5.23",
      sources={"sglang 0.5.22": "sglang arg_groups/parallel_hook.py:259-270@0.5.22",
               "sglang 0.5.23": "sglang arg_groups/parallel_hook.py:265-275@0.5.23; "
                                "arg_groups/overrides.py:1374-1396@0.5.23"},
      no_cel="reads --dcp-replicate-q-proj from spec.extraArgs (argv tokenising)")
def check_sglang_dcp_replicate_q_proj(r, c):
    found = extra_arg(r, "--dcp-replicate-q-proj", "--no-dcp-replicate-q-proj")
    if not found or found[1] is not None:
        return
    flag = next((f for i, f in extra_tokens(r) if i == found[0]), "--dcp-replicate-q-proj")
    if flag == "--no-dcp-replicate-q-proj":
        return
    backend = _dcp_comm_backend(r)
    if r.dcp <= 1:
        yield None, f"--dcp-replicate-q-proj with dcp_size={r.dcp}"
    elif backend not in (None, "a2a", "fi_a2a"):
        yield None, f"--dcp-replicate-q-proj with --dcp-comm-backend {backend}"


# SGLang refusals beyond the checks table (a string prefix, a product of options): their own module, imported here so
# the package defines them with the SGLang rules
from gpustack_k3.core.rules import sglang_checks_smiss  # noqa: E402,F401
# the refusals that depend on a value the release resolves (a forced page size, a DP-divided chunk) and the
# megakernel plugin warning (helper smiss5): their own module, imported here so the registry has them
from gpustack_k3.core.rules import sglang_checks_smiss5  # noqa: E402,F401
# the Kimi-K3 EAGLE draft-tree rule (helper smiss6): its own module, imported here so the registry has them
from gpustack_k3.core.rules import sglang_checks_smiss6  # noqa: E402,F401
# the SM100 default attention backend (multi-item scoring, deterministic inference), --pp-size 0 with DCP, the AMD
# monokernel plugin warning (helper smiss7): their own module, imported here so the registry has them
from gpustack_k3.core.rules import sglang_checks_smiss7  # noqa: E402,F401
