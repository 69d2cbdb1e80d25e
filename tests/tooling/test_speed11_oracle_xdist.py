"""tests/support/oracle_workers.py on pytest-xdist workers (tools/testgate.py runs the engine_oracle tier with
``-n 2 --dist loadfile``): a worker starts no release ahead of its tests (it does not know which modules it gets),
starts one worker at a time, and the oracle's model directories are written under a lock, one writer at a time.
Unit tier: the worker start is a fake that counts starts, the model writer a fake that counts writers at once."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpustack_k3.oracle import models, verdict
from tests.support import oracle_workers


class FakeProc:
    def poll(self):
        return None


class FakeOracle:
    starts: list[str] = []

    def __init__(self, release: str) -> None:
        FakeOracle.starts.append(release)
        self.release, self.proc = release, FakeProc()

    def close(self, wait: bool = True) -> None:
        pass


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(verdict, "Oracle", FakeOracle)
    monkeypatch.setattr(verdict, "_WORKERS", {})
    monkeypatch.setattr(verdict.atexit, "register", lambda *a, **k: None)
    monkeypatch.setattr(oracle_workers, "_start", lambda get, releases: [get(r) for r in dict.fromkeys(releases)])
    FakeOracle.starts = []
    return FakeOracle


def _session(directory: Path, releases: list[str]):
    items = [SimpleNamespace(callspec=SimpleNamespace(params={"release": r}), path=directory / "test_x.py")
             for r in releases]
    return SimpleNamespace(items=items)


def test_a_serial_session_starts_its_releases_and_an_xdist_worker_none(fake, monkeypatch, tmp_path):
    session = _session(tmp_path, ["vllm-0.34.0", "sglang-0.5.23", "vllm-0.34.0"])
    monkeypatch.delenv(oracle_workers.XDIST_ENV, raising=False)
    assert oracle_workers.Pool().start_for_session(session, tmp_path) == ["vllm-0.34.0", "sglang-0.5.23"]
    assert fake.starts == ["vllm-0.34.0", "sglang-0.5.23"] and oracle_workers.starts_at_once() == 2
    verdict._WORKERS.clear()
    fake.starts = []
    monkeypatch.setenv(oracle_workers.XDIST_ENV, "gw1")
    pool = oracle_workers.Pool()
    assert pool.start_for_session(session, tmp_path) == [] and fake.starts == []
    assert oracle_workers.xdist_worker() == "gw1" and oracle_workers.starts_at_once() == 1
    pool.get("sglang-0.5.23")                       # a release starts at the first test asking for it
    assert fake.starts == ["sglang-0.5.23"] and pool.started == ["sglang-0.5.23"]


def test_model_directories_are_written_by_one_writer_at_a_time(monkeypatch, tmp_path):
    monkeypatch.setattr(models, "model_root", lambda: tmp_path / "engine-oracle" / "models")
    state = {"now": 0, "most": 0, "calls": 0}
    guard = threading.Lock()

    def write_models():
        with guard:
            state["now"] += 1
            state["calls"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.1)
        with guard:
            state["now"] -= 1
        return {}

    monkeypatch.setattr(models, "write_models", write_models)
    threads = [threading.Thread(target=oracle_workers.write_models_once_per_host) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert state == {"now": 0, "most": 1, "calls": 3}, state   # each writes (the later ones find nothing to change)
    assert (tmp_path / "engine-oracle" / "models.write.lock").is_file()
