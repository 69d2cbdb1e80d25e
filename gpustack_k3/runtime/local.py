"""Local-process runtime: run an engine argv as a child process on the loopback interface.

Thin I/O edge. It starts ``argv`` (a list, never a shell string) in its own process group, follows
its combined stdout/stderr with the cold-start log-follow supervisor (``gpustack_k3.coldstart.follow``,
the one the Docker runner and the operator use) into a tracker and/or a callback, polls
``GET http://host:port/health`` until it answers 200, and stops the whole process group
(SIGTERM, then SIGKILL after a grace period). vLLM forks an EngineCore child, which is why the
group, not only the main PID, is signalled.

Only loopback hosts are accepted: servers started by this project listen on 127.0.0.0/8 or ::1.
"""
from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Self

from gpustack_k3.coldstart.follow import LogFollower
from gpustack_k3.errors import OperationalError

OutputCallback = Callable[[bytes], None]

_READ_CHUNK = 65536


class LocalRuntimeError(OperationalError):
    """Bad input or a failed operation of the local runtime; the message names the field and the fix."""


@dataclass(frozen=True)
class ReadyOutcome:
    """Result of waiting for readiness.

    ``ready`` is True when /health answered 200. Otherwise ``reason`` says why not: the process
    exited (``exit_code`` set) or the timeout elapsed (process still running).
    """

    ready: bool
    elapsed_s: float
    polls: int
    exit_code: int | None = None
    reason: str = ""


def _check_loopback(host: str) -> str:
    if host == "localhost":
        return host
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        raise LocalRuntimeError(
            f"host: {host!r} is not an IP address; use a loopback address such as 127.0.0.1"
        ) from None
    if not addr.is_loopback:
        raise LocalRuntimeError(
            f"host: {host!r} is not a loopback address; the local runtime only serves on "
            "127.0.0.0/8 or ::1 (use 127.0.0.1)"
        )
    return host


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class PipeSource:
    """The child's stdout pipe as the follow supervisor's ``LogSource``: read once, to its end."""

    stamped = False

    def __init__(self, pipe: IO[bytes]) -> None:
        self.pipe = pipe

    def open(self, since: float | None, follow: bool) -> Iterator[bytes]:
        fd = self.pipe.fileno()
        try:
            while True:
                try:
                    chunk = os.read(fd, _READ_CHUNK)
                except OSError:
                    return
                if not chunk:
                    return
                yield chunk
        finally:
            self.pipe.close()

    def interrupt(self) -> None:
        return None   # the pipe ends when the process group is stopped

    def alive(self) -> bool:
        return False  # a pipe cannot be reopened


