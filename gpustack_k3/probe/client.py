"""The probe's HTTP edge: stages, warm-up and the streamed run against an OpenAI-compatible server
(httpx, asyncio; bounded request counts, response sizes and timeouts). Everything it measures goes into
``report.Collected``; ``report.summarize`` turns that into figures and findings.

Stages, in order (docs/sources.md#probe-definitions); a failed stage ends the probe (exit 2):
``health`` (GET /health answers 200), ``models`` (GET /v1/models lists the served name), ``metrics``
(GET /metrics names the engine: ``vllm:`` or ``sglang:``; optional: a gateway has none), ``completion``
(one non-streamed request returns choices and usage; a second one measures tokens per filler word so
synthetic prompts come out at the asked input length), then the warm-up requests (reported apart) and
the streamed run with /metrics sampled before, during and after.
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from gpustack_k3.api.v1alpha1.constants import MIB
from gpustack_k3.errors import InputError
from gpustack_k3.probe.catalog import load_metrics_catalog
from gpustack_k3.probe.core import (
    CALIBRATION_WORDS,
    ProbeConfig,
    filler_words,
    payload,
    plan_requests,
    prompt_text,
    request_prefix,
)
from gpustack_k3.probe.kvtransfer import Scrape, decide, metrics_text, metrics_unreachable, parse_samples
from gpustack_k3.probe.metrics import MetricsTrace, detect_engine, parse_exposition
from gpustack_k3.probe.report import (
    Collected,
    ProbeReport,
    Stage,
    kv_traffic,
    summarize,
)
from gpustack_k3.probe.stream import RequestTrace, SSEDecoder, StreamError

MAX_BODY = 8 * MIB         # /metrics, /v1/models, a non-streamed completion: bounded reads
STAGE_TIMEOUT_S = 30.0
COUNTER_SETTLE_S = (0.25, 0.5, 1.0)   # re-read /metrics when the engine's token counter lags the last answer


@dataclass(frozen=True)
class Paths:
    """Where the server answers. A gateway without /health or /metrics: set them to None (stage skipped)."""
    health: str | None = "/health"
    api: str = "/v1"
    metrics: str | None = "/metrics"


def base_url(url: str, where: str = "URL") -> str:
    """``http(s)://host[:port][/prefix]`` without a trailing ``/`` or ``/v1``; InputError otherwise."""
    try:
        u = urlsplit(url.strip())
        _ = u.port
    except ValueError as exc:
        raise InputError(where, f"{url!r} is not a URL: {exc}", "give e.g. http://127.0.0.1:8000") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise InputError(where, f"{url!r} is not an http(s) URL with a host", "give e.g. http://127.0.0.1:8000")
    if u.query or u.fragment:
        raise InputError(where, f"{url!r} has a query or fragment", "give the server's base URL only")
    path = u.path.rstrip("/")
    path = path.removesuffix("/v1")
    return f"{u.scheme}://{u.netloc}{path}"


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Unusable(Exception):
    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage, self.message = stage, message


