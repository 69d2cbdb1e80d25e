"""Docker runtime: start an engine container, follow its cold start to Ready, stop it.

Thin I/O edge over the docker SDK (imported lazily). The container is described by docker SDK
``containers.create`` keyword arguments ("run params"): from a :class:`~gpustack_k3.core.launch_types.LaunchSpec`
through the Docker target ``gpustack_k3.render.docker.docker_run_params(launch)``, or given directly.

What the runner adds on top of the params:

* labels ``app.kubernetes.io/managed-by=gpustack-k3`` and ``app.kubernetes.io/instance=<name>``
  (plus the health port/path, so ``status`` of a detached run can probe it later);
* host networking when the params name no network (never docker's default bridge);
* GPU device requests only when the launch asks for GPUs **and** ``host_has_gpus`` is set;
  otherwise they are dropped and a note says so.

While starting it follows the container's log with the cold-start log-follow supervisor
(``gpustack_k3.coldstart.follow.LogFollower``, the one the local runner and the operator use: stamped
stream, resumed without duplicates if it breaks while the container runs) into the tracker and
``on_log``, probes ``GET http://127.0.0.1:<port><health_path>`` until it answers 200 (Ready), and, if
the container exits first, reports its exit code and last lines. Ctrl-C (KeyboardInterrupt) stops and
removes the container before re-raising.
"""
from __future__ import annotations

import copy
import functools
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.catalog import load_catalog
from gpustack_k3.coldstart import ColdStartTracker
from gpustack_k3.errors import OperationalError
from gpustack_k3.probe.warmup import describe, warm_up
from gpustack_k3.coldstart.follow import LogFollower
from gpustack_k3.render.docker import docker_run_params
from gpustack_k3.runtime.progress import ProgressView

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.core.launch_types import LaunchSpec

MANAGED_BY_LABEL = api.LABEL_APP_MANAGED_BY
MANAGED_BY = api.PRODUCT
INSTANCE_LABEL = api.LABEL_APP_INSTANCE
PORT_LABEL = api.LABEL_HEALTH_PORT
HEALTH_PATH_LABEL = api.LABEL_HEALTH_PATH

LogCallback = Callable[[bytes], None]
PhaseGetter = Callable[[], "str | None"]
EventCallback = Callable[[str], None]

_LAST_LINES = 40


class DockerRuntimeError(OperationalError):
    """A failed docker operation or bad input; the message names the field and the way out."""


# -- what to run ---------------------------------------------------------------------------------

@dataclass
class DockerLaunch:
    """One container to start: docker SDK ``containers.create`` kwargs plus what readiness needs."""

    name: str
    params: dict[str, Any]
    port: int
    health_path: str = "/health"
    startup_budget_s: float = 3600.0
    gpu_count: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DockerRuntimeError("name: the container needs a name (params['name'] or the launch spec's name)")
        if not isinstance(self.params, Mapping):
            raise DockerRuntimeError("params: must be a dict of docker SDK containers.create keyword arguments")
        if not self.params.get("image"):
            raise DockerRuntimeError("params.image: no image given; name a locally built image")
        cmd = self.params.get("command")
        if cmd is not None and (isinstance(cmd, (str, bytes)) or not all(isinstance(a, str) for a in cmd)):
            raise DockerRuntimeError("params.command: must be a list of strings, one token per element "
                                     "(never a shell string)")
        if not isinstance(self.port, int) or isinstance(self.port, bool) or not 1 <= self.port <= 65535:
            raise DockerRuntimeError(f"port: {self.port!r} is not a TCP port (1-65535)")
        if not self.health_path.startswith("/"):
            raise DockerRuntimeError(f"health_path: {self.health_path!r} must start with '/'")
        if not self.startup_budget_s or self.startup_budget_s <= 0:
            raise DockerRuntimeError(f"startup_budget_s: {self.startup_budget_s!r} must be positive")

    @classmethod
    def from_launch_spec(cls, launch: LaunchSpec, params: Mapping[str, Any] | None = None) -> DockerLaunch:
        """From a LaunchSpec; ``params`` default to the Docker target's ``docker_run_params(launch)``."""
        if params is None:
            params = docker_run_params(launch)
        params = dict(params)
        params.setdefault("name", launch.name)
        return cls(name=params["name"], params=params, port=launch.port,
                   health_path=launch.health_path,
                   startup_budget_s=float(launch.startup_budget_s), gpu_count=launch.gpu_count)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], *, port: int | None = None, health_path: str = "/health",
                    startup_budget_s: float = 3600.0, gpu_count: int = 0) -> DockerLaunch:
        """From run params alone; the port defaults to the ``--port`` value in ``params['command']``."""
        params = dict(params)
        if port is None:
            port = port_from_argv(params.get("command") or [])
            if port is None:
                raise DockerRuntimeError("port: not given and no --port in params['command']; pass port=")
        return cls(name=params.get("name") or "", params=params, port=port, health_path=health_path,
                   startup_budget_s=startup_budget_s, gpu_count=gpu_count)


