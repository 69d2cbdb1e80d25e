"""Records of the prediction: the workload, what the engine runs, priced ops, step breakdowns, results."""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field
from typing import Any

from gpustack_k3.errors import InputError, OperationalError

EXTRA_HINT = "install the extra: pip install 'gpustack-k3[predict]' (aiconfigurator-core==0.12.0)"

# breakdown categories of a decode step (the issue's: weights/MoE, attention KV read, communication, draft)
CATEGORIES = ("moe_weights", "dense_weights", "attention_kv", "linear_attention", "communication", "draft", "other")



INLINE_PREFIX = "inline:"   # EngineConfig.model_config of a config carried inline (predict/model.py config_ref)

class PredictError(InputError):
    """A prediction that cannot be made (exit 2): names the input and the way out."""


class EstimatorMissing(OperationalError):
    """The [predict] extra is not installed: the environment, not the input (exit 2, kind operational)."""

    def __init__(self, detail: str = "") -> None:
        self.where = "aiconfigurator-core"
        self.message = f"the estimator is not installed{': ' + detail if detail else ''}"
        self.hint = EXTRA_HINT
        super().__init__(f"{self.where}: {self.message} ({self.hint})")


class NoData(PredictError):
    """The estimator has no measured table for a case; never replaced by a speed-of-light number silently."""


DIST_REQUESTS = 64          # requests simulated from a length distribution when --requests is not given
# bounds of the benchmark simulation (its time is linear in the request-steps: ~1-2 M/s on one core)
MAX_SIM_REQUESTS = 100_000  # requests in one simulated benchmark (--requests, or --concurrency when it sets them)
MAX_SIM_WORK = 10_000_000   # request-steps: sum over requests of (output - 1) / tokens per step + prefill chunks
DIST_HINT = ("give LEN:WEIGHT pairs or observed lengths, comma- or space-separated (e.g. 1024:3,65536:1 or "
             "812,1024,4000), or @FILE holding them")


@dataclass(frozen=True)
class LengthDist:
    """Request lengths as a discrete distribution: (tokens, weight) points, sorted by tokens, weights > 0."""
    points: tuple[tuple[int, float], ...]

    @classmethod
    def fixed(cls, n: int) -> LengthDist:
        return cls(((int(n), 1.0),))

    @classmethod
    def parse(cls, text: str, where: str) -> LengthDist:
        """``LEN[:WEIGHT]`` items separated by commas or whitespace; a bare ``LEN`` weighs 1 (a list of observed
        lengths); a length named twice adds its weights. Errors name ``where`` (the option)."""
        items = [x for x in text.replace(",", " ").split() if x]
        if not items:
            raise PredictError(where, "no lengths given", DIST_HINT)
        acc: dict[int, float] = {}
        for i, item in enumerate(items, 1):
            length, sep, weight = item.partition(":")
            try:
                n = int(length)
                wt = float(weight) if sep else 1.0
            except ValueError:
                raise PredictError(where, f"item {i} {item[:40]!r} is not LEN or LEN:WEIGHT", DIST_HINT) from None
            if n < 1:
                raise PredictError(where, f"item {i} {item[:40]!r}: a length is a positive token count", DIST_HINT)
            if not math.isfinite(wt) or wt <= 0:
                raise PredictError(where, f"item {i} {item[:40]!r}: a weight is a positive number", DIST_HINT)
            acc[n] = acc.get(n, 0.0) + wt
        return cls(tuple(sorted(acc.items())))

    @property
    def varies(self) -> bool:
        return len(self.points) > 1

    @property
    def mean(self) -> float:
        return sum(n * w for n, w in self.points) / sum(w for _, w in self.points)

    @property
    def max(self) -> int:
        return self.points[-1][0]

    def percentile(self, q: float) -> int:
        """Nearest rank: the smallest length whose cumulative weight reaches q of the total."""
        total = sum(w for _, w in self.points)
        run = 0.0
        for n, w in self.points:
            run += w
            if run >= q * total - 1e-9 * total:
                return n
        return self.max

    def sample(self, k: int, rng: random.Random) -> list[int]:
        """``k`` request lengths: each point's exact share of k (largest remainder; ties to the shorter length),
        in an order shuffled by ``rng`` (deterministic for a seed)."""
        total = sum(w for _, w in self.points)
        exact = [k * w / total for _, w in self.points]
        counts = [math.floor(x) for x in exact]
        for i in sorted(range(len(exact)), key=lambda j: (counts[j] - exact[j], j))[:k - sum(counts)]:
            counts[i] += 1
        out = [n for (n, _), c in zip(self.points, counts) for _ in range(c)]
        rng.shuffle(out)
        return out

    def to_dict(self) -> dict:
        return {"mean": round(self.mean, 1), "p50": self.percentile(0.5), "p90": self.percentile(0.9),
                "max": self.max, "points": [[n, w] for n, w in self.points]}


