"""The log family: what an engine log reveals, read from what the cold-start tracker collected.

The patterns the tracker scans for stay coldstart data (``coldstart/data/doctor.yaml``, keyed by rule id); a rule
here turns the hits, counts and phase figures into findings. A spec rule a log can also reveal (fp8 KV scales,
the KV over-commit, ...) keeps its metadata in ``spec.py`` and names its log check, defined here, with ``log=``.
Log checks apply by engine only: a log names an engine release, not a catalog version.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM, GIB
from gpustack_k3.core.findings import Finding, sort_findings
from gpustack_k3.core.rules.registry import RULES, Hit, log_evidence, rule

GIB = float(GIB)
_PASS_RE = re.compile(r"""['"]?fuse_(norm_quant|act_quant|allreduce_rms)['"]?\s*[:=]\s*(?:True|true)""")


class LogEvidence(Protocol):
    """What the log checks read of one engine log: ``gpustack_k3.coldstart.tracker.ColdStartTracker`` is one. The
    core names only this shape (the cold-start package is a higher layer: .importlinter)."""
    engine: str | None
    attempts: Sequence[Any]
    doctor_hits: Mapping[str, list[dict]]
    doctor_counts: Mapping[str, int]
    doctor_after_ready: Mapping[str, int]

    def report(self) -> Any: ...


class LogCtx:
    """What one rule's log check reads: its pattern hits and counts (by rule id), and how to print a time."""

    __slots__ = ("tr", "rule_id", "iso")

    def __init__(self, tr: Any, rule_id: str, iso: Callable[[float | None], str | None]) -> None:
        self.tr, self.rule_id, self.iso = tr, rule_id, iso

    @property
    def hits(self) -> list[dict]:
        return self.tr.doctor_hits.get(self.rule_id, [])

    @property
    def count(self) -> int:
        return self.tr.doctor_counts.get(self.rule_id, 0)

    def phase(self, default: str) -> str:
        """The phase the first hit happened in (the tracker records it), else ``default``."""
        return next((h["phase"] for h in self.hits if h.get("phase")), default)


def log_rule_engines(rule_id: str) -> tuple[str, ...]:
    """The engines whose logs a rule's log check reads: its definition's ``engines`` (the tracker's doctor skips
    the patterns of rules for another engine)."""
    r = RULES.get(rule_id)
    if r is None or (r.family != "log" and r.log is None):
        raise KeyError(f"coldstart/data/doctor.yaml: {rule_id!r} is no rule of the registry with a log check")
    return r.engines


def diagnose(tr: LogEvidence, iso: Callable[[float | None], str | None]) -> list[Finding]:
    """Every log check of the registry over one tracker (``coldstart.doctor.diagnose`` calls this)."""
    out: list[Finding] = []
    for r in log_evidence():
        if tr.engine is not None and tr.engine not in r.engines:
            continue
        check = r.check if r.family == "log" else r.log
        out.extend(r.findings(check(tr, LogCtx(tr, r.id, iso)), engine=tr.engine))
    return sort_findings(out)


# ----------------------------------------------------------------------------- evidence of spec rules

def fp8_kv_no_scales(tr, c: LogCtx) -> Iterator[Hit]:
    if c.count:
        yield "weights_load", f"FP8 KV cache without scaling factors: the engine fell back to scale 1.0 ({c.count} line(s))."


def slow_tokenizer(tr, c: LogCtx) -> Iterator[Hit]:
    if c.count:
        yield "process_start", "The engine loaded a slow (Python) tokenizer; at 64K/200K inputs tokenization lands inside TTFT."


def kda_verify_fallback(tr, c: LogCtx) -> Iterator[Hit]:
    if c.count:
        kernel = c.hits[0]["groups"].get("kernel", "TritonKDAKernel")
        yield "cuda_graphs", f"The KDA verify kernel is {kernel}: the fused nv_cutedsl path did not run (fell back to Triton)."