@functools.lru_cache(maxsize=1)
def _port_flags() -> frozenset[str]:
    """The engines' port flags (the catalog's flag tables: field ``serving.port``)."""
    return frozenset(f.flag for e in load_catalog().engines.values() for f in e.flags if f.field == "serving.port")


def port_from_argv(argv: list[str]) -> int | None:
    """The value of ``--port N`` / ``--port=N`` (the engine's port flag) in an engine argv, or None."""
    flags = _port_flags()
    for i, tok in enumerate(argv):
        if tok in flags and i + 1 < len(argv) and argv[i + 1].isdigit():
            return int(argv[i + 1])
        name, eq, value = tok.partition("=")
        if eq and name in flags and value.isdigit():
            return int(value)
    return None


def local_ulimit_caps() -> dict[str, int]:
    """This process's finite hard limits for the ulimits engine containers ask for (memlock, stack).

    A dockerd started from this environment inherits them and, without CAP_SYS_RESOURCE, cannot
    grant a container more (runc: "error setting rlimit ... operation not permitted")."""
    import resource

    caps: dict[str, int] = {}
    for name, which in (("memlock", resource.RLIMIT_MEMLOCK), ("stack", resource.RLIMIT_STACK)):
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            caps[name] = int(hard)
    return caps


def _clamp_ulimits(ulimits: list, caps: Mapping[str, int], notes: list[str]) -> list[dict]:
    out: list[dict] = []
    for u in ulimits:
        name = u.get("name", u.get("Name"))
        soft, hard = u.get("soft", u.get("Soft")), u.get("hard", u.get("Hard"))
        cap = caps.get(name)
        if cap is not None:
            new_soft = cap if soft is None or soft < 0 or soft > cap else soft
            new_hard = cap if hard is None or hard < 0 or hard > cap else hard
            if (new_soft, new_hard) != (soft, hard):
                notes.append(f"ulimit {name} clamped from soft={soft}, hard={hard} to soft={new_soft}, "
                             f"hard={new_hard}: this host's dockerd cannot grant more (ulimit_caps)")
            soft, hard = new_soft, new_hard
        out.append({"name": name, "soft": soft, "hard": hard})
    return out


