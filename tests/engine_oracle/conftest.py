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
"""
from __future__ import annotations

import pytest

from tests.support import oracle_workers


@pytest.fixture(scope="session")
def oracles(request):
    pool = oracle_workers.Pool()
    request.addfinalizer(pool.close)
    pool.start(oracle_workers.session_releases(request.session, directory=__file__))
    return pool.get
