"""tests/support/oracle_workers.py ``Pool``, the session's engine-oracle workers behind the ``oracles`` fixture of
tests/engine_oracle/conftest.py: one worker per release for the session (shared with ``gpustack_k3.oracle.warm``),
a dead one started again, a release that cannot start not retried, every worker closed at the end. Unit tier: the
worker start (``verdict.warm``'s Oracle) is replaced by a fake that counts starts; no release code runs."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from gpustack_k3.oracle import verdict
from gpustack_k3.oracle.judge import OracleUnavailable
from tests.support import oracle_workers


class FakeProc:
    def __init__(self) -> None:
        self.code = None

    def poll(self):
        return self.code


class FakeOracle:
    starts: list[str] = []
    fail: set[str] = set()

    def __init__(self, release: str) -> None:
        if release in self.fail:
            raise OracleUnavailable(f"{release}: no wheel")
        time.sleep(0.05)   # a start takes time: two threads asking for one release overlap
        FakeOracle.starts.append(release)
        self.release, self.proc, self.closed = release, FakeProc(), 0

    def close(self, wait: bool = True) -> None:
        self.closed += wait   # close_all tells every worker first (wait=False), then waits for each
        self.proc.code = 0


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(verdict, "Oracle", FakeOracle)
    monkeypatch.setattr(verdict, "_WORKERS", {})
    monkeypatch.setattr(verdict.atexit, "register", lambda fn: None)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(oracle_workers.REQUIRE_ENV, raising=False)
    FakeOracle.starts, FakeOracle.fail = [], set()
    return FakeOracle


def test_one_worker_per_release_for_the_session_shared_with_warm(fake):
    pool = oracle_workers.Pool()
    a = pool.get("vllm-0.33.0")
    assert pool.get("vllm-0.33.0") is a and verdict.warm("vllm-0.33.0") is a
    b = pool.get("sglang-0.5.23")
    assert b is not a and fake.starts == ["vllm-0.33.0", "sglang-0.5.23"]
    pool.close()
    assert (a.closed, b.closed) == (1, 1) and verdict._WORKERS == {}


def test_two_threads_asking_for_one_release_start_one_worker(fake):
    pool = oracle_workers.Pool()
    got = []
    threads = [threading.Thread(target=lambda: got.append(pool.get("vllm-0.34.0"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake.starts == ["vllm-0.34.0"] and len({id(o) for o in got}) == 1


def test_a_worker_that_died_is_started_again(fake):
    pool = oracle_workers.Pool()
    a = pool.get("vllm-0.11.0")
    a.proc.code = -9
    b = pool.get("vllm-0.11.0")
    assert b is not a and fake.starts == ["vllm-0.11.0", "vllm-0.11.0"] and pool.started == fake.starts


def test_a_release_that_cannot_start_is_not_tried_again_and_fails_under_ci(fake, monkeypatch):
    fake.fail = {"vllm-0.28.0"}
    pool = oracle_workers.Pool()
    with pytest.raises(pytest.skip.Exception, match="engine oracle vllm-0.28.0: vllm-0.28.0: no wheel"):
        pool.get("vllm-0.28.0")
    fake.fail = set()   # it would start now: the pool does not ask again
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true but engine oracle vllm-0.28.0"):
        pool.get("vllm-0.28.0")
    assert fake.starts == [] and "vllm-0.28.0" not in verdict._WORKERS


def test_start_starts_each_release_once_and_started_together_closes_nothing(fake, monkeypatch):
    from gpustack_k3.oracle import judge, models, warmup

    monkeypatch.setattr(models, "write_models", lambda: {})
    monkeypatch.setattr(judge, "worker_config", lambda release: {})
    monkeypatch.setattr(warmup, "seed_lines", lambda release: [])
    fake.fail = {"sglang-0.5.22"}
    pool = oracle_workers.Pool()
    pool.start(["vllm-0.33.0", "vllm-0.29.0", "vllm-0.33.0", "sglang-0.5.22"])
    assert sorted(fake.starts) == ["vllm-0.29.0", "vllm-0.33.0"] and "sglang-0.5.22" in pool.failed
    with oracle_workers.started_together(pool.get, ["vllm-0.29.0", "vllm-0.32.0-cpu"]):
        pass
    assert sorted(fake.starts) == ["vllm-0.29.0", "vllm-0.32.0-cpu", "vllm-0.33.0"]
    assert all(not o.closed for o in verdict._WORKERS.values()) and len(verdict._WORKERS) == 3


def test_session_releases_are_the_release_keys_under_the_directory(tmp_path):
    def item(path, **params):
        return SimpleNamespace(path=path, callspec=SimpleNamespace(params=params))

    here = tmp_path / "engine_oracle"
    session = SimpleNamespace(items=[
        item(here / "test_a.py", release="vllm-0.33.0"), item(here / "test_a.py", release="0.5.23"),
        item(here / "sub" / "test_b.py", release="sglang-0.5.23"), item(here / "test_a.py", release="vllm-0.33.0"),
        item(tmp_path / "core" / "test_c.py", release="vllm-0.11.0"), item(here / "test_d.py", other="vllm-0.28.0"),
        SimpleNamespace(path=here / "test_e.py")])
    assert oracle_workers.session_releases(session, here / "conftest.py") == ["vllm-0.33.0", "sglang-0.5.23"]
