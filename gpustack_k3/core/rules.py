"""Rule checks. Each check is registered under the id of its catalog entry (catalog/data/rules.yaml),
which carries severity, applicability (engines + version traits), field, why, fix and source.
A check yields ``(field, message)`` pairs with the offending values; the engine turns them into
findings. ``validate`` is pure: spec + catalog in, findings out.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from gpustack_k3.api.spec import DeploymentDocument
from gpustack_k3.catalog.loader import load_catalog
from gpustack_k3.core.findings import Finding, sort_findings
from gpustack_k3.core.flags import flag_index, known_flags, speculative_subflags
from gpustack_k3.core.plan import Plan, PlanUnavailable, plan
from gpustack_k3.core.resolve import Resolved, get_path, resolve

Hit = tuple[str | None, str]          # (field override or None, message)
Check = Callable[[Resolved, "Ctx"], Iterator[Hit]]
CHECKS: dict[str, Check] = {}


class Ctx:
    """Per-validation memo: the plan is computed once and shared by every rule that needs it."""

    def __init__(self, r: Resolved, plan: Plan | None = None) -> None:
        """``plan``: one the caller already computed for ``r`` (then it is not computed again)."""
        self.r = r
        self._plan: Plan | None | bool = plan if plan is not None else False

    @property
    def plan(self) -> Plan | None:
        if self._plan is False:
            try:
                self._plan = plan(self.r)
            except (PlanUnavailable, TypeError, ValueError, ZeroDivisionError):
                self._plan = None
        return self._plan  # type: ignore[return-value]


def rule(rule_id: str) -> Callable[[Check], Check]:
    def deco(fn: Check) -> Check:
        CHECKS[rule_id] = fn
        return fn
    return deco


# ------------------------------------------------------------------ hard incompatibilities

@rule("vllm-dcp-with-dspark")
def _(r: Resolved, c: Ctx):
    if r.dcp > 1 and r.spec.speculative.method == "dspark":
        yield None, (f"decode_context_parallel_size={r.dcp} with speculative method dspark: engine {r.version.key} "
                     "raises at start-up (config/speculative.py:978-986)")


@rule("vllm-dcp-with-spec")
def _(r, c):
    if r.dcp > 1 and r.spec_enabled:
        yield None, f"decode_context_parallel_size={r.dcp} with speculative method {r.spec.speculative.method} on vLLM {r.version.key}"


@rule("vllm-dspark-dcp-backend")
def _(r, c):
    if r.dcp > 1 and r.spec.speculative.method == "dspark":
        backend = r.spec.speculative.attentionBackend
        ok = r.version.dcp_attention_backends
        # unset: the backend selector only picks backends that declare supports_dcp (backend.py:238-243)
        if backend is not None and backend not in ok:
            yield None, f"attention backend {backend} does not support DCP (supports_dcp=False); DCP-capable: {', '.join(ok)}"


@rule("dcp-divides-tp")
def _(r, c):
    if r.dcp > 1 and r.tp % r.dcp:
        yield None, f"tp={r.tp} is not divisible by dcp={r.dcp}"


@rule("parallel-fits-node")
def _(r, c):
    pp, dp = int(r.value("parallel.pp") or 1), int(r.value("parallel.dp") or 1)
    world = r.tp * pp * dp
    if world > r.spec.hardware.gpuCount:
        yield None, f"tp x pp x dp = {r.tp} x {pp} x {dp} = {world} ranks, but spec.hardware.gpuCount is {r.spec.hardware.gpuCount}"


@rule("gpu-count-exceeds-node")
def _(r, c):
    if r.hardware and r.spec.hardware.gpuCount > r.hardware.gpus_per_node:
        yield None, f"gpuCount {r.spec.hardware.gpuCount} > {r.hardware.gpus_per_node} GPUs per {r.spec.hardware.gpuType} node"


@rule("memory-fraction-range")
def _(r, c):
    f = r.spec.memory.fraction
    if f is not None and not (0 < f <= 1):
        yield None, f"memory fraction {f} is outside (0, 1]"


@rule("mamba-ratio-range")
def _(r, c):
    v = r.spec.memory.mambaFullMemoryRatio
    if v is not None and v <= 0:
        yield None, f"mambaFullMemoryRatio {v} must be > 0"


@rule("fixed-memory-exceeds-budget")
def _(r, c):
    f = r.spec.memory.fraction
    if f is not None and not (0 < f <= 1):
        return
    p = c.plan
    if p is None:
        return
    if p.engine == "vllm" and not r.spec.memory.kvCacheBytes and p.kv_cache_allocated_gib <= 0:
        yield None, (f"fraction {p.memory_fraction} x {p.visible_gib} GiB = {p.requested_gib:.2f} GiB, but weights + non-torch + "
                     f"activations need {p.requested_gib - p.kv_cache_allocated_gib:.2f} GiB: no KV cache left")
    if p.engine == "vllm" and r.spec.memory.kvCacheBytes and p.headroom_gib < 0:
        yield "spec.memory.kvCacheBytes", (f"kvCacheBytes {p.kv_cache_allocated_gib:.2f} GiB + fixed memory exceed the GPU "
                                           f"({p.visible_gib} GiB) by {-p.headroom_gib:.2f} GiB")
    if p.engine == "sglang" and p.kv_cache_budget_gib <= 0:
        yield None, (f"fraction {p.memory_fraction} x {p.visible_gib} GiB = {p.requested_gib:.2f} GiB does not hold the "
                     f"weights ({p.weights_gib:.2f} GiB): no KV pool")


@rule("vllm-max-model-len-exceeds-kv")
def _(r, c):
    p = c.plan
    if p and p.kv_cache_tokens > 0 and p.kv_cache_tokens < p.max_model_len:
        yield None, (f"max_model_len {p.max_model_len:,} tokens > KV capacity {p.kv_cache_tokens:,} tokens "
                     f"({p.kv_cache_allocated_gib:.2f} GiB): the engine refuses to start")


@rule("spec-draft-wrong-engine")
def _(r, c):
    s = r.spec.speculative
    if not s.draftModel or not r.model:
        return
    for other, figs in r.model.engines.items():
        if other == r.engine.engine or figs.draft is None:
            continue
        d = figs.draft
        mine = r.figures.draft if r.figures else None
        if mine and s.draftModel in (mine.modelscope, mine.config_name, mine.path):
            return
        if s.draftModel in (d.modelscope, d.config_name, d.path) or s.draftModel.rstrip("/").endswith(d.modelscope.split("/")[-1]):
            hint = f"; use {mine.config_name if r.engine.engine == 'vllm' else mine.path} ({mine.modelscope})" if mine else ""
            yield None, f"draft model {s.draftModel!r} is the {other} artifact ({d.modelscope}), not {r.engine.engine}'s{hint}"


@rule("spec-draft-missing")
def _(r, c):
    s = r.spec.speculative
    if s.method in ("dspark", "eagle3") and not s.draftModel:
        yield None, f"speculative method {s.method} without spec.speculative.draftModel"


@rule("spec-method-unsupported")
def _(r, c):
    if r.spec.speculative.method == "dspark":
        yield None, f"vLLM {r.version.key} has no dspark speculative method"


@rule("spec-json-tensor-parallel-size")
def _(r, c):
    if "tensor_parallel_size" in r.spec.speculative.extraConfig:
        yield None, "'tensor_parallel_size' is not a valid argument in the speculative_config"


@rule("spec-json-key-duplicates-field")
def _(r, c):
    keys = r.engine.speculative.get("json_keys", {})
    inv = {v: k for k, v in keys.items()}
    for k in r.spec.speculative.extraConfig:
        if k in inv:
            yield f"spec.speculative.extraConfig.{k}", f"extraConfig key {k!r} duplicates spec.speculative.{inv[k]}"


@rule("spec-draft-tp")
def _(r, c):
    d = r.spec.speculative.draftTensorParallelSize
    if d is not None and d not in (1, r.tp):
        yield None, f"draft_tensor_parallel_size {d} is neither 1 nor tensor_parallel_size {r.tp}"


@rule("spec-mtp-multi-token")
def _(r, c):
    s = r.spec.speculative
    if s.method == "mtp" and (s.numTokens or 1) > 1:
        yield None, f"method mtp with numTokens {s.numTokens}"


@rule("batched-tokens-below-seqs")
def _(r, c):
    b, s = r.value("scheduling.maxNumBatchedTokens"), r.value("scheduling.maxNumSeqs")
    if b is not None and s is not None and b < s:
        yield None, f"max_num_batched_tokens ({b}) must be greater than or equal to max_num_seqs ({s})"


@rule("batched-tokens-below-max-len")
def _(r, c):
    if r.value("scheduling.chunkedPrefill") is False:
        b, m = r.value("scheduling.maxNumBatchedTokens"), r.value("scheduling.maxModelLen")
        if b is not None and m is not None and b < m:
            yield None, f"chunked prefill off and max_num_batched_tokens ({b}) < max_model_len ({m})"


@rule("long-prefill-above-max-len")
def _(r, c):
    t, m = r.spec.scheduling.longPrefillTokenThreshold, r.value("scheduling.maxModelLen")
    if t is not None and m is not None and t > m:
        yield None, f"long_prefill_token_threshold ({t}) cannot be greater than the max_model_len ({m})"


@rule("kv-cache-dtype-invalid")
def _(r, c):
    d = r.spec.memory.kvCacheDtype
    if d is not None and d not in r.version.kv_cache_dtypes:
        yield None, f"kv cache dtype {d!r} is not valid for {r.engine.engine} {r.version.key}; valid: {', '.join(r.version.kv_cache_dtypes)}"


@rule("context-above-model")
def _(r, c):
    m = r.spec.scheduling.maxModelLen
    if m is None or r.model is None or m <= r.model.max_context:
        return
    if r.engine.engine == "sglang" and r.spec.env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") == "1":
        return
    yield None, f"context {m:,} > {r.spec.model.name} maximum {r.model.max_context:,}"


@rule("sglang-kimi-k3-dcp-decode-backend")
def _(r, c):
    b = r.spec.sglang.decodeAttentionBackend
    ok = r.trait("kimi_k3_dcp_decode_backends") or []
    if r.dcp > 1 and r.spec.model.name == "kimi-k3" and b is not None and ok and b not in ok:
        yield None, f"Decode attention backend for Kimi-K3 DCP must be 'cutedsl_mla' or 'aiter', got {b!r}"


def _set_fields(section) -> list[str]:
    """Names of a flat spec section's fields that are set (not None), in declaration order. Plain attribute
    reads: a model_dump here would make pydantic build each section's own serializer at CLI start."""
    return [name for name in type(section).model_fields if getattr(section, name) is not None]


