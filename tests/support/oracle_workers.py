"""The engine-oracle workers of a test session: one per release (``Pool``, behind the ``oracles`` fixture of
tests/engine_oracle/conftest.py), started two at a time, closed all at once.

An oracle worker's start (importing one release's code and preloading what its lines import) keeps one core busy
for 10-25 s; the serial tier started them one after another while the CI machine's second core idled (measured with
a /proc sampler over tests/engine_oracle/test_oracle_sample.py and test_neutral_judge.py: 0.97 runnable threads on
average, fewer than 2 in 97 % of the samples). Closing waits for each worker's interpreter to finish (2-7 s each,
the release's modules torn down), one after another too. Nothing about a verdict changes: each line is still
judged by its release's worker, in the order the test sends it, in a forked child of that worker.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.support import tiers

STARTS_AT_ONCE = 2   # the CI machine's cores
REQUIRE_ENV = "GPUSTACK_K3_REQUIRE_WHEELS"
XDIST_ENV = "PYTEST_XDIST_WORKER"   # set in each pytest-xdist worker (tools/testgate.py runs the tier on 2)


def xdist_worker() -> str | None:
    """The pytest-xdist worker this process is (``gw0``, ...), None in a run without xdist."""
    return os.environ.get(XDIST_ENV) or None


def starts_at_once() -> int:
    """How many workers ``_start`` starts at a time: STARTS_AT_ONCE in a serial run (the tier alone on the two cores),
    one in an xdist worker (the other xdist worker keeps the second core busy)."""
    return 1 if xdist_worker() else STARTS_AT_ONCE


def write_models_once_per_host() -> None:
    """``models.write_models()`` under an exclusive lock beside the model directories: the first xdist worker writes
    what changed, the other then finds every file as it should be and writes nothing. Without it, two workers whose
    first oracle starts fall together both write a changed file through the same ``<file>.tmp`` (models.py
    _write_dir), and a judge could read half a config.json."""
    from gpustack_k3.oracle import models

    root = models.model_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root.parent / "models.write.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            models.write_models()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class Pool:
    """The session's workers, one per release: the ones ``gpustack_k3.oracle.warm`` keeps in this process
    (gpustack_k3/oracle/verdict.py), so a test going through ``engine_verdict`` finds the same worker.

    ``get(release)``: the running worker, started now if there is none or the one there died; a release that could
    not start is not tried again (its reason is given to every test that asks: ``tiers.unavailable``, a failure
    under CI=true). ``start(releases)``: start those STARTS_AT_ONCE at a time. ``close()``: close every worker of
    the process at once (the pool's and any a test started through ``warm``)."""

    def __init__(self) -> None:
        self.failed: dict[str, str] = {}
        self.started: list[str] = []     # releases in the order their workers were started (a restart counts again)
        self._lock = threading.Lock()
        self._starting: dict[str, threading.Lock] = {}
        self._last: dict[str, object] = {}   # the worker get() last returned per release (a new one: a start)

    def get(self, release: str):
        from gpustack_k3.oracle import verdict

        with self._lock:
            one = self._starting.setdefault(release, threading.Lock())
        with one:   # one start per release at a time (warm() alone would start two workers for two threads)
            if release in self.failed:
                tiers.unavailable(self.failed[release], require_env=REQUIRE_ENV)
            try:
                worker = verdict.warm(release)   # the running worker, or a new one if there is none or it exited
            except verdict.EngineVerdictUnavailable as exc:
                self.failed[release] = f"engine oracle {release}: {exc}"
                tiers.unavailable(self.failed[release], require_env=REQUIRE_ENV)
            if worker is not self._last.get(release):
                self.started.append(release)
                self._last[release] = worker
            return worker

    def start(self, releases: Iterable[str]) -> None:
        _start(self.get, releases)

    def start_for_session(self, session, directory: str | Path) -> list[str]:
        """Start the workers of the releases the session's selected tests under ``directory`` take (two at a time),
        and return them; in a pytest-xdist worker, none: its scheduler sends it only some of the modules (whole
        modules: tools/testgate.py's ``--dist loadfile``), so each release starts there at the first test that asks
        for it, and a release no test of that worker asks for is never started."""
        if xdist_worker():
            return []
        releases = session_releases(session, directory)
        self.start(releases)
        return releases

    def close(self) -> None:
        from gpustack_k3.oracle import verdict

        verdict.close_all()
        self._last.clear()


def session_releases(session, directory: str | Path) -> list[str]:
    """The oracle release keys (gpustack_k3/oracle/releases.py) that the session's selected tests under
    ``directory`` (a conftest's ``__file__`` stands for its directory) take as their ``release`` parameter, in
    order, once each."""
    from gpustack_k3.oracle.releases import RELEASES

    root = Path(directory)
    root = root.parent if root.suffix == ".py" else root
    out = []
    for item in session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("release") in RELEASES and root in Path(str(item.path)).parents:
            out.append(params["release"])
    return list(dict.fromkeys(out))


def selected_releases(request) -> list[str]:
    """The ``release`` parameters of the module's selected tests (``-k``/``-m`` narrow them), in order, once each."""
    out = []
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.module is request.module and "release" in params:
            out.append(params["release"])
    return list(dict.fromkeys(out))


@contextlib.contextmanager
def started_together(get: Callable[[str], object], releases: Iterable[str]) -> Iterator[None]:
    """Start ``get(release)`` for every release, STARTS_AT_ONCE at a time, before the module's tests. ``get`` is
    the ``oracles`` fixture of tests/engine_oracle/conftest.py: the session's pool, which keeps what it started for
    the later modules and closes it at the session's end (so nothing is closed here; a release already running is
    found at once). A release that cannot start is left to the test that asks for it (``get`` raises there again:
    a skip on a developer machine, a failure under CI=true)."""
    _start(get, releases)
    yield


def _start(get: Callable[[str], object], releases: Iterable[str]) -> None:
    from gpustack_k3.oracle import models
    from gpustack_k3.oracle.judge import RELEASES, worker_config
    from gpustack_k3.oracle.warmup import seed_lines

    releases = list(dict.fromkeys(releases))
    if not releases:
        return
    # What a start computes in this process, once here first, in this thread: every Oracle start (re)writes the model
    # directories whose content differs (the concurrent starts then only read them), and the product's first-use
    # set-up is not for two threads at once (a catalog start-up cache miss makes its types dataclasses in place,
    # gpustack_k3/catalog/loader.py _as_dataclasses: a second thread validating meanwhile saw "Field required").
    models.write_models()
    for release in releases:
        if release in RELEASES:
            with contextlib.suppress(Exception):   # a release that cannot start: its test says why
                worker_config(release)
            seed_lines(release)

    def start(release: str) -> None:
        try:
            get(release)
        except BaseException:  # noqa: BLE001 - pytest's skip/fail outcomes too: the test's own call reports it
            pass

    with ThreadPoolExecutor(starts_at_once()) as pool:
        list(pool.map(start, releases))