class _Session:
    def __init__(self, base: str, cfg: ProbeConfig, api_key: str | None, paths: Paths, transport,
                 on_progress: Callable[[str], None] | None) -> None:
        import httpx

        self.base, self.cfg, self.paths = base, cfg, paths
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.clock = time.perf_counter
        self.say = on_progress or (lambda _m: None)
        self.catalog = load_metrics_catalog()
        self.run_id = ""
        # proxies from the environment only for non-loopback servers (a loopback probe never leaves the host)
        self.http = httpx.AsyncClient(
            transport=transport, trust_env=not _loopback(base), headers=self.headers,
            timeout=httpx.Timeout(STAGE_TIMEOUT_S, read=cfg.request_timeout_s),
            limits=httpx.Limits(max_connections=cfg.concurrency + 4, max_keepalive_connections=cfg.concurrency + 4))

    # -- small reads
    async def _get(self, path: str) -> tuple[int, bytes]:
        async with self.http.stream("GET", self.base + path, timeout=STAGE_TIMEOUT_S) as resp:
            return resp.status_code, await _read_limited(resp, MAX_BODY)

    async def _post_json(self, path: str, body: dict) -> tuple[int, bytes]:
        async with self.http.stream("POST", self.base + path, json=body) as resp:
            return resp.status_code, await _read_limited(resp, MAX_BODY)

    async def stage(self, col: Collected, name: str, fn):
        import httpx

        t0 = self.clock()
        try:
            detail = await fn()
        except _Unusable as exc:
            col.stages.append(Stage(name, False, (self.clock() - t0) * 1000, exc.message))
            raise
        except (httpx.HTTPError, OSError) as exc:
            msg = f"{self.base}: {type(exc).__name__}: {exc or 'connection failed'}"
            col.stages.append(Stage(name, False, (self.clock() - t0) * 1000, msg))
            raise _Unusable(name, msg) from None
        col.stages.append(Stage(name, True, (self.clock() - t0) * 1000, detail))
        self.say(f"{name}: {detail}")
        return detail

    async def scrape_text(self, base: str) -> tuple[str | None, str]:
        """``base``'s /metrics as text, or (None, why)."""
        import httpx

        try:
            async with self.http.stream("GET", base + "/metrics", timeout=STAGE_TIMEOUT_S) as resp:
                body = await _read_limited(resp, MAX_BODY)
                code = resp.status_code
        except (httpx.HTTPError, OSError) as exc:
            return metrics_unreachable(base, exc)
        return metrics_text(base, code, body)

    async def scrape(self) -> dict[str, float] | None:
        import httpx

        if self.paths.metrics is None:
            return None
        try:
            code, body = await self._get(self.paths.metrics)
        except (httpx.HTTPError, OSError):
            return None
        return parse_exposition(body.decode("utf-8", "replace")) if code == 200 else None

    # -- one streamed request
    async def stream_one(self, body: dict, trace: RequestTrace, request_id: str) -> None:
        import httpx

        path = self.base + self.paths.api + ("/chat/completions" if self.cfg.api == "chat" else "/completions")
        trace.start = self.clock()
        try:
            async with asyncio.timeout(self.cfg.request_timeout_s):
                # x-request-id: the engine logs it, so a slow request can be found in the server's log
                async with self.http.stream("POST", path, json=body, headers={"x-request-id": request_id}) as resp:
                    trace.status = resp.status_code
                    if resp.status_code != 200:
                        text = (await _read_limited(resp, 600)).decode("utf-8", "replace").strip()
                        trace.fail(f"HTTP {resp.status_code}: {text[:300]}")
                        return
                    dec = SSEDecoder()
                    async for chunk in resp.aiter_bytes():
                        t = self.clock()
                        for ev in dec.feed(chunk):
                            trace.on_event(ev, t)
                        if trace.error is not None:
                            return
                    for ev in dec.close():
                        trace.on_event(ev, self.clock())
                    trace.end_of_stream()
        except TimeoutError:
            trace.fail(f"no complete answer within {self.cfg.request_timeout_s:g} s")
        except StreamError as exc:
            trace.fail(str(exc))
        except (httpx.HTTPError, OSError) as exc:
            trace.fail(f"{type(exc).__name__}: {exc or 'connection failed'}")

    async def run_phase(self, phase: str, bodies: list[dict], concurrency: int, sampler: MetricsTrace | None = None
                        ) -> tuple[list[RequestTrace], float]:
        sem = asyncio.Semaphore(concurrency)
        traces = [RequestTrace(i, api=self.cfg.api) for i in range(len(bodies))]

        async def one(i: int) -> None:
            q0 = self.clock()
            async with sem:
                traces[i].queued_s = self.clock() - q0
                await self.stream_one(bodies[i], traces[i], f"probe-{self.run_id}-{phase}-{i}")

        stop = asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                try:
                    await asyncio.wait_for(stop.wait(), self.cfg.metrics_interval_s)
                except TimeoutError:
                    vals = await self.scrape()
                    if vals is not None and sampler is not None:
                        sampler.sample(vals)

        bg = asyncio.create_task(sample()) if sampler is not None and self.cfg.metrics_interval_s > 0 else None
        t0 = self.clock()
        try:
            await asyncio.gather(*(one(i) for i in range(len(bodies))))
        finally:
            wall = self.clock() - t0
            stop.set()
            if bg is not None:
                await bg
        return traces, wall


async def _read_limited(resp, limit: int) -> bytes:
    out = bytearray()
    async for chunk in resp.aiter_bytes():
        out += chunk
        if len(out) >= limit:
            break
    return bytes(out[:limit])


def _json(body: bytes, what: str, stage: str) -> object:
    try:
        return json.loads(body)
    except ValueError:
        raise _Unusable(stage, f"{what} is not JSON: {body[:160]!r}") from None


