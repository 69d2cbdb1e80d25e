"""What one probe run collected → the report: statistics, goodput, invariants, engine counters, findings
(pure; the HTTP edge fills ``Collected``). JSON shape: README "gpustack-k3 probe"."""
from __future__ import annotations

from dataclasses import dataclass, field

from gpustack_k3.api.v1alpha1.constants import EXIT_INPUT, EXIT_OK, EXIT_REFUSED
from gpustack_k3.core.findings import Finding, has_errors, sort_findings
from gpustack_k3.probe.catalog import (
    MetricsCatalog,
    load_findings,
    load_metrics_catalog,
)
from gpustack_k3.probe.core import SLO_KEYS, ProbeConfig, distribution, min_samples
from gpustack_k3.probe.kvtransfer import Traffic, decide
from gpustack_k3.probe.metrics import MetricsTrace
from gpustack_k3.probe.stream import RequestTrace

MULTI_TOKEN_CHUNKS = 1.05       # mean tokens per delta chunk above this: ITL is a chunk gap
BOUND_SLACK = 1e-6              # relative: float rounding only, the bound itself is exact


@dataclass
class Stage:
    name: str
    ok: bool
    ms: float | None
    detail: str

    def to_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "ms": None if self.ms is None else round(self.ms, 3),
                "detail": self.detail}


@dataclass
class Collected:
    """Raw results of one probe: stages, per-request traces (warm-up apart), wall times, /metrics."""
    endpoint: str
    engine: str | None = None
    model: str | None = None
    stages: list[Stage] = field(default_factory=list)
    run: list[RequestTrace] = field(default_factory=list)
    warmup: list[RequestTrace] = field(default_factory=list)
    wall_s: float = 0.0
    warmup_wall_s: float = 0.0
    metrics: MetricsTrace | None = None
    metrics_note: str | None = None       # why there are no engine counters
    ignore_eos: bool = False
    unusable: str | None = None           # the failed stage's message: nothing after it ran
    kv_scrapes: list | None = None        # P/D: every prefill's and decode's /metrics around the run (kvtransfer.Scrape)


@dataclass
class ProbeReport:
    data: dict
    findings: list[Finding]
    exit_code: int

    def to_dict(self) -> dict:
        return {**self.data, "findings": [f.to_dict() for f in self.findings], "exit_code": self.exit_code}


def _ok(traces: list[RequestTrace]) -> list[RequestTrace]:
    return [t for t in traces if t.ok]


def _vals(traces: list[RequestTrace], attr: str) -> list[float]:
    return [v for t in traces if (v := getattr(t, attr)) is not None]


def _phase_stats(traces: list[RequestTrace]) -> dict:
    ok = _ok(traces)
    return {"ttft_ms": distribution(_vals(ok, "ttft_s")), "ttft_content_ms": distribution(_vals(ok, "ttft_content_s")),
            "tpot_ms": distribution(_vals(ok, "tpot_s")), "itl_ms": distribution([x for t in ok for x in t.itl_s]),
            "e2el_ms": distribution(_vals(ok, "e2el_s"))}


def _good(t: RequestTrace, cfg: ProbeConfig) -> dict[str, bool]:
    """Per SLO: met? (a single-token answer has TPOT 0 for goodput, as in vllm benchmarks/serve.py:625-628)."""
    s = cfg.slo
    out = {}
    if s.ttft is not None:
        out["ttft"] = t.ttft_s * 1000 <= s.ttft   # type: ignore[operator]
    if s.tpot is not None:
        out["tpot"] = (t.tpot_s or 0.0) * 1000 <= s.tpot
    if s.e2el is not None:
        out["e2el"] = t.e2el_s * 1000 <= s.e2el   # type: ignore[operator]
    return out


def summarize(cfg: ProbeConfig, col: Collected, catalog: MetricsCatalog | None = None) -> ProbeReport:
    """The report of one probe: each part reads its own slice of ``col`` and adds its figures and findings."""
    catalog = catalog or load_metrics_catalog()
    texts = load_findings()
    data: dict = {"endpoint": col.endpoint, "engine": col.engine, "model": col.model, "api": cfg.api,
                  "dataset": cfg.dataset, "requests": cfg.requests, "concurrency": cfg.concurrency,
                  "input_len": cfg.input_len if cfg.prompts is None else None, "output_len": cfg.output_len,
                  "stages": [s.to_dict() for s in col.stages]}
    if col.unusable is not None:
        data["usable"] = False
        data["reason"] = col.unusable
        return ProbeReport(data, [], EXIT_INPUT)
    data["usable"] = True
    run = _Run.of(col)
    findings: list[Finding] = []
    data.update(_figures(run, data["input_len"]))
    findings += _goodput(cfg, run, data, texts)
    findings += _invariants(cfg, col, run, catalog, data, texts)
    findings += _engine_counters(cfg, col, catalog, data, texts)
    findings += _checks(cfg, col, run, data, texts)
    findings += _kv_transfer(col, data, texts)
    data["warmup"] = _warmup(col) if col.warmup else None
    findings = sort_findings(findings)
    return ProbeReport(data, findings, EXIT_REFUSED if has_errors(findings) else EXIT_OK)


