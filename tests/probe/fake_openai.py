"""A tiny OpenAI-compatible server on 127.0.0.1 (stdlib http.server, one thread per request) whose timing
and faults the test sets: prefill delay, per-token delay, reasoning deltas before content (as vLLM streams
them with --reasoning-parser: ``delta.reasoning``), several tokens per chunk, missing usage, a bad JSON
chunk, HTTP 500s, /health down, and a vLLM- or SGLang-style /metrics whose token counter counts what was
really streamed. Known timings are the ground truth the probe's figures are checked against.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Behaviour:
    served: str = "fake-model"
    prefill_s: float = 0.05            # request received -> first token
    token_s: float = 0.004             # between tokens
    reasoning_tokens: int = 0          # the first N tokens stream as delta.reasoning
    reasoning_field: str = "reasoning"
    think_gap_s: float = 0.0           # extra pause between the last reasoning and the first content token
    tokens_per_chunk: int = 1
    usage: bool = True                 # honour stream_options.include_usage
    usage_scale: int = 1               # >1: usage claims more tokens than were streamed (a lying server)
    eos_after: int | None = None       # without ignore_eos the answer ends after this many tokens
    template_tokens: int = 7           # the chat template's tokens around a prompt (1 token per word)
    bad_json_at: set[int] = field(default_factory=set)     # request numbers (0-based) that get a broken chunk
    status_for: dict[int, int] = field(default_factory=dict)   # request number -> HTTP status
    health: int = 200
    metrics: str | None = "vllm"       # "vllm" | "sglang" | None (404)
    role_chunk: bool = True            # vLLM sends {"role": "assistant", "content": ""} first
    spec: tuple[int, int] | None = None    # (accepted, drafts) added per request to the vLLM spec counters
    preempt_every: int = 0             # count one preemption every N requests
    api_key: str | None = None         # /v1/* answers 401 without "Authorization: Bearer <key>"


class FakeOpenAI:
    def __init__(self, behaviour: Behaviour | None = None, port: int = 0) -> None:
        self.b = behaviour or Behaviour()
        self.lock = threading.Lock()
        self.requests = 0               # completion requests seen (streamed or not)
        self.streamed = 0
        self.generated = 0              # tokens really sent (the engine counter)
        self.active = 0
        self.peak_active = 0
        self.accepted = self.drafts = 0
        self.preemptions = 0
        self.bodies: list[dict] = []
        # x-request-id -> {"recv": t, "writes": [(t, "role"|"reasoning"|"content"|"usage")]} on time.perf_counter,
        # the clock the probe stamps with: the ground truth a trace is checked against
        self.timeline: dict[str, dict] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a) -> None:
                pass

            def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _denied(self) -> bool:
                key = server.b.api_key
                if key and self.path.startswith("/v1/") and self.headers.get("Authorization") != f"Bearer {key}":
                    self._send(401, b'{"error": "Unauthorized"}')
                    return True
                return False

            def do_GET(self) -> None:
                b = server.b
                if self._denied():
                    return
                if self.path == "/health":
                    self._send(b.health, b"" if b.health == 200 else b"loading")
                elif self.path == "/v1/models":
                    self._send(200, json.dumps({"object": "list", "data": [{"id": b.served, "object": "model"}]}).encode())
                elif self.path == "/metrics" and b.metrics:
                    self._send(200, server.exposition().encode(), "text/plain; version=0.0.4")
                else:
                    self._send(404, b'{"detail":"Not Found"}')

            def do_POST(self) -> None:
                recv = time.perf_counter()
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                body["_rid"], body["_recv"] = self.headers.get("x-request-id"), recv
                if self._denied():
                    return
                with server.lock:
                    k = server.requests
                    server.requests += 1
                    server.bodies.append(body)
                chat = self.path.endswith("/chat/completions")
                code = server.b.status_for.get(k)
                if code:
                    self._send(code, json.dumps({"object": "error", "message": f"injected {code}"}).encode())
                    return
                if body.get("stream"):
                    server.stream(self, body, k, chat)
                else:
                    server.complete(self, body, chat)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:  # noqa: PYI034 - a test helper, not subclassed
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- what the server "computes"
    def _prompt_tokens(self, body: dict, chat: bool) -> int:
        text = body["messages"][-1]["content"] if chat else body.get("prompt", "")
        return len(str(text).split()) + (self.b.template_tokens if chat else 0)

    def _out_tokens(self, body: dict) -> int:
        want = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        if body.get("ignore_eos") or self.b.eos_after is None:
            return want
        return min(want, self.b.eos_after)

    def complete(self, h, body: dict, chat: bool) -> None:
        out = self._out_tokens(body)
        time.sleep(self.b.prefill_s + self.b.token_s * (out - 1))
        with self.lock:
            self.generated += out
        choice = ({"index": 0, "message": {"role": "assistant", "content": "tok " * out}, "finish_reason": "length"}
                  if chat else {"index": 0, "text": "tok " * out, "finish_reason": "length"})
        doc = {"id": "x", "object": "chat.completion" if chat else "text_completion", "model": self.b.served,
               "choices": [choice]}
        if self.b.usage:
            pt = self._prompt_tokens(body, chat)
            doc["usage"] = {"prompt_tokens": pt, "completion_tokens": out, "total_tokens": pt + out}
        h._send(200, json.dumps(doc).encode())

    def stream(self, h, body: dict, k: int, chat: bool) -> None:
        b = self.b
        out = self._out_tokens(body)
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True

        rec = {"recv": body["_recv"], "writes": []}
        if body.get("_rid"):
            with self.lock:
                self.timeline[body["_rid"]] = rec

        def send(obj, kind: str = "other") -> None:
            data = obj if isinstance(obj, str) else json.dumps(obj)
            rec["writes"].append((time.perf_counter(), kind))   # stamped before the bytes leave: a reader's
            h.wfile.write(f"data: {data}\n\n".encode())       # stamp can only be later
            h.wfile.flush()

        def chunk(delta: dict | None, text: str | None = None, finish: str | None = None) -> dict:
            ch = ({"index": 0, "delta": delta, "finish_reason": finish} if chat
                  else {"index": 0, "text": text or "", "finish_reason": finish})
            return {"id": f"r{k}", "object": "chat.completion.chunk" if chat else "text_completion",
                    "model": b.served, "choices": [ch], "usage": None}

        with self.lock:
            self.streamed += 1
            self.active += 1
            self.peak_active = max(self.peak_active, self.active)
            if b.spec:
                self.accepted += b.spec[0]
                self.drafts += b.spec[1]
            if b.preempt_every and self.streamed % b.preempt_every == 0:
                self.preemptions += 1
        try:
            time.sleep(b.prefill_s)
            if chat and b.role_chunk:
                send(chunk({"role": "assistant", "content": ""}), "role")
            sent = 0
            while sent < out:
                n = min(b.tokens_per_chunk, out - sent)
                if sent > 0:
                    time.sleep(b.token_s * n)
                field_ = b.reasoning_field if sent < b.reasoning_tokens else "content"
                if sent > 0 and sent == b.reasoning_tokens:
                    time.sleep(b.think_gap_s)
                text = "tok " * n
                send(chunk({field_: text}, text, "length" if sent + n == out else None),
                     "content" if field_ == "content" else "reasoning")
                if k in b.bad_json_at and sent == 0:
                    send('{"choices": [ {"delta": ')          # a truncated JSON chunk
                sent += n
                with self.lock:
                    self.generated += n
            if b.usage and (body.get("stream_options") or {}).get("include_usage"):
                pt = self._prompt_tokens(body, chat)
                send({"id": f"r{k}", "object": "chat.completion.chunk", "model": b.served, "choices": [],
                      "usage": {"prompt_tokens": pt, "completion_tokens": out * b.usage_scale,
                                "total_tokens": pt + out * b.usage_scale}})
            send("[DONE]")
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with self.lock:
                self.active -= 1

    def serve_forever(self) -> None:
        """Serve in this thread (a child process standing in for an engine)."""
        self.httpd.serve_forever()

    def exposition(self) -> str:
        with self.lock:
            gen, act, pre, acc, dr = self.generated, self.active, self.preemptions, self.accepted, self.drafts
        lab = f'{{model_name="{self.b.served}",engine="0"}}'
        if self.b.metrics == "sglang":
            return (f"# TYPE sglang:generation_tokens_total counter\nsglang:generation_tokens_total{lab} {gen}.0\n"
                    f"# TYPE sglang:token_usage gauge\nsglang:token_usage{lab} {act / 10}\n"
                    f"sglang:num_retracted_requests_total{lab} {pre}.0\n"
                    + (f"sglang:spec_accept_length{lab} {1 + acc / dr}\n" if dr else ""))
        return ("# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
                "# TYPE vllm:generation_tokens_total counter\n"
                f"vllm:generation_tokens_total{lab} {gen}.0\n"
                f"vllm:num_preemptions_total{lab} {pre}.0\n"
                f"vllm:kv_cache_usage_perc{lab} {act / 10}\n"
                f"vllm:spec_decode_num_accepted_tokens_total{lab} {acc}.0\n"
                f"vllm:spec_decode_num_drafts_total{lab} {dr}.0\n"
                'vllm:request_success_total{finished_reason="length",model_name="x y"} 3.0\n')