def prepare_params(launch: DockerLaunch, *, host_has_gpus: bool,
                   ulimit_caps: Mapping[str, int] | None = None) -> tuple[dict[str, Any], list[str]]:
    """The create kwargs the runner really uses, and notes about what it changed. No I/O.

    ``ulimit_caps`` (name → bytes) lowers the requested ulimits to what the daemon can grant; by
    default they are passed unchanged (GPU hosts run dockerd with unlimited memlock)."""
    params = copy.deepcopy(dict(launch.params))
    notes: list[str] = []
    params["name"] = launch.name
    labels = dict(params.get("labels") or {})
    labels.update({MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: launch.name,
                   PORT_LABEL: str(launch.port), HEALTH_PATH_LABEL: launch.health_path})
    params["labels"] = labels
    if not params.get("network_mode") and not params.get("network"):
        params["network_mode"] = "host"
    if params.get("network_mode") in ("bridge", "default"):
        raise DockerRuntimeError(
            f"params.network_mode: {params['network_mode']!r} is docker's default bridge, which this project never "
            "uses; use 'host' (the engine serves on the host's port) or 'none'")
    for run_only in ("detach", "remove", "stdout", "stderr", "stream"):
        params.pop(run_only, None)  # containers.run() arguments; the runner creates, starts and removes itself
    if launch.gpu_count > 0 and host_has_gpus:
        if not params.get("device_requests"):
            from docker.types import DeviceRequest

            params["device_requests"] = [DeviceRequest(count=launch.gpu_count, capabilities=[["gpu"]])]
    else:
        if params.pop("device_requests", None) or launch.gpu_count > 0:
            notes.append(f"GPU request dropped: the launch asks for {launch.gpu_count} GPU(s) but host_has_gpus "
                         "is false (pass --gpus / host_has_gpus=True on a GPU host)")
    if ulimit_caps and params.get("ulimits"):
        params["ulimits"] = _clamp_ulimits(params["ulimits"], ulimit_caps, notes)
    return params, notes


# -- results -------------------------------------------------------------------------------------

@dataclass
class StartResult:
    """How a start-up ended. ``state``: ``ready`` | ``exited`` | ``timeout`` | ``started`` (detached, not waited).

    For an attached run that reached Ready, ``exit_code`` is the container's code once it ended."""

    name: str
    container_id: str
    state: str
    elapsed_s: float
    exit_code: int | None = None
    phase: str | None = None
    reason: str = ""
    last_lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    log_reconnects: int = 0        # times the log stream broke and was resumed
    warm: dict | None = None       # the warm-up summary (gpustack_k3.probe.warmup) when one was sent after Ready

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def to_dict(self) -> dict:
        return {"name": self.name, "container_id": self.container_id, "state": self.state,
                "elapsed_s": round(self.elapsed_s, 3), "exit_code": self.exit_code, "phase": self.phase,
                "reason": self.reason, "last_lines": list(self.last_lines), "notes": list(self.notes),
                "log_reconnects": self.log_reconnects, "warm": self.warm}


@dataclass
class ContainerStatus:
    name: str
    container_id: str
    image: str
    state: str                    # docker's: created | running | exited | dead | ...
    exit_code: int | None
    started_at: str
    finished_at: str
    port: int | None
    health_path: str
    healthy: bool | None          # /health answered 200 (None when not running)
    phase: str | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


# -- log lines -----------------------------------------------------------------------------------

class LineTail:
    """Keeps the last complete lines of a byte stream (``\\n`` or tqdm's ``\\r`` end a line)."""

    def __init__(self, maxlen: int = _LAST_LINES) -> None:
        self.lines: deque[str] = deque(maxlen=maxlen)
        self.count = 0                 # complete lines seen so far
        self._partial = b""

    def feed(self, chunk: bytes) -> list[str]:
        data = (self._partial + chunk).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *complete, self._partial = data.split(b"\n")
        new = [c.decode("utf-8", "replace") for c in complete if c.strip()]
        self.lines.extend(new)
        self.count += len(new)
        return new

    def flush(self) -> list[str]:
        if self._partial.strip():
            line = self._partial.decode("utf-8", "replace")
            self.lines.append(line)
            self._partial = b""
            return [line]
        self._partial = b""
        return []


# -- the runner ----------------------------------------------------------------------------------

