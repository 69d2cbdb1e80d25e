"""One streamed OpenAI-compatible response → timings and token counts (pure: bytes and timestamps in).

Definitions (docs/sources.md#probe-definitions; vllm benchmarks/lib/endpoint_request_func.py@0.32.0):

* **TTFT** = time from sending the request to the first chunk carrying *any* delta: non-empty ``content``,
  ``reasoning``, ``reasoning_content``, ``tool_calls`` or ``function_call`` (the completions API: non-empty
  ``text``). A reasoning model streams its thinking as ``delta.reasoning`` first (``--reasoning-parser``), and
  the server has produced tokens from that moment on: counting only ``content`` overstates TTFT by the whole
  thinking time, or reports nothing at all when the answer never reaches content (GPUStack's benchmark,
  docs/sources.md#measured argues for this definition). A role-only first chunk (``{"role": "assistant",
  "content": ""}``) carries no token and does not count.
* **TTFT to content** = the same up to the first non-empty ``content``, reported separately.
* **e2e latency** = up to the last chunk carrying a delta (the trailing usage chunk and ``[DONE]`` carry
  none), as ``vllm bench serve`` measures it.
* **tokens** = ``usage.completion_tokens`` of the final usage chunk (``stream_options.include_usage``);
  without usage, the number of delta-carrying chunks stands in (a lower bound when chunks carry several
  tokens) and ``usage_missing`` says so.
* **TPOT** = (e2e − TTFT) / (tokens − 1); **ITL** = the gaps between delta-carrying chunks (chunk gaps, not
  token gaps, when a chunk carries several tokens: speculative decoding, ``--stream-interval``).
"""
from __future__ import annotations

import codecs
import itertools
import json
import re
from dataclasses import dataclass, field

from gpustack_k3.api.v1alpha1.constants import MIB
from gpustack_k3.errors import OperationalError

MAX_EVENT_BYTES = 16 * MIB     # one SSE event larger than this is not a token chunk
_EOL = re.compile(r"[\r\n]")


class StreamError(OperationalError):
    pass


class SSEDecoder:
    """Server-sent events from bytes in any chunking: yields the ``data`` of each event (multi-line data
    joined by newlines, comments skipped). Lines may end in LF, CRLF or CR."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._buf = ""
        self._data: list[str] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[str]:
        self._buf += self._utf8.decode(chunk)
        out: list[str] = []
        while True:
            m = _EOL.search(self._buf)
            if m is None:
                break
            cut = m.start()
            line = self._buf[:cut]
            skip = 2 if self._buf[cut] == "\r" and self._buf[cut + 1:cut + 2] == "\n" else 1
            if self._buf[cut] == "\r" and cut + 1 == len(self._buf):
                break      # a CR at the very end may be the first half of CRLF: wait for the next byte
            self._buf = self._buf[cut + skip:]
            self._line(line, out)
        self._size = len(self._buf) + sum(len(d) for d in self._data)
        if self._size > MAX_EVENT_BYTES:
            raise StreamError(f"one server-sent event exceeds {MAX_EVENT_BYTES} bytes")
        return out

    def close(self) -> list[str]:
        """End of stream: a last event without its blank line still counts."""
        out: list[str] = []
        self._buf += self._utf8.decode(b"", final=True)
        if self._buf:
            self._line(self._buf.rstrip("\r"), out)
            self._buf = ""
        if self._data:
            out.append("\n".join(self._data))
            self._data = []
        return out

    def _line(self, line: str, out: list[str]) -> None:
        if line == "":
            if self._data:
                out.append("\n".join(self._data))
                self._data = []
            return
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value.removeprefix(" "))


def _text(v: object) -> bool:
    return isinstance(v, str) and v != ""


def delta_carries(choice: dict, api: str) -> tuple[bool, bool]:
    """(carries any delta, carries content) for one streamed choice."""
    if api == "completions":
        t = _text(choice.get("text"))
        return t, t
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return False, False
    content = _text(delta.get("content"))
    reasoning = _text(delta.get("reasoning")) or _text(delta.get("reasoning_content"))
    tools = bool(delta.get("tool_calls")) or bool(delta.get("function_call"))
    return content or reasoning or tools, content


@dataclass
class RequestTrace:
    """Everything the report needs from one request. Times are seconds on one monotonic clock."""
    index: int
    api: str = "chat"
    queued_s: float = 0.0              # waiting for a concurrency slot (client-side queue)
    start: float | None = None         # request sent
    status: int | None = None
    first_any: float | None = None
    first_content: float | None = None
    last_delta: float | None = None
    delta_times: list[float] = field(default_factory=list)
    reasoning_chars: int = 0
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    done: bool = False
    error: str | None = None

    # -- feeding
    def on_event(self, data: str, t: float) -> None:
        if self.error is not None:
            return
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(data)
        except ValueError:
            self.fail(f"chunk is not JSON: {data[:120]!r}")
            return
        if not isinstance(obj, dict):
            self.fail(f"chunk is not a JSON object: {data[:120]!r}")
            return
        if obj.get("error") is not None or obj.get("object") == "error":
            err = obj.get("error") if isinstance(obj.get("error"), dict) else obj
            self.fail(f"error in stream: {str(err.get('message') or err)[:200]}")
            return
        for ch in obj.get("choices") or []:
            if not isinstance(ch, dict):
                continue
            anyd, content = delta_carries(ch, self.api)
            if anyd:
                if self.first_any is None:
                    self.first_any = t
                self.last_delta = t
                self.delta_times.append(t)
            if content and self.first_content is None:
                self.first_content = t
            if self.api == "chat" and isinstance(ch.get("delta"), dict):
                d = ch["delta"]
                for k in ("reasoning", "reasoning_content"):
                    self.reasoning_chars += len(d[k]) if isinstance(d.get(k), str) else 0
        usage = obj.get("usage")
        if isinstance(usage, dict):
            ct, pt = usage.get("completion_tokens"), usage.get("prompt_tokens")
            if isinstance(ct, int) and not isinstance(ct, bool) and ct >= 0:
                self.completion_tokens = ct
            if isinstance(pt, int) and not isinstance(pt, bool) and pt >= 0:
                self.prompt_tokens = pt

    def fail(self, msg: str) -> None:
        if self.error is None:
            self.error = msg

    def end_of_stream(self) -> None:
        if self.error is None and not self.done:
            self.fail("the stream ended without [DONE]")
        elif self.error is None and self.first_any is None:
            self.fail("no chunk carried a delta (content, reasoning or tool calls)")

    # -- derived
    @property
    def ok(self) -> bool:
        return self.error is None and self.first_any is not None and self.start is not None

    @property
    def usage_missing(self) -> bool:
        return self.completion_tokens is None

    @property
    def tokens(self) -> int:
        return self.completion_tokens if self.completion_tokens is not None else len(self.delta_times)

    @property
    def ttft_s(self) -> float | None:
        return None if not self.ok else self.first_any - self.start  # type: ignore[operator]

    @property
    def ttft_content_s(self) -> float | None:
        return None if not self.ok or self.first_content is None else self.first_content - self.start  # type: ignore[operator]

    @property
    def e2el_s(self) -> float | None:
        return None if not self.ok else self.last_delta - self.start  # type: ignore[operator]

    @property
    def tpot_s(self) -> float | None:
        if not self.ok or self.tokens < 2:
            return None
        return (self.e2el_s - self.ttft_s) / (self.tokens - 1)  # type: ignore[operator]

    @property
    def itl_s(self) -> list[float]:
        ts = self.delta_times
        return [b - a for a, b in itertools.pairwise(ts)]