async def _collect(url: str, cfg: ProbeConfig, api_key: str | None, paths: Paths, transport,
                   on_progress, run_id: str, sides: tuple[tuple[str, str], ...] = ()) -> Collected:
    s = _Session(url, cfg, api_key, paths, transport, on_progress)
    s.run_id = run_id
    col = Collected(endpoint=url, model=cfg.model)
    state: dict = {"run_id": run_id}
    try:
        async with s.http:
            await _stages(s, col, state)
            words = state.get("words", 0)
            model = col.model or ""
            if cfg.warmup:
                plan = plan_requests(cfg, run_id, words, "warmup", cfg.warmup)
                bodies = [payload(cfg, model, p.prompt, max_tokens=cfg.output_len, stream=True,
                                  ignore_eos=col.ignore_eos) for p in plan]
                col.warmup, col.warmup_wall_s = await s.run_phase("warmup", bodies, min(cfg.concurrency, cfg.warmup))
                s.say(f"warm-up: {sum(t.ok for t in col.warmup)}/{cfg.warmup} requests in {col.warmup_wall_s:.2f} s")
            mt = MetricsTrace() if col.engine is not None else None
            if mt is not None:
                mt.before = await s.scrape()
            plan = plan_requests(cfg, run_id, words, "run", cfg.requests)
            bodies = [payload(cfg, model, p.prompt, max_tokens=cfg.output_len, stream=True,
                              ignore_eos=col.ignore_eos) for p in plan]
            before = [(role, url, *(await s.scrape_text(url))) for role, url in sides]
            col.run, col.wall_s = await s.run_phase("run", bodies, cfg.concurrency, sampler=mt)
            s.say(f"run: {sum(t.ok for t in col.run)}/{cfg.requests} requests in {col.wall_s:.2f} s")
            if sides:
                col.kv_scrapes = await _kv_scrapes(s, col, before)
            if mt is not None and mt.before is not None:
                mt.after = await s.scrape()
                await _settle_counter(s, col, mt)
                col.metrics = mt
    except _Unusable as exc:
        col.unusable = f"stage {exc.stage}: {exc.message}"
    return col


async def _kv_scrapes(s: _Session, col: Collected, before: list[tuple[str, str, str | None, str]]) -> list:
    """Every prefill's and decode's /metrics after the run, paired with the one before (kvtransfer.Scrape). The
    engines count a request's KV as they hand out its answer: re-read a few times while the verdict is not
    True, so a counter that lags the last answer is not read as KV that did not move."""
    async def read() -> list:
        out = []
        for role, url, text0, why0 in before:
            text1, why1 = await s.scrape_text(url)
            both = text0 is not None and text1 is not None
            out.append(Scrape(role, url, parse_samples(text0) if both else None,  # type: ignore[arg-type]
                              parse_samples(text1) if both else None,  # type: ignore[arg-type]
                              "" if both else (why0 or why1)))
        return out

    scrapes = await read()
    traffic = kv_traffic(col.run)
    for pause in COUNTER_SETTLE_S:
        if decide(scrapes, traffic).status == "True" or any(sc.before is None for sc in scrapes):
            break
        await asyncio.sleep(pause)
        scrapes = await read()
    s.say(f"kv transfer: read /metrics of {len(scrapes)} engine(s) before and after the run")
    return scrapes


async def _settle_counter(s: _Session, col: Collected, mt: MetricsTrace) -> None:
    """The engine updates its token counter as it hands out the answer: re-read /metrics a few times
    before concluding that the client counted more tokens than the engine generated."""
    em = s.catalog.engines.get(col.engine or "")
    gen = em.get("generation_tokens") if em else None
    if gen is None:
        return
    client = sum(t.tokens for t in col.run if t.ok)
    for pause in COUNTER_SETTLE_S:
        d = mt.counter_diff(gen.name)
        if d is None or d >= client:
            return
        await asyncio.sleep(pause)
        mt.after = await s.scrape() or mt.after


