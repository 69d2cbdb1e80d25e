"""Recommend a preset for a context length, a concurrency and a priority (the write-up's crossover data)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.plan import plan
from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.rules import validate


@dataclass
class Advice:
    preset: str | None
    engine: str | None
    reason: str
    capacity: dict[str, float]
    source: str
    findings: list[dict] = field(default_factory=list)   # the rule findings behind a refusal (none: no preset)

    def to_dict(self) -> dict:
        return asdict(self)


def beyond_context(tokens: int) -> list[dict]:
    """The rules' error findings for a launch of the advice's first preset serving ``tokens`` tokens (the
    ``context-above-model`` refusal when the model's context is shorter): what an advice beyond it refuses on."""
    cat = load_catalog()
    doc = DeploymentDocument.model_validate(cat.presets[next(iter(cat.advice.presets.values()))[0]].document)
    doc.spec.scheduling.maxModelLen = tokens
    return [f.to_dict() for f in validate(doc) if f.severity == "error"]


def _capacity(preset: str, context: int) -> float:
    cat = load_catalog()
    doc = DeploymentDocument.model_validate(cat.presets[preset].document)
    doc.spec.scheduling.maxModelLen = context
    return plan(resolve(doc)).max_concurrency


def _k(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else f"{n / 1000:g}K"


def advise(context: int, concurrency: int, priority: str = "throughput") -> Advice:
    cat = load_catalog()
    adv = cat.advice
    longest = cat.models["kimi-k3"].max_context
    if context > longest:
        return Advice(None, None, f"{context:,} tokens is beyond Kimi-K3's context of {longest:,}: no preset can "
                      "serve it; shorten the input", {}, adv.source, beyond_context(context))
    # nearest measured context in log space
    ctxs = sorted({m.context for m in adv.measurements})
    near = min(ctxs, key=lambda c: abs(math.log(c) - math.log(context)))
    rows = {m.engine: m for m in adv.measurements if m.context == near}
    if priority == "throughput":
        winner = max(rows.values(), key=lambda m: m.decode_tok_s)
        other = min(rows.values(), key=lambda m: m.decode_tok_s)
        why = (f"at {_k(near)} input {winner.engine} decoded {winner.decode_tok_s:g} tok/s vs "
               f"{other.engine} {other.decode_tok_s:g} (10 streams)")
    else:
        winner = min(rows.values(), key=lambda m: m.ttft_ms)
        other = max(rows.values(), key=lambda m: m.ttft_ms)
        why = (f"at {_k(near)} input {winner.engine} TTFT {winner.ttft_ms / 1000:.1f} s vs "
               f"{other.engine} {other.ttft_ms / 1000:.1f} s")
    capacity = {}
    order = [winner.engine, other.engine]
    for eng in order:
        for name in adv.presets[eng]:
            cap = _capacity(name, context)
            capacity[name] = round(cap, 2)
            if cap >= concurrency:
                if eng != winner.engine:
                    why += (f"; but no {winner.engine} preset holds {concurrency} requests of {context:,} tokens, "
                            f"{name} holds {cap:.1f}")
                else:
                    why += f"; {name} holds {cap:.1f} full-length requests (>= {concurrency})"
                if context not in ctxs and not (min(ctxs) <= context <= max(ctxs)):
                    why += f" (measurements cover {_k(min(ctxs))}-{_k(max(ctxs))}: re-test at {_k(context)})"
                return Advice(name, eng, why, capacity, adv.source)
    return Advice(None, None, f"no preset holds {concurrency} concurrent requests of {context:,} tokens on one node; "
                  "lower the concurrency or the context", capacity, adv.source)