@dataclass(frozen=True)
class _Run:
    """The measured run's requests split once: all, answered, failed; with the tokens and wall time."""
    all: list[RequestTrace]
    ok: list[RequestTrace]
    failed: list[RequestTrace]
    tokens: int
    wall: float

    @classmethod
    def of(cls, col: Collected) -> _Run:
        ok = _ok(col.run)
        return cls(col.run, ok, [t for t in col.run if not t.ok], sum(t.tokens for t in ok), col.wall_s)

    @property
    def total(self) -> int:
        return len(self.all)

    @property
    def tput(self) -> float | None:
        return self.tokens / self.wall if self.wall > 0 else None

    @property
    def per_chunk(self) -> float | None:
        """Mean completion tokens per delta chunk over the streams that carried usage."""
        chunks = sum(len(t.delta_times) for t in self.ok if not t.usage_missing)
        usage_tokens = sum(t.tokens for t in self.ok if not t.usage_missing)
        return usage_tokens / chunks if chunks else None


def _figures(run: _Run, input_len: int | None) -> dict:
    """Counts, latency distributions, throughput."""
    ok, failed, total, wall = run.ok, run.failed, run.total, run.wall
    data: dict = {"completed": len(ok), "errors": len(failed),
                  "error_rate": round(len(failed) / total, 4) if total else None,
                  "error_examples": [f"request {t.index}: {t.error}" for t in failed[:5]],
                  "wall_s": round(wall, 4), "output_tokens": run.tokens}
    prompt_toks = _vals(ok, "prompt_tokens")
    data["input_tokens"] = None
    if prompt_toks:
        data["input_tokens"] = {"target": input_len, "mean": round(sum(prompt_toks) / len(prompt_toks), 1),
                                "min": min(prompt_toks), "max": max(prompt_toks)}
    data.update(_phase_stats(run.all))
    data["client_queue_ms"] = distribution([t.queued_s for t in ok])
    tput = run.tput
    data["output_tokens_per_s"] = None if tput is None else round(tput, 3)
    data["request_throughput"] = round(len(ok) / wall, 4) if wall > 0 else None
    per_chunk = run.per_chunk
    data["tokens_per_chunk"] = None if per_chunk is None else round(per_chunk, 3)
    return data


def _goodput(cfg: ProbeConfig, run: _Run, data: dict, texts) -> list[Finding]:
    """Share of requests that met every SLO (``data["goodput"]``); a finding when below the required share."""
    if not cfg.slo:
        data["goodput"] = None
        return []
    total, wall = run.total, run.wall
    verdicts = [(_good(t, cfg) if t.ok else None) for t in run.all]
    good = sum(1 for v in verdicts if v is not None and all(v.values()))
    keys = [k for k in SLO_KEYS if getattr(cfg.slo, k) is not None]
    misses = {k: sum(1 for v in verdicts if v is not None and not v[k]) for k in keys}
    ratio = good / total if total else 0.0
    data["goodput"] = {"slo": cfg.slo.to_dict(), "good": good, "requests": total, "ratio": round(ratio, 4),
                       "requests_per_s": round(good / wall, 4) if wall > 0 else None,
                       "min_ratio": cfg.min_goodput, "misses": misses}
    if ratio >= cfg.min_goodput:
        return []
    miss = ", ".join(f"{k} {n}" for k, n in misses.items() if n) or "failed requests"
    if run.failed:
        miss += f", {len(run.failed)} failed"
    return [texts["probe.slo"].make(good=good, total=total, ratio=ratio, min=cfg.min_goodput,
                                    slo=_slo_text(cfg), misses=miss)]


def _invariants(cfg: ProbeConfig, col: Collected, run: _Run, catalog: MetricsCatalog, data: dict,
                texts) -> list[Finding]:
    """The bounds a correct count cannot break (``data["invariants"]``), a finding per broken one."""
    invariants: list[dict] = []
    findings: list[Finding] = []
    for check in (_requested_bound, _throughput_bound, _tokens_vs_engine):
        found = check(cfg, col, run, catalog, texts)
        if found is not None:
            invariants.append(found[0])
            findings += found[1]
    data["invariants"] = invariants
    return findings