@rule("field-unsupported")
def _(r, c):
    mapped = {f.field for f in r.engine.flags}
    other = "sglang" if r.engine.engine == "vllm" else "vllm"
    for name in _set_fields(getattr(r.spec, other)):
        yield f"spec.{other}.{name}", f"spec.{other}.{name} is an {other} option; engine is {r.engine.engine}"
    for path, why in (r.version.unsupported_fields.items() if r.version else ()):
        if get_path(r.spec, path) is not None:
            yield f"spec.{path}", f"spec.{path}: {why}"
    for sect in ("parallel", "memory", "scheduling", "parsers", "model"):
        for name in _set_fields(getattr(r.spec, sect)):
            path = f"{sect}.{name}"
            if path in mapped or path in ("model.name", "model.source", "model.path"):
                continue
            yield f"spec.{path}", f"spec.{path} has no {r.engine.engine} flag"


def _extra_tokens(r: Resolved) -> Iterator[tuple[int, str]]:
    """(index, flag name) for each flag in extraArgs; values are skipped."""
    args = r.spec.extraArgs
    for i, tok in enumerate(args):
        if tok.startswith("-") and not re.match(r"^-\d", tok):
            yield i, tok.split("=", 1)[0]


@rule("extra-arg-malformed")
def _(r, c):
    args = r.spec.extraArgs
    for i, tok in enumerate(args):
        if not tok.startswith("-") and (i == 0 or not args[i - 1].startswith("-") or "=" in args[i - 1]):
            yield f"spec.extraArgs[{i}]", f"{tok!r} is neither a flag nor the value of the flag before it"