async def _stages(s: _Session, col: Collected, state: dict) -> None:
    cfg, p = s.cfg, s.paths

    async def health() -> str:
        if p.health is None:
            return "skipped (no health path)"
        code, body = await s._get(p.health)
        if code != 200:
            raise _Unusable("health", f"GET {s.base}{p.health} answered {code}: {body[:200].decode('utf-8', 'replace')}"
                                      " (is the server up and done loading?)")
        return f"GET {p.health} 200"
    await s.stage(col, "health", health)

    async def models() -> str:
        code, body = await s._get(p.api + "/models")
        if code != 200:
            raise _Unusable("models", f"GET {s.base}{p.api}/models answered {code}"
                                      + (" (pass the key with --api-key-env VAR)" if code in (401, 403) else ""))
        doc = _json(body, "the model list", "models")
        ids = [m.get("id") for m in (doc.get("data") if isinstance(doc, dict) else None) or []
               if isinstance(m, dict) and isinstance(m.get("id"), str)]
        if not ids:
            raise _Unusable("models", f"GET {s.base}{p.api}/models lists no model")
        if cfg.model is not None and cfg.model not in ids:
            raise _Unusable("models", f"the server does not serve {cfg.model!r}; it serves {', '.join(ids)} (--model)")
        col.model = cfg.model or ids[0]
        more = f" (of {len(ids)}: {', '.join(ids)}; --model picks another)" if len(ids) > 1 and cfg.model is None else ""
        return f"serves {col.model}{more}"
    await s.stage(col, "models", models)

    async def metrics() -> str:
        if p.metrics is None:
            col.metrics_note = "was not read (no metrics path)"
            return "skipped"
        code, body = await s._get(p.metrics)
        if code != 200:
            col.metrics_note = f"answered {code}"
            return col.metrics_note
        vals = parse_exposition(body.decode("utf-8", "replace"))
        col.engine = detect_engine(vals, s.catalog)
        if col.engine is None:
            col.metrics_note = "names neither a vllm: nor an sglang: metric"
            return col.metrics_note
        # both OpenAI servers take ignore_eos: vllm benchmarks/lib/endpoint_request_func.py:129-135@0.32.0 sends
        # it, as sglang python/sglang/bench_serving.py does to its /v1 endpoints ("ignore_eos": not
        # args.disable_ignore_eos)
        col.ignore_eos = True
        return f"engine {col.engine} ({len(vals)} metric names)"
    await s.stage(col, "metrics", metrics)

    async def completion() -> str:
        path = p.api + ("/chat/completions" if cfg.api == "chat" else "/completions")
        short = request_prefix(state["run_id"], "check", 0)
        body = payload(cfg, col.model or "", short, max_tokens=min(8, cfg.output_len), stream=False,
                       ignore_eos=col.ignore_eos)
        code, raw = await s._post_json(path, body)
        if code != 200:
            raise _Unusable("completion", f"POST {s.base}{path} answered {code}: "
                                          f"{raw[:300].decode('utf-8', 'replace')}")
        doc = _json(raw, "the completion", "completion")
        if not isinstance(doc, dict) or not doc.get("choices"):
            raise _Unusable("completion", f"POST {s.base}{path} returned no choices: {raw[:200]!r}")
        usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else {}
        p_short, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if not isinstance(ct, int):
            state["words"] = cfg.input_len
            return "answered without usage: prompts sized at one token per word"
        if cfg.prompts is not None:
            return f"usage: {ct} completion tokens"
        long = prompt_text(request_prefix(state["run_id"], "check", 1), CALIBRATION_WORDS, 1)
        code, raw = await s._post_json(path, payload(cfg, col.model or "", long, max_tokens=1, stream=False,
                                                     ignore_eos=False))
        doc = _json(raw, "the calibration completion", "completion") if code == 200 else {}
        p_long = ((doc.get("usage") or {}) if isinstance(doc, dict) else {}).get("prompt_tokens")
        if not (isinstance(p_short, int) and isinstance(p_long, int)):
            state["words"] = cfg.input_len
            return f"usage: {ct} completion tokens; no prompt_tokens to size prompts (one token per word assumed)"
        state["words"] = filler_words(cfg.input_len, p_short, p_long)
        per_word = (p_long - p_short) / CALIBRATION_WORDS
        return (f"usage: {ct} completion tokens; prompt template {p_short} tokens, {per_word:.2f} tokens/word "
                f"-> {state['words']} filler words for {cfg.input_len} input tokens")
    await s.stage(col, "completion", completion)


def collect(url: str, cfg: ProbeConfig, *, api_key: str | None = None, paths: Paths = Paths(),
            transport=None, on_progress: Callable[[str], None] | None = None, run_id: str | None = None,
            prefill: tuple[str, ...] = (), decode: tuple[str, ...] = ()) -> Collected:
    """The raw results of probing ``url`` (blocking; runs its own event loop, so call it from a thread that has
    none). Requests carry ``x-request-id: probe-<run id>-<warmup|run>-<index>``. ``url`` a P/D router: the
    ``prefill`` and ``decode`` engines' /metrics are read right before and after the run (the KV-transfer
    verdict, probe/kvtransfer.py)."""
    cfg.check()
    sides = tuple([("prefill", base_url(u, "--prefill")) for u in prefill]
                  + [("decode", base_url(u, "--decode")) for u in decode])
    return asyncio.run(_collect(base_url(url), cfg, api_key, paths, transport, on_progress,
                                run_id or uuid.uuid4().hex[:8], sides))


def run_probe(url: str, cfg: ProbeConfig, **kw) -> ProbeReport:
    """Probe ``url`` and summarise: the report (``to_dict()``, ``exit_code``). Keywords as ``collect``."""
    return summarize(cfg, collect(url, cfg, **kw))