class DockerRunner:
    """Start / track / stop engine containers on one dockerd.

    ``client`` is a ``docker.DockerClient``; by default one is made from the environment
    (``DOCKER_HOST``). ``host_has_gpus`` allows GPU device requests. Health is probed on
    ``health_host`` (127.0.0.1: containers use the host network). ``ulimit_caps`` (e.g.
    :func:`local_ulimit_caps`) lowers requested ulimits a restricted dockerd cannot grant.
    """

    def __init__(self, client: Any = None, *, host_has_gpus: bool = False, health_host: str = "127.0.0.1",
                 poll_s: float = 0.25, probe_timeout_s: float = 2.0,
                 ulimit_caps: Mapping[str, int] | None = None) -> None:
        self._client = client
        self.host_has_gpus = host_has_gpus
        self.ulimit_caps = dict(ulimit_caps or {})
        self.health_host = health_host
        self.poll_s = poll_s
        self.probe_timeout_s = probe_timeout_s
        self.follower: LogFollower | None = None   # the log follow of the start in progress (or the last)

    @property
    def client(self) -> Any:
        if self._client is None:
            import docker

            try:
                self._client = docker.from_env()
                self._client.ping()
            except docker.errors.DockerException as exc:
                raise DockerRuntimeError(
                    f"cannot reach dockerd at DOCKER_HOST={os.environ.get('DOCKER_HOST', '(unset: default socket)')}: "
                    f"{exc}; start it (.ci/setup_dockerd.sh start) or set DOCKER_HOST") from None
        return self._client

    # -- lookup ----------------------------------------------------------------------------------
    def find(self, name: str) -> Any | None:
        """Our container called ``name`` (running or not), or None."""
        found = self.client.containers.list(
            all=True, filters={"label": [f"{MANAGED_BY_LABEL}={MANAGED_BY}", f"{INSTANCE_LABEL}={name}"]})
        exact = [c for c in found if c.name == name]
        return exact[0] if exact else None

    def list_containers(self) -> list[ContainerStatus]:
        """Every container of ours on this dockerd, running or not."""
        found = self.client.containers.list(all=True, filters={"label": f"{MANAGED_BY_LABEL}={MANAGED_BY}"})
        return [self._status_of(c) for c in sorted(found, key=lambda c: c.name)]

    def _require(self, name: str) -> Any:
        c = self.find(name)
        if c is None:
            raise DockerRuntimeError(f"name: no gpustack-k3 container named {name!r} on this dockerd; "
                                     f"`docker ps -a --filter label={MANAGED_BY_LABEL}={MANAGED_BY}` lists them")
        return c

    # -- start -----------------------------------------------------------------------------------
    def create(self, launch: DockerLaunch) -> tuple[Any, list[str]]:
        """Create (not start) the container; clears a stopped leftover of ours with the same name."""
        import docker

        params, notes = prepare_params(launch, host_has_gpus=self.host_has_gpus, ulimit_caps=self.ulimit_caps)
        old = self.find(launch.name)
        if old is not None:
            if old.status in ("running", "restarting", "paused"):
                raise DockerRuntimeError(
                    f"name: container {launch.name!r} is already {old.status}; stop it first "
                    f"(`gpustack-k3 stop {launch.name}`) or choose another name")
            old.remove(force=True)
            notes.append(f"removed the previous stopped container {launch.name!r} ({old.short_id})")
        try:
            container = self.client.containers.create(**params)
        except docker.errors.ImageNotFound:
            raise DockerRuntimeError(
                f"params.image: {params['image']!r} is not in the local image store and nothing is pulled; "
                "build or load it first (docker images lists what is there)") from None
        except docker.errors.APIError as exc:
            if exc.status_code == 409:
                raise DockerRuntimeError(
                    f"name: a container named {launch.name!r} exists and is not managed by gpustack-k3; "
                    "remove it or choose another name") from None
            raise DockerRuntimeError(f"create: dockerd refused the container: {exc.explanation or exc}") from None
        except TypeError as exc:
            raise DockerRuntimeError(f"params: not valid docker SDK create arguments: {exc}") from None
        return container, notes

    def run(self, launch: DockerLaunch, *, tracker: Any = None, on_log: LogCallback | None = None,
            phase: PhaseGetter | None = None, on_event: EventCallback | None = None,
            progress: ProgressView | None = None, detach: bool = False, wait_ready: bool = True,
            remove_on_failure: bool = True, platform_events: bool = True,
            on_ready: Callable[[StartResult], None] | None = None) -> StartResult:
        """Create and start the container, then (``wait_ready``) follow it to Ready or failure.

        ``tracker`` is a cold-start tracker (``feed(bytes)``, ``report()``, ``finish()``, and
        ``platform_event`` when ``platform_events``: the container's create→start span is reported
        as ``container_start`` on the wall clock). It gets every log byte; the progress view and the
        result take their phase from it. ``on_log`` / ``phase`` are the same hooks without a tracker.

        Attached (``detach=False``): after Ready, keep following the logs (into the tracker and
        ``on_log``) until the container exits, then remove it. Detached: return once Ready (or right
        after the start when ``wait_ready`` is False), leaving the container running. Ctrl-C or an
        error at any point stops and removes the container, then re-raises. ``on_event`` receives
        ``container_created`` and ``container_started``. ``on_ready(result)`` runs once Ready, while the log
        still flows into the tracker (the warm-up of spec.startup.warmup); it may set ``result.warm``.
        """
        import docker

        if phase is None and tracker is not None:
            phase = lambda: tracker_phase(tracker)
        t0, created_at = time.monotonic(), time.time()
        container, notes = self.create(launch)
        follower: LogFollower | None = None
        try:
            if on_event:
                on_event("container_created")
            try:
                container.start()
            except docker.errors.APIError as exc:
                why = str(exc.explanation or exc)
                if "rlimit" in why:
                    raise DockerRuntimeError(
                        f"params.ulimits: dockerd could not apply {container.attrs['HostConfig'].get('Ulimits')}: "
                        f"{why}; start dockerd with higher limits (systemd LimitMEMLOCK=infinity) or clamp them "
                        "to this host's (DockerRunner(ulimit_caps=local_ulimit_caps()))") from None
                raise DockerRuntimeError(
                    f"params.command: dockerd could not start the container: {why}; "
                    "check that the image has the command") from None
            started_at = time.time()
            if on_event:
                on_event("container_started")
            if tracker is not None and platform_events:
                # reported before the log is followed: the engine's first lines find their attempt
                tracker.platform_event("container_start", created_at, started_at,
                                       details={"runtime": "docker", "container": container.short_id})
            for n in notes:
                if progress:
                    progress.note(n)
            if not wait_ready:
                return StartResult(launch.name, container.id, "started", time.monotonic() - t0, notes=notes)
            tail = LineTail()
            follower = LogFollower(DockerLogSource(container), tracker, name=f"docker-logs-{container.short_id}",
                                   on_text=[tail.feed, *([on_log] if on_log else [])])
            self.follower = follower
            follower.start()
            locked_phase = (lambda: _locked(follower, phase)) if phase else None
            result = self._track(container, follower, tail, launch, t0, phase=locked_phase, tracker=tracker,
                                 progress=progress, remove_on_failure=remove_on_failure)
            result.notes = notes + result.notes
            if not result.ready:
                follower.stop()
                follower.join(5)
                result.log_reconnects = follower.reconnects
                return result
            if on_ready is not None:
                on_ready(result)        # the log keeps flowing into the tracker meanwhile
            if detach:
                follower.stop()
                follower.join(5)
                result.log_reconnects = follower.reconnects
                return result
            result.exit_code = self._follow_until_exit(container, follower, tracker, progress=progress)
            result.reason = f"container exited with code {result.exit_code} after Ready"
            result.log_reconnects = follower.reconnects
            return result
        except BaseException as exc:  # Ctrl-C, or a callback failing: never leave the container behind
            if follower is not None:
                follower.stop()
            self._remove(container)
            if progress:
                what = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"error ({type(exc).__name__})"
                progress.finish(f"{what}: container {launch.name} stopped and removed")
            raise

    def _track(self, container: Any, follower: LogFollower, tail: LineTail, launch: DockerLaunch, t0: float, *,
               phase: PhaseGetter | None, tracker: Any, progress: ProgressView | None,
               remove_on_failure: bool) -> StartResult:
        started: deque[str] = deque()   # phases the tracker started (in the follower's thread): each is shown
        on_start = lambda ev: started.append(ev.phase) if ev.event == "start" and ev.phase else None
        if tracker is not None and progress is not None:
            tracker.add_listener(on_start)
        try:
            return self._wait_ready(container, follower, tail, launch, t0, lambda: phase() if phase else None,
                                    started, tracker, progress, remove_on_failure)
        finally:
            if tracker is not None:
                tracker.remove_listener(on_start)

    def _wait_ready(self, container: Any, follower: LogFollower, tail: LineTail, launch: DockerLaunch, t0: float,
                    current: Callable[[], str | None], started: deque[str], tracker: Any,
                    progress: ProgressView | None, remove_on_failure: bool) -> StartResult:
        import httpx

        url = f"http://{self.health_host}:{launch.port}{launch.health_path}"
        deadline = t0 + launch.startup_budget_s
        next_probe = t0
        shown = 0
        with httpx.Client(timeout=httpx.Timeout(self.probe_timeout_s), trust_env=False) as http:
            while True:
                self._raise_listener_error(follower)
                ended = follower.wait_activity(self.poll_s)
                now = time.monotonic()
                if progress:
                    line = tail.lines[-1] if tail.count != shown and tail.lines else None
                    shown = tail.count
                    while started:
                        progress.update(now - t0, started.popleft(), line)
                    progress.update(now - t0, current(), line)
                if ended or now >= next_probe:
                    container.reload()
                    if container.status in ("exited", "dead"):
                        return self._exited(container, follower, tail, launch, t0, current,
                                            tracker, progress, remove_on_failure)
                    if ended:  # log stream gone but the container still runs: do not spin
                        time.sleep(self.poll_s)
                if now >= next_probe:
                    next_probe = now + self.poll_s
                    try:
                        if http.get(url).status_code == 200:
                            elapsed = time.monotonic() - t0
                            # docker delivers log lines with a small lag: take what the engine printed
                            # before it answered, so the tracker has seen the server come up
                            follower.wait_quiet(quiet_s=0.3, max_s=2.0)
                            if progress:
                                progress.finish(f"Ready: {launch.name} answered {url} after {elapsed:.1f} s")
                            return StartResult(launch.name, container.id, "ready", elapsed, phase=current(),
                                               last_lines=list(tail.lines))
                    except httpx.HTTPError:
                        pass  # not listening yet
                stalled = follower.check_stall()
                if now >= deadline or stalled:
                    ph = current()
                    self._remove(container)
                    follower.stop()
                    if stalled:
                        with follower.lock:
                            why = tracker.report().last.reason
                        reason = f"{why}; container stopped and removed"
                    else:
                        reason = (f"no 200 from {url} within the start-up budget of {launch.startup_budget_s:.0f} s"
                                  f"{f' (stuck in phase {ph})' if ph else ''}; container stopped and removed")
                    if progress:
                        progress.finish(f"Timeout: {reason}")
                    return StartResult(launch.name, container.id, "timeout", now - t0, phase=ph, reason=reason,
                                       last_lines=list(tail.lines))

    @staticmethod
    def _raise_listener_error(follower: LogFollower) -> None:
        """A callback (``on_log``) that raised in the follower's thread fails the run in this one."""
        if follower.errors:
            raise follower.errors[0]

    def _exited(self, container: Any, follower: LogFollower, tail: LineTail, launch: DockerLaunch, t0: float,
                current: Callable[[], str | None], tracker: Any, progress: ProgressView | None,
                remove_on_failure: bool) -> StartResult:
        follower.join(5.0)   # the stream ends once the container is gone
        tail.flush()
        try:
            code = int(container.wait(timeout=10).get("StatusCode"))
        except Exception:  # noqa: BLE001 - wait() timed out or the API hiccuped: fall back to inspect
            container.reload()
            code = int(container.attrs.get("State", {}).get("ExitCode", -1))
        ph, engine_reason = current(), None
        if tracker is not None:
            with follower.lock:
                tracker.process_exited(code)
                last_attempt = tracker.finish().last  # the unterminated last line counts too
            ph = last_attempt.failed_phase or last_attempt.current_phase or ph
            engine_reason = last_attempt.reason
        last = list(tail.lines)
        if remove_on_failure:
            self._remove(container)
        reason = (f"container exited with code {code} during start-up"
                  f"{f' in phase {ph}' if ph else ''}; "
                  + (f"engine: {engine_reason}" if engine_reason else
                     f"last line: {last[-1] if last else '(no output)'}"))
        if progress:
            progress.finish(f"Failed: {reason}")
        return StartResult(launch.name, container.id, "exited", time.monotonic() - t0, exit_code=code,
                           phase=ph, reason=reason, last_lines=last)

    def _follow_until_exit(self, container: Any, follower: LogFollower, tracker: Any, *,
                           progress: ProgressView | None) -> int:
        """Attached after Ready: the follower keeps feeding the tracker and ``on_log`` until the log ends."""
        while not follower.ended.wait(0.5):
            self._raise_listener_error(follower)
        code = int(container.wait(timeout=30).get("StatusCode", -1))
        if tracker is not None:
            with follower.lock:
                tracker.process_exited(code)
        self._remove(container)  # attached runs behave like `docker run --rm`
        if progress:
            progress.finish(f"container {container.name} ended with exit code {code} and was removed")
        return code

    # -- detached-run operations ------------------------------------------------------------------
    def status(self, name: str, *, tracker_factory: Callable[[], Any] | None = None) -> ContainerStatus:
        """State of our container ``name``; a tracker from ``tracker_factory`` is fed the whole log
        so far to name the current cold-start phase."""
        c = self._require(name)
        st = self._status_of(c)
        if tracker_factory is not None:
            tracker = tracker_factory()
            tracker.feed(c.logs(stdout=True, stderr=True))
            st.phase = tracker_phase(tracker)
        return st

    def _status_of(self, c: Any) -> ContainerStatus:
        import httpx

        state = c.attrs.get("State", {})
        labels = c.labels or {}
        port = int(labels[PORT_LABEL]) if labels.get(PORT_LABEL, "").isdigit() else None
        path = labels.get(HEALTH_PATH_LABEL, "/health")
        healthy: bool | None = None
        if c.status == "running" and port:
            try:
                healthy = httpx.get(f"http://{self.health_host}:{port}{path}", timeout=self.probe_timeout_s,
                                    trust_env=False).status_code == 200
            except httpx.HTTPError:
                healthy = False
        exit_code = state.get("ExitCode") if c.status in ("exited", "dead") else None
        image = (c.attrs.get("Config") or {}).get("Image", "")
        return ContainerStatus(c.name, c.id, image, c.status, exit_code, state.get("StartedAt", ""),
                               state.get("FinishedAt", ""), port, path, healthy)

    def logs(self, name: str, *, follow: bool = False, tail: int | str = "all") -> Iterator[bytes]:
        """The container's log as byte chunks (stdout and stderr); ``follow`` streams until it exits."""
        c = self._require(name)
        if follow:
            return iter(c.logs(stream=True, follow=True, stdout=True, stderr=True, tail=tail))
        return iter([c.logs(stdout=True, stderr=True, tail=tail)])

    def stop(self, name: str, *, timeout_s: int = 10, remove: bool = True) -> ContainerStatus:
        """Stop (SIGTERM, SIGKILL after ``timeout_s``) and by default remove our container ``name``."""
        c = self._require(name)
        if c.status in ("running", "restarting", "paused"):
            c.stop(timeout=timeout_s)
        c.reload()
        st = self._status_of(c)
        if remove:
            c.remove(force=True)
        return st

    def _remove(self, container: Any) -> None:
        import docker

        try:
            container.remove(force=True)  # SIGKILL + remove; the engine has no state worth a graceful stop
        except docker.errors.NotFound:
            pass