def _kv_allocated_gib(tr) -> float | None:
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


def kv_overcommit(tr, c: LogCtx) -> Iterator[Hit]:
    """The engine's own 'fit into requested memory' hint against the KV cache it allocated."""
    hint = next((h for h in c.hits if h["groups"].get("fit_bytes")), None)
    allocated = _kv_allocated_gib(tr)
    if hint is None or allocated is None:
        return
    fit_bytes = int(hint["groups"]["fit_bytes"])
    fit_gib = fit_bytes / GIB
    if fit_gib < allocated * 0.995:
        yield ("kv_cache", f"KV cache over-committed: {allocated:.2f} GiB allocated, but the engine says {fit_gib:.2f} GiB "
                           "fits the requested memory; expect runtime OOM retries.",
               f"Lower --gpu-memory-utilization (0.92) or pin --kv-cache-memory-bytes {fit_bytes} (the engine's own figure).")


def compile_mode_none(tr, c: LogCtx) -> Iterator[Hit]:
    """Compilation mode NONE while the log reports Inductor fusion passes enabled (not under --enforce-eager,
    which the user chose)."""
    evidence = sorted({h["groups"].get("evidence", "") for h in c.hits if h["role"] == "none"} - {""})
    passes: set[str] = set()
    for h in c.hits:
        if h["role"] == "passes":
            passes.update(_PASS_RE.findall(h["line"]))
            passes.update(_PASS_RE.findall(h["groups"].get("all", "")))
    eager = any(h["role"] == "eager" for h in c.hits)
    if evidence and passes and not eager:
        yield "compile", (f"Compilation mode is NONE ({', '.join(evidence)}) while Inductor fusion passes are reported "
                          f"enabled ({', '.join(sorted(passes))}): those fusions are not applied.")


def kv_pool_below_context(tr, c: LogCtx) -> Iterator[Hit]:
    """The engine's own warning, else the scheduler summary (max_total_num_tokens vs context_len)."""
    pool = context = None
    h = next((x for x in c.hits if x["groups"].get("pool")), None)
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
        yield "kv_cache", (f"The KV pool holds {pool:,} tokens, fewer than the context length {context:,} "
                           f"({100.0 * (context - pool) / context:.1f}% short): one full-length request does not fit.")


# ----------------------------------------------------------------------------- log-only rules

def _norm_device(name: str) -> str:
    n = name.replace("_", " ").upper().strip()
    n = re.sub(r"^NVIDIA\s+", "", n)
    n = re.sub(r"^(?:GEFORCE|RTX)\s+", "", n)
    n = re.sub(r"^G(?=B\d)", "", n)   # GB300 and B300 are the same Blackwell family
    return n


@rule("sglang-device-name-misdetected", family="log", severity="warning", engines=[ENGINE_SGLANG], field="process_start",
      title="The log names more than one GPU model",
      why="SGLang picks the DCP communication backend (a2a vs fi_a2a) from a device-name table; a misread device name "
          "picks the wrong table entry.",
      fix="Confirm the device table entry that picked the DCP comm backend (a2a vs fi_a2a); set --dcp-comm-backend "
          "explicitly if the name was misread.",
      source="docs/sources.md#device-name; sglang arg_groups/overrides.py:1374-1395@0.5.23 (comm-backend default by device)")
def check_sglang_device_name_misdetected(tr, c: LogCtx):
    names: dict[str, str] = {}
    for h in c.hits:
        d = h["groups"].get("device")
        if d:
            names.setdefault(_norm_device(d), d.replace("_", " "))
    if len(names) >= 2:
        yield "process_start", (f"The log names more than one GPU model: {', '.join(sorted(names.values()))}. "
                                "The DCP comm backend is chosen from a device-name table.")