def _requested_bound(cfg: ProbeConfig, col: Collected, run: _Run, catalog, texts):
    tput = run.tput
    if tput is None:
        return None
    ok, wall = run.ok, run.wall
    # each request asked for output_len tokens at most (max_tokens): requests x output tokens / wall (docs/sources.md#measured)
    cap = len(ok) * cfg.output_len / wall
    held = tput <= cap * (1 + BOUND_SLACK)
    inv = {"name": "requested_bound", "ok": held, "output_tokens_per_s": round(tput, 3),
           "bound_tokens_per_s": round(cap, 3), "rule": "sum(completion tokens)/wall <= completed x output_len / wall"}
    return inv, [] if held else [texts["probe.requested-bound"].make(tput=tput, done=len(ok), want=cfg.output_len,
                                                                     wall=wall, bound=cap)]


def _throughput_bound(cfg: ProbeConfig, col: Collected, run: _Run, catalog, texts):
    tput, tpots = run.tput, _vals(run.ok, "tpot_s")
    if tput is None or not tpots or min(tpots) <= 0:
        return None
    conc = min(x for x in (cfg.concurrency, max(run.total, 1), cfg.planned_concurrency) if x is not None)
    tpot_min = min(tpots)
    bound = len(run.ok) / run.wall + conc / tpot_min
    held = tput <= bound * (1 + BOUND_SLACK)
    inv = {"name": "throughput_bound", "ok": held, "output_tokens_per_s": round(tput, 3),
           "bound_tokens_per_s": round(bound, 3), "concurrency": conc, "tpot_min_ms": round(tpot_min * 1000, 3),
           "rule": "sum(completion tokens)/wall <= completed/wall + concurrency/min(TPOT)"}
    return inv, [] if held else [texts["probe.throughput-bound"].make(tput=tput, conc=conc, tpot=tpot_min * 1000,
                                                                      wall=run.wall, bound=bound)]


def _tokens_vs_engine(cfg: ProbeConfig, col: Collected, run: _Run, catalog: MetricsCatalog, texts):
    em = catalog.engines.get(col.engine) if col.engine else None
    gen = em.get("generation_tokens") if em else None
    mt = col.metrics
    if mt is None or gen is None or (engine_tokens := mt.counter_diff(gen.name)) is None:
        return None
    held = run.tokens <= engine_tokens
    inv = {"name": "tokens_vs_engine", "ok": held, "client_tokens": run.tokens, "engine_tokens": engine_tokens,
           "counter": gen.name}
    return inv, [] if held else [texts["probe.tokens-vs-engine"].make(client=run.tokens, engine=f"{engine_tokens:g}",
                                                                      counter=gen.name)]


def _engine_counters(cfg: ProbeConfig, col: Collected, catalog: MetricsCatalog, data: dict, texts) -> list[Finding]:
    """The engine's counters over the run (``data["metrics"]``, ``data["spec_acceptance"]``) and their findings."""
    data["spec_acceptance"] = None
    data["metrics"] = None
    em = catalog.engines.get(col.engine) if col.engine else None
    mt = col.metrics
    if em is None or mt is None or mt.after is None:
        return [texts["probe.no-metrics"].make(why=col.metrics_note)] if col.metrics_note else []
    m: dict = {}
    for role in ("preemptions", "kv_transfer_failures", "generation_tokens"):
        met = em.get(role)
        m[role] = None if met is None else mt.counter_diff(met.name)
    kv = em.get("kv_usage")
    m["kv_usage"] = None if kv is None else mt.gauge(kv.name)
    m["samples"] = mt.samples
    data["metrics"] = m
    acc = data["spec_acceptance"] = _acceptance(em, mt, cfg.dataset)
    findings: list[Finding] = []
    if m["preemptions"]:
        findings.append(texts["probe.preemptions"].make(n=m["preemptions"]))
    if m["kv_transfer_failures"]:
        findings.append(texts["probe.kv-transfer-failures"].make(n=m["kv_transfer_failures"]))
    if acc is not None and acc["length"] is not None and acc["length"] < catalog.acceptance_flag_below:
        findings.append(texts["probe.acceptance-low"].make(length=acc["length"], flag=catalog.acceptance_flag_below,
                                                           dataset=cfg.dataset))
    return findings


def kv_traffic(run: list[RequestTrace]):
    """The run's traffic as the KV-transfer verdict counts it (kvtransfer.Traffic)."""
    ok = _ok(run)
    return Traffic(requests=len(run), ok=len(ok), prompt_tokens=tuple(int(v) for v in _vals(ok, "prompt_tokens")))