def run_launch(launch: LaunchSpec, *, detach: bool = False, host_has_gpus: bool = False,
               clamp_ulimits: bool = False, stream: Any = None, client: Any = None,
               warmup: Any = None, params: Mapping[str, Any] | None = None) -> tuple[int, StartResult, Any]:
    """What ``gpustack-k3 run --runtime docker`` does: the Docker target's params for ``launch``, a
    cold-start tracker for its engine, a progress view on ``stream`` (stderr by default), then
    :meth:`DockerRunner.run`. Returns ``(exit_code, result, cold_start_report)``: 0 when Ready
    (detached) or when the attached container later exited 0; 1 otherwise. Ctrl-C propagates
    (KeyboardInterrupt) after the container was removed. ``warmup`` = (spec.startup.warmup, served model name
    or None): after Ready, send its requests (gpustack_k3.probe.warmup) and report the ``warm`` phase. ``params``: the
    Docker target's params when the caller has them (``docker_run_params(launch, doc=doc)``: the document's labels
    too); default ``docker_run_params(launch)``."""
    tracker = ColdStartTracker(engine=launch.engine if launch.engine in api.ENGINES else None)
    runner = DockerRunner(client, host_has_gpus=host_has_gpus,
                          ulimit_caps=local_ulimit_caps() if clamp_ulimits else None)
    progress = ProgressView(stream, label=launch.name)

    def warm(result: StartResult) -> None:
        spec_warmup, served = warmup
        lock = runner.follower.lock    # the follower feeds the tracker from its own thread

        def on_phase(s, e, d) -> None:
            with lock:
                tracker.platform_event("warm", s, e, d)

        result.warm = warm_up(f"http://{runner.health_host}:{launch.port}", spec_warmup, model=served,
                              on_phase=on_phase)
        with lock:
            progress.note(describe(result.warm, tracker))

    result = runner.run(DockerLaunch.from_launch_spec(launch, params), tracker=tracker, progress=progress, detach=detach,
                        on_ready=warm if warmup is not None else None)
    ok = result.ready and (detach or result.exit_code == 0)
    return (api.EXIT_OK if ok else api.EXIT_REFUSED), result, tracker.report()


