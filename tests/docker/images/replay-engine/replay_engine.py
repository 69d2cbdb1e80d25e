#!/usr/bin/env python3
"""A stand-in engine for the Docker test tier: replay a recorded start-up log, then serve.

It is started exactly like the engine it imitates (the image links ``vllm`` to this file), e.g.
``vllm serve /models/Kimi-K3 --host 127.0.0.1 --port 8000 --served-model-name kimi-k3 ...``.
Only ``--host``, ``--port``, ``--served-model-name`` and the model are read; other flags are
accepted and ignored, as they only shape the real engine.

Environment:
  REPLAY_LOG         the recorded log to print (required)
  REPLAY_SPEED       how many times faster than recorded (default 1; 0 = no waiting at all)
  REPLAY_CRASH_AT    a substring: after printing the first line containing it, print
                     REPLAY_CRASH_TAIL (if set) and exit with REPLAY_EXIT_CODE (default 1)
  REPLAY_CRASH_TAIL  a file of lines printed after the crash point
  REPLAY_RETIME      1 = rewrite each line's timestamp to the (UTC) time it is printed, so the log
                     clock matches the wall clock (as for a live engine); default 0 keeps the recording's
  REPLAY_HOST/REPLAY_PORT  used when --host/--port are absent (defaults 127.0.0.1 / 8000)

After the log (no crash) it serves ``GET /health`` (200, empty body, like vLLM),
``GET /v1/models``, a minimal ``POST /v1/completions`` and ``POST /v1/chat/completions`` (streamed as
vLLM streams: a role chunk, one chunk per token, a usage chunk with ``stream_options.include_usage``,
``[DONE]``) until SIGTERM/SIGINT.
Standard library only (the image carries Debian's python3).
"""
from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from datetime import datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# vLLM: "INFO 11-27 17:06:34 [file:line] ..." (no year); SGLang: "[2026-11-27 17:06:34(.mmm)? TP0] ..."
VLLM_TS = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")
SGLANG_TS = re.compile(r"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?")


def line_time(line: str) -> float | None:
    """Seconds (arbitrary epoch) of the timestamp a line carries, or None."""
    m = SGLANG_TS.search(line)
    if m:
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        frac = float("0." + m.group(7)) if m.group(7) else 0.0
        return datetime(y, mo, d, h, mi, s).timestamp() + frac
    m = VLLM_TS.search(line)
    if m:
        mo, d, h, mi, s = (int(g) for g in m.groups())
        return datetime(2000, mo, d, h, mi, s).timestamp()  # vLLM prints no year
    return None


def schedule(lines: list[str]) -> list[float]:
    """Offset in recorded seconds of every line from the first timestamp. Lines without a timestamp
    (tqdm bars, uvicorn, tracebacks) are interpolated between their timestamped neighbours; time
    never runs backwards (interleaved processes can print slightly out of order)."""
    stamps = [line_time(x) for x in lines]
    known = [i for i, t in enumerate(stamps) if t is not None]
    if not known:
        return [0.0] * len(lines)
    out: list[float] = []
    for i, t in enumerate(stamps):
        if t is None:
            before = max((k for k in known if k < i), default=None)
            after = min((k for k in known if k > i), default=None)
            if before is None:
                t = stamps[after]
            elif after is None:
                t = stamps[before]
            else:
                t = stamps[before] + (stamps[after] - stamps[before]) * (i - before) / (after - before)
        out.append(t)
    t0 = out[0]
    offsets: list[float] = []
    last = 0.0
    for t in out:
        last = max(last, t - t0)
        offsets.append(last)
    return offsets


def retime(line: str, now: float) -> str:
    """The line with its timestamp replaced by ``now`` (UTC), in the same format."""
    m = SGLANG_TS.search(line)
    if m:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now))
        if m.group(7):
            stamp += "." + f"{now % 1:.6f}"[2:2 + len(m.group(7))]
        return line[:m.start()] + "[" + stamp + line[m.end():]
    m = VLLM_TS.search(line)
    if m:
        return line[:m.start(1)] + time.strftime("%m-%d %H:%M:%S", time.gmtime(now)) + line[m.end(5):]
    return line


def parse_args(argv: list[str]) -> dict:
    """The few engine arguments the replay needs; everything else is accepted and ignored."""
    opts = {"host": os.environ.get("REPLAY_HOST", "127.0.0.1"),
            "port": int(os.environ.get("REPLAY_PORT", "8000")), "model": None, "served": None}
    i = 0
    while i < len(argv):
        tok = argv[i]
        key, _, inline = tok.partition("=")
        if key in ("--host", "--port", "--served-model-name", "--model", "--model-path"):
            val = inline if inline else (argv[i + 1] if i + 1 < len(argv) else "")
            i += 1 if inline else 2
            if key == "--host":
                opts["host"] = val
            elif key == "--port":
                opts["port"] = int(val)
            elif key == "--served-model-name":
                opts["served"] = val
            else:
                opts["model"] = val
            continue
        if not tok.startswith("-") and tok != "serve" and opts["model"] is None and (i == 0 or not argv[i - 1].startswith("-")):
            opts["model"] = tok
        i += 1
    opts["served"] = opts["served"] or opts["model"] or "replay"
    return opts