@rule("extra-arg-duplicates-field")
def _(r, c):
    tokens = list(_extra_tokens(r))
    if not tokens:      # the parser dump is read only when there is something to look up
        return
    idx = {n: f.field for n, (f, _) in flag_index(r.engine, r.version).items() if not f.platform}
    idx.update({n: f"speculative.{fld}" for n, fld in speculative_subflags(r.engine).items()})
    for i, name in tokens:
        if name in idx:
            yield f"spec.extraArgs[{i}]", f"{name} in extraArgs duplicates spec.{idx[name]}; set that field instead"


@rule("extra-arg-platform-owned")
def _(r, c):
    for i, name in _extra_tokens(r):
        if name in r.engine.platform_flags:
            yield f"spec.extraArgs[{i}]", f"{name} is owned by the platform"


@rule("extra-arg-unknown")
def _(r, c):
    tokens = list(_extra_tokens(r))
    if not tokens:
        return
    known = known_flags(r)
    for i, name in tokens:
        if name not in known:
            yield f"spec.extraArgs[{i}]", f"{name} is not a known flag of {r.engine.engine} {r.version.key}"


@rule("env-removed")
def _(r, c):
    for k in r.spec.env:
        if r.version and k in r.version.env_removed:
            yield f"spec.env.{k}", f"{k}: {r.version.env_removed[k]}"


