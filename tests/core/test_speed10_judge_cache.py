"""tests/support/judge_cache.py: a line is judged once per session per release, line and the files it names; a
changed file, another env or another release is judged again; a crash is never kept; GPUSTACK_K3_JUDGE_CACHE=0
judges every time."""
from __future__ import annotations

import os

from tests.support import judge_cache


class FakeOracle:
    def __init__(self, release: str, aliases: dict[str, str]) -> None:
        self.release, self.aliases, self.calls = release, aliases, []

    def _map(self, argv):
        return [self.aliases.get(t, t) for t in argv]

    def judge_line(self, argv, env=None, hardware="b300", gpus=None):
        self.calls.append((tuple(argv), dict(env or {}), hardware, gpus))
        if "--crash" in argv:
            return {"verdict": "not_decidable", "reason": "oracle-error", "detail": "boom"}
        return {"verdict": "accepted", "n": len(self.calls), "stand_in": [{"model": "m"}]}


def test_the_same_line_is_judged_once_and_each_caller_gets_its_own_copy(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUSTACK_K3_JUDGE_CACHE", raising=False)
    monkeypatch.setattr(judge_cache, "_CACHE", {})
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text("{}")
    o = FakeOracle("vllm-0.34.0", {"/models/M": str(d)})
    a = judge_cache.judge_line(o, ["/models/M", "-tp", "2"], {})
    a["stand_in"][0]["model"] = "changed by a test"
    b = judge_cache.judge_line(o, ["/models/M", "-tp", "2"], {})
    assert len(o.calls) == 1 and b == {"verdict": "accepted", "n": 1, "stand_in": [{"model": "m"}]}
    judge_cache.judge_line(o, ["/models/M", "-tp", "2"], {"X": "1"})           # another env
    judge_cache.judge_line(o, ["/models/M", "-tp", "2"], {}, gpus=4)           # another GPU count
    judge_cache.judge_line(FakeOracle("vllm-0.33.0", o.aliases), ["/models/M", "-tp", "2"], {})   # another release
    assert len(o.calls) == 3
    (d / "config.json").write_text('{"num_attention_heads": 3}')               # the model's file rewritten
    os.utime(d / "config.json", ns=(1, 1))
    judge_cache.judge_line(o, ["/models/M", "-tp", "2"], {})
    assert len(o.calls) == 4
    judge_cache.judge_line(o, ["/models/M", "--crash"], {})
    judge_cache.judge_line(o, ["/models/M", "--crash"], {})
    assert len(o.calls) == 6


def test_a_path_inside_a_json_option_is_part_of_the_key(tmp_path, monkeypatch):
    monkeypatch.setattr(judge_cache, "_CACHE", {})
    f = tmp_path / "draft"
    f.mkdir()
    o = FakeOracle("vllm-0.34.0", {})
    argv = ["/m", "--speculative-config", '{"model": "%s"}' % f]
    judge_cache.judge_line(o, argv, {})
    (f / "config.json").write_text("{}")
    judge_cache.judge_line(o, argv, {})
    assert len(o.calls) == 2


def test_the_switch_turns_the_cache_off(monkeypatch):
    monkeypatch.setattr(judge_cache, "_CACHE", {})
    monkeypatch.setenv("GPUSTACK_K3_JUDGE_CACHE", "0")
    o = FakeOracle("vllm-0.34.0", {})
    judge_cache.judge_line(o, ["/m"], {})
    judge_cache.judge_line(o, ["/m"], {})
    assert len(o.calls) == 2