def replay(path: str, speed: float, crash_at: str | None, crash_tail: str | None, exit_code: int,
           retime_lines: bool = False) -> None:
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    offsets = schedule(lines)
    start = time.monotonic()
    for line, off in zip(lines, offsets):
        if speed > 0:
            delay = start + off / speed - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        sys.stdout.write((retime(line, time.time()) if retime_lines else line) + "\n")
        sys.stdout.flush()
        if crash_at and crash_at in line:
            if crash_tail:
                with open(crash_tail, encoding="utf-8", errors="replace") as f:
                    for tail_line in f.read().splitlines():
                        sys.stdout.write((retime(tail_line, time.time()) if retime_lines else tail_line) + "\n")
                sys.stdout.flush()
            sys.exit(exit_code)
    if crash_at:
        sys.stderr.write(f"replay: REPLAY_CRASH_AT {crash_at!r} never matched in {path}\n")
        sys.exit(exit_code)


class Handler(BaseHTTPRequestHandler):
    served_name = "replay"
    protocol_version = "HTTP/1.1"
    counter = 0

    def log_request(self, code="-", size="-") -> None:  # uvicorn's access-log shape
        code = int(code) if str(code).isdigit() else 0
        phrase = HTTPStatus(code).phrase if code in HTTPStatus._value2member_map_ else ""
        sys.stdout.write(f'INFO:     {self.client_address[0]}:{self.client_address[1]} - "{self.requestline}" '
                         f"{code} {phrase}\n")
        sys.stdout.flush()

    def _send(self, code: int, body: dict | None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, None)
        elif self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.served_name, "object": "model", "owned_by": "replay"}]})
        else:
            self._send(404, {"error": {"message": f"Not Found: {self.path}", "type": "NotFoundError", "code": 404}})

    def _chat(self) -> None:
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            text = str(req["messages"][-1]["content"])
            max_tokens = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            self._send(400, {"error": {"message": f"invalid request: {exc}", "type": "BadRequestError", "code": 400}})
            return
        words = text.split()
        usage = {"prompt_tokens": len(words) + 5, "completion_tokens": max_tokens,   # 5: a chat template's tokens
                 "total_tokens": len(words) + 5 + max_tokens}
        Handler.counter += 1
        rid = f"chatcmpl-replay-{Handler.counter}"
        if not req.get("stream"):
            self._send(200, {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": self.served_name,
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": " replay" * max_tokens},
                                          "finish_reason": "length"}], "usage": usage})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def event(delta: dict | None, **extra) -> None:
            body = {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()), "model": self.served_name,
                    "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": None}], **extra}
            self.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
            self.wfile.flush()
        event({"role": "assistant", "content": ""})
        for _ in range(max_tokens):
            time.sleep(0.002)
            event({"content": " replay"})
        if (req.get("stream_options") or {}).get("include_usage"):
            event(None, usage=usage)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def do_POST(self) -> None:
        if self.path == "/v1/chat/completions":
            self._chat()
            return
        if self.path != "/v1/completions":
            self._send(404, {"error": {"message": f"Not Found: {self.path}", "type": "NotFoundError", "code": 404}})
            return
        try:
            req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            prompt = req["prompt"]
            max_tokens = int(req.get("max_tokens", 16))
        except (ValueError, KeyError, TypeError) as exc:
            self._send(400, {"error": {"message": f"invalid request: {exc}", "type": "BadRequestError", "code": 400}})
            return
        if req.get("model") not in (None, self.served_name):
            self._send(404, {"error": {"message": f"The model `{req.get('model')}` does not exist.",
                                       "type": "NotFoundError", "code": 404}})
            return
        prompt_words = str(prompt if isinstance(prompt, str) else " ".join(map(str, prompt))).split()
        words = list(reversed(prompt_words))[:max_tokens] or ["replay"]  # deterministic, prompt-derived
        Handler.counter += 1
        self._send(200, {
            "id": f"cmpl-replay-{Handler.counter}", "object": "text_completion", "created": int(time.time()),
            "model": self.served_name,
            "choices": [{"index": 0, "text": " " + " ".join(words), "logprobs": None,
                         "finish_reason": "length" if len(words) >= max_tokens else "stop"}],
            "usage": {"prompt_tokens": len(prompt_words), "completion_tokens": len(words),
                      "total_tokens": len(prompt_words) + len(words)},
        })


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # PID 1 in a container ignores SIGTERM otherwise
    opts = parse_args(argv)
    log = os.environ.get("REPLAY_LOG")
    if not log or not os.path.isfile(log):
        sys.stderr.write(f"replay: REPLAY_LOG={log!r} is not a file; set it to a recorded engine log\n")
        return 2
    speed = float(os.environ.get("REPLAY_SPEED", "1"))
    replay(log, speed, os.environ.get("REPLAY_CRASH_AT") or None, os.environ.get("REPLAY_CRASH_TAIL") or None,
           int(os.environ.get("REPLAY_EXIT_CODE", "1")), os.environ.get("REPLAY_RETIME", "0") == "1")
    Handler.served_name = opts["served"]
    server = ThreadingHTTPServer((opts["host"], opts["port"]), Handler)
    server.daemon_threads = True
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
