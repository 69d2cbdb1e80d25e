"""The probe's pure core: what to send (configuration, request plan) and how to summarise a sample
(percentiles with their sample count). No I/O; the HTTP edge is ``gpustack_k3.probe.client``."""
from __future__ import annotations

import math
import random
import statistics
import zlib
from dataclasses import dataclass, field, replace
from typing import Literal

from gpustack_k3.errors import InputError

# Bounds: a probe is a check, not a load generator. Beyond these the options are refused (exit 2).
MAX_REQUESTS = 100_000
MAX_CONCURRENCY = 4096
MAX_INPUT_LEN = 2_000_000
MAX_OUTPUT_LEN = 1_000_000
MAX_WARMUP = 10_000
SLO_KEYS = ("ttft", "tpot", "e2el")


@dataclass(frozen=True)
class Slo:
    """Service-level objectives in milliseconds; a request is "good" only if it meets every one set
    (``vllm bench serve --goodput``, benchmarks/serve.py:669-690)."""
    ttft: float | None = None
    tpot: float | None = None
    e2el: float | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.ttft, self.tpot, self.e2el))

    def to_dict(self) -> dict:
        return {f"{k}_ms": getattr(self, k) for k in SLO_KEYS if getattr(self, k) is not None}


def parse_slo(text: str | None, where: str = "--slo") -> Slo:
    """``ttft=MS,tpot=MS,e2el=MS`` (any subset) → Slo; InputError naming the bad part otherwise."""
    if text is None or not text.strip():
        return Slo()
    vals: dict[str, float] = {}
    for part in text.split(","):
        key, sep, val = part.strip().partition("=")
        key = key.strip().lower()
        if not sep or key not in SLO_KEYS:
            raise InputError(where, f"{part.strip()!r} is not KEY=MILLISECONDS",
                             f"use e.g. ttft=2000,tpot=50,e2el=30000 (keys: {', '.join(SLO_KEYS)})")
        if key in vals:
            raise InputError(where, f"{key} given twice", "give each key once")
        try:
            ms = float(val)
        except ValueError:
            raise InputError(where, f"{key}={val!r} is not a number of milliseconds", "use e.g. ttft=2000") from None
        if not math.isfinite(ms) or ms <= 0:
            raise InputError(where, f"{key}={val} must be a positive number of milliseconds", "use e.g. ttft=2000")
        vals[key] = ms
    return Slo(**vals)


@dataclass(frozen=True)
class ProbeConfig:
    requests: int = 32
    concurrency: int = 8
    input_len: int = 256
    output_len: int = 64
    warmup: int = 2
    slo: Slo = field(default_factory=Slo)
    min_goodput: float = 1.0                  # SLO check: this share of requests must be good
    model: str | None = None                  # served name; None: the only/first one /v1/models lists
    api: Literal["chat", "completions"] = "chat"
    shared_prefix: bool = False               # True: every request sends the same prompt (prefix cache warm)
    prompts: tuple[str, ...] | None = None    # a dataset instead of synthetic filler text
    dataset: str = "synthetic"                # named in the report and in the acceptance finding
    planned_concurrency: int | None = None    # the spec's maxNumSeqs (engine-side bound on running requests)
    request_timeout_s: float = 600.0
    metrics_interval_s: float = 1.0           # /metrics read this often during the run (KV peak); 0: never

    def check(self) -> ProbeConfig:
        def bound(opt: str, v: int, lo: int, hi: int) -> None:
            if not lo <= v <= hi:
                raise InputError(opt, f"{v} is outside {lo}..{hi}", f"give a value between {lo} and {hi}")
        bound("--requests", self.requests, 1, MAX_REQUESTS)
        bound("--concurrency", self.concurrency, 1, MAX_CONCURRENCY)
        bound("--input-len", self.input_len, 1, MAX_INPUT_LEN)
        bound("--output-len", self.output_len, 1, MAX_OUTPUT_LEN)
        bound("--warmup", self.warmup, 0, MAX_WARMUP)
        if not 0.0 <= self.min_goodput <= 1.0:
            raise InputError("--min-goodput", f"{self.min_goodput} is not a share between 0 and 1", "e.g. 0.95")
        if not (math.isfinite(self.request_timeout_s) and self.request_timeout_s > 0):
            raise InputError("--timeout", f"{self.request_timeout_s} is not a positive number of seconds", "e.g. 600")
        if not (math.isfinite(self.metrics_interval_s) and self.metrics_interval_s >= 0):
            raise InputError("--metrics-interval", f"{self.metrics_interval_s} is not a number of seconds >= 0",
                             "e.g. 1, or 0 to read /metrics only before and after the run")
        if self.prompts is not None and not self.prompts:
            raise InputError("--prompts", "the file holds no prompt", "one JSON string or {\"prompt\": ...} per line")
        return self

    def with_(self, **kw) -> ProbeConfig:
        return replace(self, **kw)


