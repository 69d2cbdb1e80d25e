"""A step-level model of the engine's scheduler, run as a closed-loop (or fixed-rate) benchmark.

Policies (docs/design/003-predict.md#scheduler-model), each assumption named in ``ASSUMPTIONS``:

* vLLM (``v1/core/sched/scheduler.py:754-1062@0.33.0``): one token budget per step (``max-num-batched-tokens``);
  RUNNING requests first, in admission order, each taking what it needs (drafts+1 rows for a decode, the rest of
  its prompt for a prefill) capped at ``long_prefill_token_threshold`` when > 0 and more than one request is
  eligible; then WAITING requests are admitted FCFS up to ``max-num-seqs`` while budget is left. A step's time = the
  prefill forward of its chunk tokens + the decode forward of its rows.
* SGLang (``managers/scheduler.py:3894-4000@0.5.23`` get_next_batch_to_run): a new prefill batch (up to
  ``chunked-prefill-size`` tokens, FCFS, possibly spanning requests) runs
  before decode whenever a request waits (no mixed chunk, the default); otherwise all running requests decode.
* First delta: the token sampled at the end of prefill is the reasoning start marker, which the reasoning parser
  turns into no delta (seed 001 section 10: `--reasoning-parser kimi_k3`); the client's first delta arrives with
  the request's first decode step.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG

ASSUMPTIONS = {
    "vllm-budget": "vLLM step (scheduler.py:754-1062@0.33.0): running requests first in admission order (decode: "
                   "drafts+1 rows; prefill: the rest of the prompt capped by long_prefill_token_threshold), then "
                   "waiting requests admitted FCFS while budget is left; step = prefill forward + decode forward",
    "sglang-prefill-first": "SGLang step: a prefill batch (chunked-prefill-size tokens) whenever a request waits, "
                            "else one decode step of all running requests",
    "first-delta-after-decode": "the first sampled token opens the reasoning section and yields no delta under "
                                "--reasoning-parser: TTFT ends with the request's first decode step",
    "multi-request-chunk": "a prefill forward spanning several requests is priced as one chunk of their tokens at "
                           "their token-weighted mean prefix",
}

PROGRESS_STEPS = 4096      # simulate() reports progress every this many steps


def work(lengths: Sequence[tuple[int, int]], budget: int, tokens_per_step: float) -> int:
    """Request-steps a run of these requests simulates (each running request is visited once per step it takes
    part in): its decode steps (output - 1) / tokens per step, plus its prefill chunks of ``budget``. The
    simulation's time is linear in this figure."""
    return sum(math.ceil(max(0, o - 1) / tokens_per_step) + math.ceil(i / max(1, budget)) for i, o in lengths)


@dataclass
class Policy:
    engine: str
    budget: int
    long_prefill_threshold: int
    max_num_seqs: int
    drafts: int
    tokens_per_step: float
    first_delta_after_decode: bool = True


@dataclass
class Req:
    idx: int
    arrival: float
    input_len: int
    output_len: int
    prefilled: int = 0
    generated: float = 0.0
    prefill_done_at: float | None = None
    first_delta_at: float | None = None
    done_at: float | None = None
    decode_steps: int = 0
    chunks: list[dict] = field(default_factory=list)

    @property
    def prefilling(self) -> bool:
        return self.prefilled < self.input_len


@dataclass
class SimResult:
    requests: list[Req]
    end_s: float
    steps: int
    steady_decode_step_ms: float | None

    def ttfts(self) -> list[float]:
        return [(r.first_delta_at or r.done_at or 0.0) - r.arrival for r in self.requests]

    def latencies(self) -> list[float]:
        return [(r.done_at or 0.0) - r.arrival for r in self.requests]