@dataclass
class Workload:
    input: LengthDist | int             # prompt tokens per request (an int: every request the same)
    output: LengthDist | int            # generated tokens per request
    concurrency: int = 1                # closed-loop clients
    requests: int | None = None         # total requests (default: one per client; DIST_REQUESTS for a distribution)
    rate: float | None = None           # open-loop request rate (req/s); None: closed loop
    acceptance_length: float | None = None   # mean tokens committed per verify step
    acceptance_rate: float | None = None     # per-draft-token acceptance probability
    seed: int = 0                       # the sample of per-request lengths from a distribution
    # the acceptance figure's range (LOW, HIGH) when one was given (of the kind given: length or rate); the point
    # figure above is its middle
    acceptance_range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.input, int):
            self.input = LengthDist.fixed(self.input)
        if isinstance(self.output, int):
            self.output = LengthDist.fixed(self.output)

    @property
    def varies(self) -> bool:
        return self.input.varies or self.output.varies

    @property
    def input_len(self) -> int:
        """The mean prompt length (the length itself when fixed)."""
        return round(self.input.mean)

    @property
    def output_len(self) -> int:
        return round(self.output.mean)

    @property
    def clients(self) -> int:
        """Requests in flight at once in the closed loop: the clients, never more than the requests."""
        return max(1, min(self.concurrency, self.total_requests))

    @property
    def requests_option(self) -> str:
        """The option that set the number of requests (for messages)."""
        return "--requests" if self.requests else "--concurrency"

    @property
    def total_requests(self) -> int:
        return self.requests or (max(self.concurrency, DIST_REQUESTS) if self.varies else self.concurrency)

    def request_lengths(self) -> list[tuple[int, int]]:
        """(input, output) tokens of each request in issue order: a deterministic sample for ``seed``; input and
        output lengths drawn independently."""
        rng = random.Random(self.seed)
        k = self.total_requests
        return list(zip(self.input.sample(k, rng), self.output.sample(k, rng)))

    def to_dict(self) -> dict:
        out = {"input_len": self.input_len, "output_len": self.output_len, "concurrency": self.concurrency,
               "requests": self.total_requests, "rate": self.rate, "acceptance_length": self.acceptance_length,
               "acceptance_rate": self.acceptance_rate}
        if self.acceptance_range is not None:
            out["acceptance_range"] = list(self.acceptance_range)
        if self.varies:
            out.update({"input_len_dist": self.input.to_dict(), "output_len_dist": self.output.to_dict(),
                        "seed": self.seed})
        return out


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
    static_verify: bool                  # DSpark + DCP: the full window verified every step (catalog trait)
    role: str = "serve"
    instances: int = 1
    # the config.json the model's op graph is built from (None: the estimator's own config of the catalog model;
    # INLINE_PREFIX + JSON text: a config the document carries inline, spec.model.configJSON)
    model_config: str | None = None
    # MLA geometry the DCP correction reshapes (core.model_config.ModelArch): heads, kv_lora_rank, qk_rope_head_dim,
    # q head dim (nope + rope); None: the model has no MLA
    mla: tuple[int, int, int, int] | None = None

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

    def source_shares(self) -> dict[str, float]:
        """The share of the step time by where its figures come from (silicon: measured table rows; empirical /
        sol: the estimator's model where it has no row)."""
        total = self.ms
        out: dict[str, float] = {}
        for o in self.ops:
            out[o.source] = out.get(o.source, 0.0) + o.ms
        return {k: round(v / total, 4) if total else 0.0 for k, v in sorted(out.items())}

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
