"""Local-process runtime against small real child processes (no engine needed, seconds)."""
from __future__ import annotations

import os
import sys
import textwrap
import time

import pytest

from gpustack_k3.runtime.local import LocalProcess, LocalRuntimeError
from tests.support.ports import free_port

# A child that prints, serves 503 on /health for `delay` seconds, then 200; spawns a grandchild
# (like vLLM's EngineCore) that stays in the same process group.
SERVER = textwrap.dedent(
    """
    import http.server, subprocess, sys, time
    port, delay = int(sys.argv[1]), float(sys.argv[2])
    t0 = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("grandchild", child.pid, flush=True)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            ok = self.path == "/health" and time.monotonic() - t0 >= delay
            self.send_response(200 if ok else 503); self.end_headers()
        def log_message(self, *a):
            print("GET", self.path, flush=True)
    print("listening", flush=True)
    http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


def test_ready_output_and_group_stop():
    port = free_port()
    chunks: list[bytes] = []
    proc = LocalProcess([sys.executable, "-c", SERVER, str(port), "1.5"], port=port, on_output=chunks.append)
    proc.start()
    try:
        out = proc.wait_ready(30, interval_s=0.2)
        assert out.ready, out.reason
        assert out.elapsed_s >= 1.0 and out.polls >= 2  # 503s were seen before the 200
    finally:
        code = proc.stop(grace_s=5)
    text = b"".join(chunks).decode()
    assert "listening" in text and "GET /health" in text
    grandchild = int(text.split("grandchild ")[1].split()[0])
    with pytest.raises(ProcessLookupError):  # the whole process group is gone
        os.kill(grandchild, 0)
    assert code == -15  # SIGTERM ended it (HTTPServer has no handler)


def test_exit_before_ready_reports_code():
    port = free_port()
    chunks: list[bytes] = []
    proc = LocalProcess([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"],
                        port=port, on_output=chunks.append)
    proc.start()
    out = proc.wait_ready(30, interval_s=0.1)
    assert not out.ready and out.exit_code == 3 and "exited with code 3" in out.reason
    assert proc.stop() == 3
    assert b"boom" in b"".join(chunks)


def test_timeout_then_sigkill_when_sigterm_ignored():
    port = free_port()
    script = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"
    proc = LocalProcess([sys.executable, "-c", script], port=port)
    proc.start()
    out = proc.wait_ready(1.0, interval_s=0.2)
    assert not out.ready and out.exit_code is None and "within 1s" in out.reason
    t0 = time.monotonic()
    assert proc.stop(grace_s=1.0) == -9
    assert 0.9 <= time.monotonic() - t0 < 10


def test_callback_error_is_reported_at_stop():
    def bad(_chunk: bytes) -> None:
        raise RuntimeError("tracker broke")

    proc = LocalProcess([sys.executable, "-c", "print('x')"], port=free_port(), on_output=bad)
    proc.start()
    proc.wait_ready(10, interval_s=0.1)
    with pytest.raises(LocalRuntimeError, match="tracker broke"):
        proc.stop()


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"argv": "vllm serve x", "port": 8000}, "argv"),
        ({"argv": [], "port": 8000}, "argv"),
        ({"argv": ["x", 1], "port": 8000}, "argv"),
        ({"argv": ["x"], "port": 0}, "port"),
        ({"argv": ["x"], "port": 8000, "host": "0.0.0.0"}, "host"),
        ({"argv": ["x"], "port": 8000, "host": "example.org"}, "host"),
        ({"argv": ["x"], "port": 8000, "env": {"A": 1}}, "env"),
        ({"argv": ["x"], "port": 8000, "health_path": "health"}, "health_path"),
    ],
)
def test_bad_input_names_the_field(kwargs, field):
    argv = kwargs.pop("argv")
    with pytest.raises(LocalRuntimeError, match=f"^{field}:"):
        LocalProcess(argv, **kwargs)


def test_missing_executable_is_a_clear_error():
    proc = LocalProcess(["/nonexistent/vllm"], port=free_port())
    with pytest.raises(LocalRuntimeError, match="argv: executable '/nonexistent/vllm' not found"):
        proc.start()


def test_loopback_variants_accepted():
    for host, url in [("127.0.0.2", "http://127.0.0.2:9/health"), ("::1", "http://[::1]:9/health"),
                      ("localhost", "http://localhost:9/health")]:
        assert LocalProcess(["x"], host=host, port=9).health_url == url
