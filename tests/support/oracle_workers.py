"""Start the engine-oracle workers a test module needs two at a time, and close them all at once.

An oracle worker's start (importing one release's code and preloading what its lines import) keeps one core busy
for 10-25 s; the serial tier started them one after another while the CI machine's second core idled (measured with
a /proc sampler over tests/engine_oracle/test_oracle_sample.py and test_neutral_judge.py: 0.97 runnable threads on
average, fewer than 2 in 97 % of the samples). Closing waits for each worker's interpreter to finish (2-7 s each,
the release's modules torn down), one after another too. Nothing about a verdict changes: each line is still
judged by its release's worker, in the order the test sends it, in a forked child of that worker.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

STARTS_AT_ONCE = 2   # the CI machine's cores


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
    """Start ``get(release)`` for every release, STARTS_AT_ONCE at a time, before the module's tests; close what was
    started, all at once, after them. ``get`` is the ``oracles`` fixture of tests/engine_oracle/conftest.py: it keeps
    what it started, so the tests' own calls find the workers running. A release that cannot start is left to the
    test that asks for it (``get`` raises there again: a skip on a developer machine, a failure under CI=true)."""
    from gpustack_k3.oracle import models
    from gpustack_k3.oracle.judge import RELEASES, worker_config
    from gpustack_k3.oracle.warmup import seed_lines

    releases = list(dict.fromkeys(releases))   # once each: get() is not safe for one release twice at once
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
    started: list = []

    def start(release: str) -> None:
        try:
            started.append(get(release))
        except BaseException:  # noqa: BLE001 - pytest's skip/fail outcomes too: the test's own call reports it
            pass

    with ThreadPoolExecutor(STARTS_AT_ONCE) as pool:
        list(pool.map(start, releases))
    try:
        yield
    finally:
        if started:
            with ThreadPoolExecutor(len(started)) as pool:
                list(pool.map(lambda o: o.close(), started))
