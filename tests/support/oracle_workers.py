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

    # every Oracle start (re)writes the model directories whose content differs: once here, so the concurrent
    # starts find them written and only read them
    models.write_models()
    started: list = []

    def start(release: str) -> None:
        try:
            started.append(get(release))
        except BaseException:  # noqa: BLE001 - pytest's skip/fail outcomes too: the test's own call reports it
            pass

    with ThreadPoolExecutor(STARTS_AT_ONCE) as pool:
        list(pool.map(start, list(dict.fromkeys(releases))))   # once each: get() is not safe for one release twice
    try:
        yield
    finally:
        if started:
            with ThreadPoolExecutor(len(started)) as pool:
                list(pool.map(lambda o: o.close(), started))