_SECRET = re.compile(r"(TOKEN|SECRET|PASSWORD|API_KEY|ACCESS_KEY)", re.I)


@rule("secret-in-env")
def _(r, c):
    for k, v in r.spec.env.items():
        if _SECRET.search(k) and v:
            yield f"spec.env.{k}", f"{k} carries a literal value; secrets go by reference (spec.secretEnv)"


# ------------------------------------------------------------------ degrading combinations

@rule("sglang-dcp-static-verify")
def _(r, c):
    if r.dcp > 1 and r.spec.speculative.method == "dspark":
        n = r.spec.speculative.numTokens or 7
        yield None, (f"dcp={r.dcp} with DSPARK: SGLANG_RAGGED_VERIFY_MODE=static, every request verifies the full "
                     f"{n + 1}-token window (block {n} + 1); adaptive verification is off")


@rule("sglang-dcp-symm-mem-off")
def _(r, c):
    if r.dcp > 1 and r.spec.sglang.symmMem and r.spec.model.name == "kimi-k3":
        yield None, f"--enable-symm-mem is forced off with dcp={r.dcp} on Kimi-K3"


@rule("vllm-kv-overcommit")
def _(r, c):
    p = c.plan
    if p is None or r.spec.memory.kvCacheBytes or p.overcommit_gib <= 0:
        return
    need = r.figures.runtime_headroom_gib or 0.0
    if p.headroom_gib < need:
        pin = int(p.kv_cache_budget_gib * (1 << 30))
        yield None, (f"KV pool {p.kv_cache_allocated_gib:.2f} GiB exceeds the engine's budget {p.kv_cache_budget_gib:.2f} GiB "
                     f"by {p.overcommit_gib:.2f} GiB (CUDA graphs); {p.headroom_gib:.2f} GiB left per GPU, "
                     f"{need:.2f} GiB needed at run time. Pin kvCacheBytes: {pin} or use fraction 0.92")


@rule("vllm-max-len-caps-concurrency")
def _(r, c):
    p = c.plan
    seqs = r.value("scheduling.maxNumSeqs")
    if p and p.kv_cache_tokens >= p.max_model_len and seqs and p.max_concurrency < seqs:
        yield None, (f"KV {p.kv_cache_tokens:,} tokens / max_model_len {p.max_model_len:,} = {p.max_concurrency:.2f} "
                     f"concurrent requests, far below max_num_seqs {seqs}")


@rule("vllm-long-prefill-disabled")
def _(r, c):
    t = r.value("scheduling.longPrefillTokenThreshold")
    b, m = r.value("scheduling.maxNumBatchedTokens"), r.value("scheduling.maxModelLen")
    if (t or 0) == 0 and b and m and m > 4096 and b > 4096:
        yield None, f"long_prefill_token_threshold=0 with max_num_batched_tokens {b}: one prompt can take the whole step"


@rule("sglang-kv-pool-below-context")
def _(r, c):
    p = c.plan
    if p and p.full_attention_tokens is not None and p.full_attention_tokens < p.max_model_len:
        short = 100 * (1 - p.full_attention_tokens / p.max_model_len)
        yield None, (f"full-attention pool {p.full_attention_tokens:,} tokens < context length {p.max_model_len:,} "
                     f"({short:.1f} % short)")


@rule("sglang-mamba-caps-running-requests")
def _(r, c):
    p = c.plan
    if p and p.requested_running_requests and p.max_running_requests is not None \
            and p.max_running_requests < p.requested_running_requests:
        yield None, (f"Mamba state cache caps max_running_requests {p.requested_running_requests} -> {p.max_running_requests} "
                     f"({p.mamba_state_gib:.2f} GiB of state)")


@rule("sglang-custom-all-reduce-off")
def _(r, c):
    if r.spec.sglang.customAllReduce is False:
        yield None, "--disable-custom-all-reduce: all-reduce falls back to NCCL"