@rule("deepgemm-scale-fmt", family="log", severity="warning", engines=[ENGINE_VLLM, ENGINE_SGLANG], field="weights_load",
      title="DeepGEMM UE8M0 scales on a checkpoint whose scale_fmt is not ue8m0",
      why="DeepGEMM runs with UE8M0 scales while the checkpoint's scale_fmt differs: possible accuracy loss on "
          "Blackwell.",
      fix="Validate accuracy on a fixed evaluation set; use a checkpoint with scale_fmt=ue8m0 or disable DeepGEMM for "
          "these layers.",
      source="docs/sources.md#deepgemm-scale-fmt (a line of the kimi-k3 image's log; not in the 0.5.23 wheel)")
def check_deepgemm_scale_fmt(tr, c: LogCtx):
    if c.count:
        yield "weights_load", ("DeepGEMM runs with UE8M0 scales but the checkpoint's scale_fmt is not ue8m0: possible "
                               "accuracy loss on Blackwell.")


@rule("vllm-soft-oom-retries", family="log", severity="warning", engines=[ENGINE_VLLM], field="warm",
      title="Out-of-memory retries while serving",
      why="The allocator ran out of memory at run time, emptied its cache and retried: the KV pool leaves too little "
          "headroom (the write-up's run had 32 retries over 8 GPUs).",
      fix="Leave headroom: lower --gpu-memory-utilization (0.92) or pin --kv-cache-memory-bytes to the engine's "
          "\"fit into requested memory\" figure.",
      source="docs/sources.md#soft-oom-retries (the engine line was not traced in the wheel: matched loosely)")
def check_vllm_soft_oom_retries(tr, c: LogCtx):
    if c.count:
        yield "warm", f"{c.count} out-of-memory retries while serving: the allocator emptied its cache and retried."


@rule("jit-after-ready", family="log", severity="warning", engines=[ENGINE_VLLM, ENGINE_SGLANG], field="warm",
      title="Kernels compiled after the server declared itself ready",
      why="JIT compilation during the first requests lands inside their latency: \"ready\" is not yet \"warm\".",
      fix="Send warm-up requests covering the serving shapes before routing traffic (readiness gate), or persist JIT "
          "caches between restarts.",
      source="docs/sources.md#jit-after-ready (computed: compile markers after server_ready)")
def check_jit_after_ready(tr, c: LogCtx):
    late_ts = [h["ts"] for h in c.hits if h["after_ready"]]
    count = tr.doctor_after_ready.get(c.rule_id, 0)
    for att in tr.attempts:
        count += att.late_compile_count
        if att.late_compile_first is not None:
            late_ts.append(att.late_compile_first)
    if count:
        first = min((t for t in late_ts if t is not None), default=None)
        yield "warm", (f"Kernels were compiled after the server declared itself ready ({count} line(s), first at "
                       f"{c.iso(first) or '?'}): \"ready\" is not yet \"warm\".")


@rule("coldstart-failed", family="log", severity="error", engines=[ENGINE_VLLM, ENGINE_SGLANG], field="process_start",
      title="The engine failed to start",
      why="The log shows a fatal start-up error; the reason is the first causal error the tracker found.",
      fix="Read the engine log around the failure; fix the cause named in the reason and restart.",
      source="gpustack_k3/coldstart/data/vllm.yaml, gpustack_k3/coldstart/data/sglang.yaml (fatal start-up markers, "
             "each with its engine file:line@version)",
      sources={ENGINE_VLLM: "gpustack_k3/coldstart/data/vllm.yaml (fatal start-up markers, each with its file:line@version)",
               ENGINE_SGLANG: "gpustack_k3/coldstart/data/sglang.yaml (fatal start-up markers, each with its file:line@version)"},
      no_cel="a running engine's log, not the spec: nothing the API server could check on admission")
def check_coldstart_failed(tr, c: LogCtx):
    rep = tr.report()
    if rep.status == "failed":
        phase = rep.last.failed_phase
        yield phase or "process_start", f"Cold start failed in {phase or 'startup'}: {rep.last.reason or '?'}"
