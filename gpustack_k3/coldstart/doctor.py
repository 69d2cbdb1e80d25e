"""Log doctor: turn what the tracker saw into ``Finding``s (rule ids shared with the rule catalog)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from gpustack_k3.core.findings import Finding, sort_findings

from .scanner import iso

if TYPE_CHECKING:
    from .catalog import DoctorRule
    from .tracker import ColdStartTracker

_PASS_RE = re.compile(r"""['"]?fuse_(norm_quant|act_quant|allreduce_rms)['"]?\s*[:=]\s*(?:True|true)""")
GIB = float(1 << 30)


def _field(hits: list[dict], default: str, rule: DoctorRule | None = None) -> str:
    if rule is not None and rule.phase:
        return rule.phase
    for h in hits:
        if h.get("phase"):
            return h["phase"]
    return default


def _finding(rule: DoctorRule, field: str, **fmt: Any) -> Finding:
    class _Safe(dict):
        def __missing__(self, key: str) -> str:
            return "?"
    return Finding(rule=rule.id, severity=rule.severity, field=field,
                   message=rule.message.format_map(_Safe(fmt)), fix=rule.fix.format_map(_Safe(fmt)),
                   source=rule.source)


def _norm_device(name: str) -> str:
    n = name.replace("_", " ").upper().strip()
    n = re.sub(r"^NVIDIA\s+", "", n)
    n = re.sub(r"^(?:GEFORCE|RTX)\s+", "", n)
    n = re.sub(r"^G(?=B\d)", "", n)   # GB300 and B300 are the same Blackwell family
    return n


def _kv_allocated_gib(tr: ColdStartTracker) -> float | None:
    for att in reversed(tr.attempts):
        p = att.phases.get("kv_cache")
        if p is None:
            continue
        vals = [r["gib"] for r in p.ranks.values() if isinstance(r.get("gib"), (int, float))]
        if vals:
            return float(max(vals))
        if isinstance(p.details.get("gib"), (int, float)):
            return float(p.details["gib"])
    return None


def diagnose(tr: ColdStartTracker) -> list[Finding]:
    cat = tr.catalog
    out: list[Finding] = []
    engine = tr.engine

    def applies(rule: DoctorRule) -> bool:
        return rule.engine == "any" or engine is None or rule.engine == engine

    hits = tr.doctor_hits
    counts = tr.doctor_counts
    for rule in cat.rules:
        if not applies(rule):
            continue
        rh = hits.get(rule.id, [])
        n = counts.get(rule.id, 0)
        rid = rule.id
        if rid in ("fp8-kv-no-scales", "slow-tokenizer", "deepgemm-scale-fmt", "vllm-soft-oom-retries"):
            if n:
                default = "warm" if rid == "vllm-soft-oom-retries" else "weights_load"
                out.append(_finding(rule, _field(rh, default, rule), count=n))
        elif rid == "sglang-kda-verify-triton-fallback":
            if n:
                kernel = rh[0]["groups"].get("kernel", "TritonKDAKernel")
                out.append(_finding(rule, _field(rh, "cuda_graphs", rule), kernel=kernel, count=n))
        elif rid == "sglang-device-name-misdetected":
            names: dict[str, str] = {}
            for h in rh:
                d = h["groups"].get("device")
                if d:
                    names.setdefault(_norm_device(d), d.replace("_", " "))
            if len(names) >= 2:
                out.append(_finding(rule, _field(rh, "process_start", rule), devices=", ".join(sorted(names.values()))))
        elif rid == "vllm-kv-overcommit":
            hint = next((h for h in rh if h["groups"].get("fit_bytes")), None)
            allocated = _kv_allocated_gib(tr)
            if hint is not None and allocated is not None:
                fit_bytes = int(hint["groups"]["fit_bytes"])
                fit_gib = fit_bytes / GIB
                if fit_gib < allocated * 0.995:
                    out.append(_finding(rule, "kv_cache", allocated_gib=f"{allocated:.2f}",
                                        fit_gib=f"{fit_gib:.2f}", fit_bytes=fit_bytes))
        elif rid == "vllm-compile-mode-none":
            evidence = sorted({h["groups"].get("evidence", "") for h in rh if h["role"] == "none"} - {""})
            passes: set[str] = set()
            for h in rh:
                if h["role"] == "passes":
                    passes.update(_PASS_RE.findall(h["line"]))
                    passes.update(_PASS_RE.findall(h["groups"].get("all", "")))
            eager = any(h["role"] == "eager" for h in rh)
            if evidence and passes and not eager:
                out.append(_finding(rule, "compile", evidence=", ".join(evidence),
                                    passes=", ".join(sorted(passes))))
        elif rid == "sglang-kv-pool-below-context":
            pool = context = None
            h = next((x for x in rh if x["groups"].get("pool")), None)
            if h is not None:
                pool, context = int(h["groups"]["pool"]), int(h["groups"]["context"])
            else:
                for att in reversed(tr.attempts):
                    kv = att.phases.get("kv_cache")
                    ps = att.phases.get("process_start")
                    if kv is None:
                        continue
                    total = kv.details.get("max_total_num_tokens")
                    ctx = kv.details.get("context_len")
                    if ctx is None and ps is not None:
                        ctx = ps.details.get("context_length")
                    if total is None:
                        pools = kv.details.get("pools") or {}
                        total = min(pools.values()) if pools else kv.details.get("tokens")
                    if isinstance(total, int) and isinstance(ctx, int):
                        pool, context = total, ctx
                    break
            if pool is not None and context is not None and pool < context:
                out.append(_finding(rule, "kv_cache", pool=f"{pool:,}", context=f"{context:,}",
                                    short_pct=f"{100.0 * (context - pool) / context:.1f}"))
        elif rid == "jit-after-ready":
            late_ts = [h["ts"] for h in rh if h["after_ready"]]
            count = tr.doctor_after_ready.get(rid, 0)
            for att in tr.attempts:
                count += att.late_compile_count
                if att.late_compile_first is not None:
                    late_ts.append(att.late_compile_first)
            if count:
                first = min((t for t in late_ts if t is not None), default=None)
                out.append(_finding(rule, "warm", count=count, first=iso(first) or "?"))
        elif rid == "coldstart-failed":
            rep = tr.report()
            if rep.status == "failed":
                out.append(_finding(rule, rep.last.failed_phase or "process_start",
                                    phase=rep.last.failed_phase or "startup", reason=rep.last.reason or "?"))
    return sort_findings(out)