class _Run:
    """One benchmark run's state: the queues, the clock, and the step counters ``simulate`` advances."""

    def __init__(self, policy: Policy, lengths: Sequence[tuple[int, int]], concurrency: int,
                 rate: float | None) -> None:
        self.policy, self.lengths, self.concurrency, self.rate = policy, lengths, concurrency, rate
        self.requests = len(lengths)
        self.t = 0.0
        self.issued = 0
        self.pending: deque[Req] = deque()    # arrived, not admitted
        self.running: list[Req] = []
        self.done: list[Req] = []
        self.arrivals: deque[float] = deque()
        self.steady: list[float] = []
        if rate is None:
            for _ in range(min(concurrency, self.requests)):
                self.pending.append(self.issue(0.0))
        else:
            self.arrivals = deque(i / rate for i in range(self.requests))

    def issue(self, arrival: float) -> Req:
        r = Req(self.issued, arrival, *self.lengths[self.issued])
        self.issued += 1
        return r

    def arrive(self) -> None:
        """Open loop: requests whose arrival time has come join the queue."""
        while self.arrivals and self.arrivals[0] <= self.t + 1e-12:
            self.pending.append(self.issue(self.arrivals.popleft()))

    def idle(self) -> bool:
        """Nothing to run: the clock moves to the next arrival (True), else False."""
        if self.running or self.pending:
            return False
        self.t = self.arrivals[0] if self.arrivals else self.t
        return True

    def plan_sglang(self) -> tuple[list[tuple[Req, int]], list[Req]]:
        """SGLang: admit up to max-num-seqs; a prefill batch when a prompt is unfinished, else decode them all."""
        while self.pending and len(self.running) < self.policy.max_num_seqs:
            self.running.append(self.pending.popleft())
        chunks: list[tuple[Req, int]] = []
        budget = self.policy.budget
        for r in self.running:
            if r.prefilling and budget > 0:
                n = min(r.input_len - r.prefilled, budget)
                chunks.append((r, n))
                budget -= n
        return chunks, ([] if chunks else [r for r in self.running if not r.prefilling])

    def plan_vllm(self) -> tuple[list[tuple[Req, int]], list[Req]]:
        """vLLM: running requests first (prefill chunk or decode rows), then admissions while budget is left."""
        pol = self.policy
        budget = pol.budget
        eligible = len(self.running) + len(self.pending)
        cap = pol.long_prefill_threshold if pol.long_prefill_threshold > 0 and eligible > 1 else pol.budget
        chunks: list[tuple[Req, int]] = []
        decoders: list[Req] = []
        for r in self.running:
            if budget <= 0:
                break
            if r.prefilling:
                n = min(r.input_len - r.prefilled, cap, budget)
                chunks.append((r, n))
                budget -= n
            elif budget >= pol.drafts + 1:
                decoders.append(r)
                budget -= pol.drafts + 1
        while self.pending and len(self.running) < pol.max_num_seqs and budget > 0:
            r = self.pending.popleft()
            self.running.append(r)
            n = min(r.input_len, cap, budget)
            chunks.append((r, n))
            budget -= n
        return chunks, decoders

    def price(self, chunks: list[tuple[Req, int]], decoders: list[Req], decode_ms: Callable[[int, int], float],
              prefill_ms: Callable[[int, int], float]) -> float:
        """The step's time: its prefill forward plus its decode forward (each chunk records its share)."""
        step_ms = 0.0
        if chunks:
            tokens = sum(n for _, n in chunks)
            prefix = round(sum(r.prefilled * n for r, n in chunks) / tokens)
            pms = prefill_ms(tokens, prefix)
            step_ms += pms
            for r, n in chunks:
                r.chunks.append({"tokens": n, "prefix": r.prefilled, "step_tokens": tokens, "ms": pms})
        if decoders:
            ctx = round(sum(r.input_len + r.generated for r in decoders) / len(decoders))
            dms = decode_ms(len(decoders), ctx)
            step_ms += dms
            if not chunks and len(decoders) == min(self.concurrency, self.policy.max_num_seqs, self.requests):
                self.steady.append(dms)
        return step_ms

    def advance(self, chunks: list[tuple[Req, int]], decoders: list[Req], step_ms: float) -> None:
        """The clock moves by the step; prompts and outputs grow; finished requests leave (closed loop: the
        client sends its next)."""
        self.t += step_ms / 1000.0
        t = self.t
        for r, n in chunks:
            r.prefilled += n
            if not r.prefilling:
                r.prefill_done_at = t
                r.generated = 1.0
                if not self.policy.first_delta_after_decode:
                    r.first_delta_at = t
        for r in decoders:
            r.generated += self.policy.tokens_per_step
            r.decode_steps += 1
            if r.first_delta_at is None:
                r.first_delta_at = t
        for r in [r for r in self.running if not r.prefilling and r.generated >= r.output_len]:
            r.done_at = t
            self.running.remove(r)
            self.done.append(r)
            if self.rate is None and self.issued < self.requests:
                self.pending.append(self.issue(t))

    def result(self, steps: int) -> SimResult:
        steady_ms = sorted(self.steady)[len(self.steady) // 2] if self.steady else None
        return SimResult(sorted(self.done, key=lambda r: r.idx), self.t, steps, steady_ms)


def simulate(policy: Policy, *, lengths: Sequence[tuple[int, int]], concurrency: int,
             rate: float | None, decode_ms: Callable[[int, int], float],
             prefill_ms: Callable[[int, int], float], max_steps: int = 2_000_000,
             on_progress: Callable[[int, int], None] | None = None) -> SimResult:
    """Run the benchmark. ``lengths``: (input, output) tokens of each request, in the order they are issued;
    ``decode_ms(rows_requests, mean_context)``: a decode step of that many requests;
    ``prefill_ms(tokens, prefix)``: a prefill forward of ``tokens`` new tokens after ``prefix`` cached ones;
    ``on_progress(done, requests)``: called every ``PROGRESS_STEPS`` steps. The cost is linear in the request-steps
    (``work``); callers bound it before running."""
    run = _Run(policy, lengths, concurrency, rate)
    plan = run.plan_sglang if policy.engine == ENGINE_SGLANG else run.plan_vllm
    steps = 0
    while len(run.done) < run.requests:
        steps += 1
        if steps > max_steps:
            break
        if on_progress is not None and steps % PROGRESS_STEPS == 0:
            on_progress(len(run.done), run.requests)
        run.arrive()
        if run.idle():
            continue
        chunks, decoders = plan()
        run.advance(chunks, decoders, run.price(chunks, decoders, decode_ms, prefill_ms))
    return run.result(steps)