# ---------------------------------------------------------------------------------------- request plan
# Filler text for synthetic prompts: common short English words, most of which are one token for BPE
# tokenizers; the exact tokens per word is measured (calibrate) rather than assumed.
FILLER = (
    "time", "year", "people", "way", "day", "man", "thing", "woman", "life", "child", "world", "school",
    "state", "family", "student", "group", "country", "problem", "hand", "part", "place", "case", "week",
    "company", "system", "program", "question", "work", "government", "number", "night", "point", "home",
    "water", "room", "mother", "area", "money", "story", "fact", "month", "lot", "right", "study", "book",
    "eye", "job", "word", "business", "issue", "side", "kind", "head", "house", "service", "friend", "father",
    "power", "hour", "game", "line", "end", "member", "law", "car", "city", "community", "name", "president",
    "team", "minute", "idea", "kid", "body", "information", "back", "parent", "face", "others", "level",
    "office", "door", "health", "person", "art", "war", "history", "party", "result", "change", "morning",
    "reason", "research", "girl", "guy", "moment", "air", "teacher", "force", "education",
)


def request_prefix(run_id: str, phase: str, index: int) -> str:
    """The unique start of one request's prompt: no two requests (nor two runs) share a prefix-cache block."""
    return f"probe {run_id} {phase} {index}:"


def prompt_text(prefix: str, words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join([prefix, *(rng.choice(FILLER) for _ in range(words))])


CALIBRATION_WORDS = 64


def filler_words(input_len: int, tokens_short: int, tokens_long: int, words_long: int = CALIBRATION_WORDS) -> int:
    """Words of filler that make a prompt of about ``input_len`` tokens, from two measured prompts: the bare
    prefix (``tokens_short`` prompt tokens, chat template included) and the prefix with ``words_long`` words."""
    per_word = (tokens_long - tokens_short) / words_long if words_long > 0 else 0.0
    if per_word <= 0:
        return max(0, input_len - tokens_short)
    return max(0, round((input_len - tokens_short) / per_word))


@dataclass(frozen=True)
class PlannedRequest:
    phase: str          # "warmup" | "run"
    index: int
    prompt: str


def plan_requests(cfg: ProbeConfig, run_id: str, words: int, phase: str, count: int) -> list[PlannedRequest]:
    """The prompts of one phase: dataset prompts in order (cycled), else unique-prefix filler text (or one
    shared prompt with ``shared_prefix``)."""
    out = []
    for i in range(count):
        if cfg.prompts is not None:
            text = cfg.prompts[i % len(cfg.prompts)]
        elif cfg.shared_prefix:
            text = prompt_text(request_prefix(run_id, "shared", 0), words, 0)
        else:
            text = prompt_text(request_prefix(run_id, phase, i), words, zlib.crc32(f"{phase} {i}".encode()))
        out.append(PlannedRequest(phase, i, text))
    return out


def payload(cfg: ProbeConfig, model: str, prompt: str, *, max_tokens: int, stream: bool,
            ignore_eos: bool) -> dict:
    """The request body: fixed output length (``ignore_eos`` where the engine honours it), usage in the
    stream (``stream_options.include_usage``), as ``vllm bench serve`` sends it."""
    body: dict = {"model": model, "max_tokens": max_tokens, "stream": stream}
    if cfg.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if stream:
        body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True
    return body


# ---------------------------------------------------------------------------------------- statistics
PERCENTILES = (50, 90, 99)


def percentile(sorted_vals: list[float], p: float) -> float:
    """The p-th percentile by ``statistics.quantiles(method="inclusive")``: linear interpolation between closest
    ranks (numpy's default, what ``vllm bench serve`` uses). ``p`` is a whole percent."""
    if not sorted_vals:
        raise ValueError("no values")
    if len(sorted_vals) == 1:
        return sorted_vals[0]
    return statistics.quantiles(sorted_vals, n=100, method="inclusive")[int(p) - 1]


def min_samples(p: float) -> int:
    """Samples needed before the p-th percentile differs from the maximum: at least one sample must lie
    above it (p90: 10, p99: 100). With 10 requests a "P99" is the maximum (research §D)."""
    return math.ceil(100 / (100 - p) - 1e-9)


def distribution(values_s: list[float]) -> dict:
    """{"p50","p90","p99","max","mean","n"} in milliseconds; ``unsupported`` lists the percentiles that
    ``n`` cannot support (they are still given, but they are the maximum or close to it)."""
    vals = sorted(v * 1000.0 for v in values_s)
    n = len(vals)
    out: dict = {f"p{p}": (round(percentile(vals, p), 3) if n else None) for p in PERCENTILES}
    out["max"] = round(vals[-1], 3) if n else None
    out["mean"] = round(sum(vals) / n, 3) if n else None
    out["n"] = n
    low = [f"p{p}" for p in PERCENTILES if n < min_samples(p)]
    if low and n:
        out["unsupported"] = low
    return out
