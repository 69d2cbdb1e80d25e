"""The engine-oracle tier's shared fixture ``oracles``: ``oracles(release)`` is that release's worker, one per release
for the whole test session, started on first use and closed, all at once, when the session ends.

It was one per release per test module (module scope): a release's worker was started again in every module that
asked for it, 10-25 s of one core each, and closed at the module's end (2-7 s each). One per session is enough
because a worker's state does not depend on the lines it judged: it preloads from a fixed set of lines
(gpustack_k3/oracle/warmup.py seed_lines) and judges each line in a forked child of itself (judge.py;
tests/engine_oracle/test_neutral_judge.py re-judges a sample in shuffled order, after the other lines of its module,
and gets identical verdicts). Every line is still judged by its release's own code, when the test sends it.

The workers are the ones ``gpustack_k3.oracle.warm`` keeps in this process (gpustack_k3/oracle/verdict.py), so the
tests that go through ``engine_verdict`` / ``check-args --engine-verdict`` (which call ``warm``) find the same worker,
and the session's end closes theirs too, all at once instead of one after another at interpreter exit. A worker that
died (a crash in a line's test) is started again at the next ``oracles(release)``. A release that cannot start is
not retried in the session: each test asking for it fails (``CI=true`` / ``GPUSTACK_K3_REQUIRE_WHEELS=1``) or skips
with the same reason.

On first use the pool starts, two at a time (tests/support/oracle_workers.py), the releases that the session's
selected tests of this directory take as their ``release`` parameter: the tier runs alone on the CI machine's two
cores, and one start keeps one core busy. A test module needs no fixture of its own for that.

On pytest-xdist workers (tools/testgate.py runs this tier with ``-n 2 --dist loadfile``) each worker has its own pool
and its own verdict cache (tests/support/judge_cache.py); a module runs whole on one worker, so a table's repeated
lines still meet in one cache. A worker starts a release at the first test that asks for it (it does not know which
modules it will get), and the oracle's model directories are written once per host under a lock before any test
of the tier (``pytest_collection_finish``: the workers would otherwise write a changed file side by side).
Everything else a test writes is its own (``tmp_path``, the worker's temporary directories).
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.support import oracle_workers


@pytest.fixture(scope="session")
def oracles(request):
    pool = oracle_workers.Pool()
    request.addfinalizer(pool.close)
    pool.start_for_session(request.session, directory=__file__)
    return pool.get


def pytest_collection_finish(session) -> None:
    if not oracle_workers.xdist_worker():
        return
    here = Path(__file__).parent
    if any(here in Path(str(item.path)).parents for item in session.items):
        with contextlib.suppress(Exception):   # what cannot be written here fails the start that needs it, in a test
            oracle_workers.write_models_once_per_host()