class LocalProcess:
    """One engine process started from ``argv`` with ``env``.

    ``env`` is added on top of the current environment unless ``inherit_env`` is False.
    ``on_output`` receives every chunk of the child's combined stdout/stderr, in order, from the
    follower's thread; it must not block for long. An exception it raises is kept and re-raised by
    :meth:`stop` (reading goes on, so the child never blocks on a full pipe). ``tracker`` (a cold-start
    tracker) is fed under ``follower.lock``; hold it to read the tracker while the process runs.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        host: str = "127.0.0.1",
        port: int,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
        health_path: str = "/health",
        inherit_env: bool = True,
        cwd: str | None = None,
        tracker: Any = None,
    ) -> None:
        if isinstance(argv, (str, bytes)) or not isinstance(argv, Sequence):
            raise LocalRuntimeError("argv: must be a list of strings, one token per element (not a shell string)")
        if not argv:
            raise LocalRuntimeError("argv: is empty; give the executable and its arguments")
        bad = [a for a in argv if not isinstance(a, str)]
        if bad:
            raise LocalRuntimeError(f"argv: every element must be a string; got {bad[0]!r}")
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise LocalRuntimeError(f"port: {port!r} is not a TCP port (1-65535)")
        if not health_path.startswith("/"):
            raise LocalRuntimeError(f"health_path: {health_path!r} must start with '/'")
        if env is not None:
            bad_env = [k for k, v in env.items() if not isinstance(k, str) or not isinstance(v, str)]
            if bad_env:
                raise LocalRuntimeError(f"env: {bad_env[0]!r} must map a string name to a string value")
        self.argv: list[str] = list(argv)
        self.host = _check_loopback(host)
        self.port = port
        self.health_url = f"http://{_url_host(self.host)}:{port}{health_path}"
        self.base_url = f"http://{_url_host(self.host)}:{port}"
        self._env = dict(env or {})
        self._inherit_env = inherit_env
        self._cwd = cwd
        self._on_output = on_output
        self.tracker = tracker
        self._proc: subprocess.Popen[bytes] | None = None
        self.follower: LogFollower | None = None
        self.started_at: float | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        if self._proc is not None:
            raise LocalRuntimeError("start: this process was already started; create a new LocalProcess")
        env = {**os.environ, **self._env} if self._inherit_env else dict(self._env)
        try:
            self._proc = subprocess.Popen(
                self.argv,
                env=env,
                cwd=self._cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() signals the engine's children too
            )
        except FileNotFoundError:
            raise LocalRuntimeError(f"argv: executable {self.argv[0]!r} not found; give a full path") from None
        except PermissionError:
            raise LocalRuntimeError(f"argv: executable {self.argv[0]!r} is not executable") from None
        self.started_at = time.monotonic()
        assert self._proc.stdout is not None
        self.follower = LogFollower(PipeSource(self._proc.stdout), self.tracker, name=f"local-runtime-{self._proc.pid}",
                                    on_text=[self._on_output] if self._on_output is not None else [])
        self.follower.start()

    def poll(self) -> int | None:
        """Exit code if the main process has exited, else None."""
        if self._proc is None:
            raise LocalRuntimeError("poll: the process was never started; call start() first")
        return self._proc.poll()

    def wait_ready(
        self,
        timeout_s: float,
        *,
        interval_s: float = 1.0,
        request_timeout_s: float = 2.0,
    ) -> ReadyOutcome:
        """Poll the health URL until it answers 200, the process exits, or ``timeout_s`` elapses."""
        import httpx  # lazy: keeps CLI start fast

        if self._proc is None:
            raise LocalRuntimeError("wait_ready: the process was never started; call start() first")
        if timeout_s <= 0:
            raise LocalRuntimeError(f"timeout_s: {timeout_s!r} must be positive")
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        polls = 0
        timeout = httpx.Timeout(request_timeout_s)
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    return ReadyOutcome(False, time.monotonic() - t0, polls, code,
                                        f"process exited with code {code} before {self.health_url} answered 200")
                polls += 1
                try:
                    if client.get(self.health_url).status_code == 200:
                        return ReadyOutcome(True, time.monotonic() - t0, polls)
                except httpx.HTTPError:
                    pass  # not listening yet, or busy
                now = time.monotonic()
                if now >= deadline:
                    return ReadyOutcome(False, now - t0, polls, None,
                                        f"{self.health_url} did not answer 200 within {timeout_s:.0f}s")
                time.sleep(min(interval_s, max(0.0, deadline - now)))

    def _group_alive(self, pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def stop(self, grace_s: float = 15.0) -> int | None:
        """SIGTERM the process group, SIGKILL whatever is left after ``grace_s``; return the exit code.

        Safe to call more than once. Re-raises an exception raised earlier by the output callback.
        """
        if self._proc is None:
            return None
        pgid = self._proc.pid  # start_new_session: the group id is the child's pid
        if self._proc.poll() is None or self._group_alive(pgid):
            try:
                os.killpg(pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline:
                self._proc.poll()  # reap the main process so it does not count as a group member
                if self._proc.returncode is not None and not self._group_alive(pgid):
                    break
                time.sleep(0.1)
            else:
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        code = self._proc.wait()
        if self.follower is not None:
            self.follower.join(timeout=5)
            if self.follower.errors:
                err = self.follower.errors.pop(0)
                self.follower.errors.clear()
                raise LocalRuntimeError(f"on_output: the output callback raised {err!r}") from err
        return code

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