@rule("vllm-flashinfer-autotune-off")
def _(r, c):
    if r.spec.vllm.flashinferAutotune is False:
        yield None, "--no-enable-flashinfer-autotune: MoE GEMM uses heuristic tactics only"


@rule("fp8-kv-no-scales")
def _(r, c):
    d = str(r.value("memory.kvCacheDtype") or "")
    if d.startswith("fp8"):
        yield None, f"kv cache dtype {d} without scaling factors: scales default to 1.0"


@rule("slow-tokenizer")
def _(r, c):
    if r.spec.model.name == "kimi-k3":
        yield None, "Kimi-K3 loads a slow tokenizer in both engines (seed §15.2)"


@rule("vllm-compile-mode-none")
def _(r, c):
    if r.spec.model.name == "kimi-k3" and r.spec.env.get("VLLM_USE_BREAKABLE_CUDAGRAPH") != "0":
        yield None, "VLLM_USE_BREAKABLE_CUDAGRAPH auto-on for Kimi-K3 forces compile mode NONE"


@rule("vllm-hybrid-block-1536")
def _(r, c):
    if r.figures and (r.figures.block_size_tokens or 0) > 32:
        yield None, f"attention block raised to {r.figures.block_size_tokens} tokens by hybrid page alignment"


@rule("sglang-kda-verify-triton-fallback")
def _(r, c):
    if r.spec_enabled and r.spec.model.name == "kimi-k3":
        yield None, "verify kernel is likely TritonKDAKernel, not nv_cutedsl"


# ------------------------------------------------------------------ engine

def _catalog_findings(r: Resolved) -> list[Finding]:
    cat = r.catalog
    entry = cat.rules["unknown-catalog-entry"]
    out = []
    e = r.engine.engine
    if r.version is None:
        out.append(Finding(entry.id, "error", "spec.engine.version",
                           f"engine version {r.spec.engine.version!r} is not in the catalog for {e}; known: {', '.join(r.engine.versions)}",
                           entry.fix, entry.source))
    if r.model is None:
        out.append(Finding(entry.id, "error", "spec.model.name",
                           f"model {r.spec.model.name!r} is not in the catalog; known: {', '.join(cat.models)}", entry.fix, entry.source))
    elif r.figures is None:
        out.append(Finding(entry.id, "error", "spec.model.name",
                           f"model {r.spec.model.name!r} has no figures for {e}; it is catalogued for {', '.join(r.model.engines)}",
                           entry.fix, entry.source))
    if r.hardware is None:
        out.append(Finding(entry.id, "error", "spec.hardware.gpuType",
                           f"GPU type {r.spec.hardware.gpuType!r} is not in the catalog; known: {', '.join(cat.hardware)}",
                           entry.fix, entry.source))
    return out


def validate_resolved(r: Resolved, *, strict: bool = False, ctx: Ctx | None = None) -> list[Finding]:
    """Findings for a resolved spec. Pass ``ctx`` to keep the plan the rules computed (build_launch does)."""
    findings = _catalog_findings(r)
    if findings:
        return findings
    ctx = ctx or Ctx(r)
    for rid, entry in r.catalog.rules.items():
        if rid == "unknown-catalog-entry" or not entry.applies(r.engine.engine, r.version.traits):
            continue
        check = CHECKS.get(rid)
        if check is None:
            continue
        sev = entry.strict_severity if (strict and entry.strict_severity) else entry.severity
        for fld, msg in check(r, ctx):
            findings.append(Finding(rid, sev, fld or entry.field, msg, entry.fix, entry.source))
    return sort_findings(findings)


def validate(doc: DeploymentDocument, *, strict: bool = False) -> list[Finding]:
    return validate_resolved(resolve(doc), strict=strict)


# Rules whose findings are built where their input is read, not by a check over the spec: the catalog entry
# (unknown-catalog-entry: _catalog_findings; argv-refused: the command-line reader, core/argv via core/flags).
BUILT_ELSEWHERE = {"unknown-catalog-entry", "argv-refused"}


def check_catalog_consistency() -> list[str]:
    """Every catalog rule has a check and every check a catalog rule (tested)."""
    cat = load_catalog()
    problems = [f"rule {rid} has no check" for rid in cat.rules if rid not in CHECKS and rid not in BUILT_ELSEWHERE]
    problems += [f"check {rid} has no catalog entry" for rid in CHECKS if rid not in cat.rules]
    return problems