def tracker_phase(tracker: Any) -> str | None:
    """The phase a cold-start tracker is in: current, else failed, else ``server_ready`` once ready."""
    last = tracker.report().last
    if last.current_phase:
        return last.current_phase
    if last.failed_phase:
        return last.failed_phase
    return "server_ready" if last.status == "ready" else None


def _locked(follower: LogFollower, fn: Callable[[], Any]) -> Any:
    with follower.lock:
        return fn()


class DockerLogSource:
    """A container's log (stdout and stderr) as the follow supervisor's ``LogSource``: docker's
    ``--timestamps`` stream, resumed with ``since`` while the container runs."""

    stamped = True

    def __init__(self, container: Any) -> None:
        self.container = container
        self._stream: Any = None

    def open(self, since: float | None, follow: bool) -> Iterator[bytes]:
        kw: dict[str, Any] = {"stream": True, "follow": follow, "stdout": True, "stderr": True, "timestamps": True}
        if since is not None:
            kw["since"] = since
        self._stream = self.container.logs(**kw)
        return iter(self._stream)

    def interrupt(self) -> None:
        stream = self._stream
        if stream is not None:
            stream.close()

    def alive(self) -> bool:
        import docker

        try:
            self.container.reload()
        except docker.errors.NotFound:
            return False
        return self.container.status in ("created", "running", "restarting", "paused")