def _kv_transfer(col: Collected, data: dict, texts) -> list[Finding]:
    """P/D: does KV move from prefill to decode (``data["kv_transfer"]``, probe/kvtransfer.py); an error when it
    does not, a warning when the metrics cannot tell."""
    if col.kv_scrapes is None:
        return []
    v = decide(col.kv_scrapes, kv_traffic(col.run))
    data["kv_transfer"] = v.to_dict()
    if v.status == "True":
        return []
    f = texts["probe.kv-not-moving" if v.status == "False" else "probe.kv-unknown"].make(reason=v.reason,
                                                                                         message=v.message)
    return [Finding(f.rule, f.severity, f.field, f.message, v.fix, f.source)]


def _checks(cfg: ProbeConfig, col: Collected, run: _Run, data: dict, texts) -> list[Finding]:
    """What makes the figures need care: failures, short answers, missing usage, chunked ITL, few samples,
    reasoning before content, a shared prefix."""
    ok, failed, total = run.ok, run.failed, run.total
    findings: list[Finding] = []
    if failed:
        findings.append(texts["probe.errors"].make(failed=len(failed), total=total, rate=len(failed) / total,
                                                   first=failed[0].error))
    short = [t for t in ok if t.tokens < cfg.output_len]
    if short:
        why = "" if col.ignore_eos else " (ignore_eos was not sent: the engine is unknown)"
        findings.append(texts["probe.output-length"].make(short=len(short), total=len(ok), want=cfg.output_len,
                                                          min=min(t.tokens for t in short), why=why))
    missing = [t for t in ok if t.usage_missing]
    if missing:
        findings.append(texts["probe.usage-missing"].make(missing=len(missing), total=len(ok)))
    per_chunk = run.per_chunk
    if per_chunk is not None and per_chunk > MULTI_TOKEN_CHUNKS:
        findings.append(texts["probe.multi-token-chunks"].make(per_chunk=per_chunk))
    findings += _sample_checks(cfg, ok, data, texts)
    return findings


def _sample_checks(cfg: ProbeConfig, ok: list[RequestTrace], data: dict, texts) -> list[Finding]:
    findings: list[Finding] = []
    n = len(ok)
    low = [f"p{p}" for p in (90, 99) if n < min_samples(p)]
    if n and low:
        findings.append(texts["probe.percentiles"].make(n=n, which=" and ".join(low)))
    reasoning_first = [t for t in ok if t.first_content is None or t.first_any < t.first_content]  # type: ignore[operator]
    if reasoning_first and any(t.reasoning_chars for t in reasoning_first):
        cont = data["ttft_content_ms"]["p50"]
        findings.append(texts["probe.reasoning-first"].make(
            n=len(reasoning_first), total=n, ttft=data["ttft_ms"]["p50"],
            content="none (no request reached content)" if cont is None else f"{cont:.1f} ms"))
    if cfg.shared_prefix:
        findings.append(texts["probe.shared-prefix"].make())
    return findings


def _slo_text(cfg: ProbeConfig) -> str:
    return ", ".join(f"{k} <= {v:g} ms" for k, v in cfg.slo.to_dict().items())


def _acceptance(em, mt: MetricsTrace, dataset: str) -> dict | None:
    if em.acceptance == "counters":
        acc, dr = em.get("spec_accepted"), em.get("spec_drafts")
        a, d = mt.counter_diff(acc.name), mt.counter_diff(dr.name)
        if not d:
            return None
        return {"length": round(1 + (a or 0) / d, 4), "accepted_tokens": a, "drafts": d,
                "how": "1 + accepted/drafts over the run (counters)", "dataset": dataset}
    g = em.get("spec_accept_length")
    val = (mt.after or {}).get(g.name)
    if not val:
        return None
    return {"length": round(val, 4), "accepted_tokens": None, "drafts": None,
            "how": f"{g.name} after the run (a gauge of the last batch)", "dataset": dataset}


def _warmup(col: Collected) -> dict:
    w = col.warmup
    ok = _ok(w)
    first = min(ok, key=lambda t: t.start, default=None)  # type: ignore[arg-type,return-value]
    return {"requests": len(w), "completed": len(ok), "errors": len(w) - len(ok),
            "seconds": round(col.warmup_wall_s, 4),
            "first_ttft_ms": None if first is None else round(first.ttft_s * 1000, 3),  # type: ignore[operator]
            "ttft_ms": distribution(_vals(ok, "ttft_s")), "e2el_ms": distribution(_vals(ok, "e2el_s")),
            "error_examples": [f"request {t.index}: {t.error}" for t in w if not t.ok][:3]}
