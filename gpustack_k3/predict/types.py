"""Records of the prediction: the workload, what the engine runs, priced ops, step breakdowns, results."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpustack_k3.core.errors import InputError

EXTRA_HINT = "install the extra: pip install 'gpustack-k3[predict]' (aiconfigurator-core==0.12.0)"

# breakdown categories of a decode step (the issue's: weights/MoE, attention KV read, communication, draft)
CATEGORIES = ("moe_weights", "dense_weights", "attention_kv", "linear_attention", "communication", "draft", "other")


class PredictError(InputError):
    """A prediction that cannot be made (exit 2): names the input and the way out."""


class EstimatorMissing(PredictError):
    def __init__(self, detail: str = "") -> None:
        super().__init__("aiconfigurator-core", f"the estimator is not installed{': ' + detail if detail else ''}",
                         EXTRA_HINT)


class NoData(PredictError):
    """The estimator has no measured table for a case; never replaced by a speed-of-light number silently."""


@dataclass
class Workload:
    input_len: int
    output_len: int
    concurrency: int = 1                # closed-loop clients
    requests: int | None = None         # total requests (default: one per client)
    rate: float | None = None           # open-loop request rate (req/s); None: closed loop
    acceptance_length: float | None = None   # mean tokens committed per verify step
    acceptance_rate: float | None = None     # per-draft-token acceptance probability

    @property
    def total_requests(self) -> int:
        return self.requests or self.concurrency


@dataclass
class EngineConfig:
    """What one role's engine really runs, read from the resolved spec."""
    engine: str
    version: str
    gpu: str
    model: str
    tp: int
    dcp: int
    ep: int                              # MoE expert-parallel size (1: MoE tensor-parallel)
    drafts: int                          # speculative tokens per step (0: none)
    spec_method: str
    kv_dtype: str                        # "fp8" or "bfloat16"
    max_num_seqs: int
    max_batched_tokens: int
    long_prefill_threshold: int          # vLLM: 0 = whole budget; SGLang: not used
    dcp_comm: str                        # ag_rs | a2a
    custom_allreduce: bool
    static_verify: bool                  # SGLang + DCP: full window verified every step
    role: str = "serve"
    instances: int = 1

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class OpCost:
    name: str
    category: str
    ms: float
    source: str                          # AIC's: silicon (measured rows), empirical / sol (no rows)
    batch: int
    s: int
    table: str                           # which AIC database priced it
    corrections: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "category": self.category, "ms": round(self.ms, 4), "source": self.source,
                "batch": self.batch, "s": self.s, "table": self.table, "corrections": self.corrections}


@dataclass
class StepBreakdown:
    ops: list[OpCost]
    assumptions: list[str]

    @property
    def ms(self) -> float:
        return sum(o.ms for o in self.ops)

    def by_category(self) -> dict[str, float]:
        out = dict.fromkeys(CATEGORIES, 0.0)
        for o in self.ops:
            out[o.category] = out.get(o.category, 0.0) + o.ms
        return out

    def not_measured(self) -> list[dict[str, Any]]:
        return [{"op": o.name, "ms": round(o.ms, 4), "source": o.source} for o in self.ops if o.source != "silicon"]

    def to_dict(self) -> dict:
        total = self.ms
        nm = self.not_measured()
        return {"step_ms": round(total, 3),
                "breakdown_ms": {k: round(v, 3) for k, v in self.by_category().items()},
                "not_measured": nm,
                "not_measured_share": round(sum(x["ms"] for x in nm) / total, 4) if total else 0.0,
                "ops": [o.to_dict() for o in self.ops]}
