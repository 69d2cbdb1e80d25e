"""A test session's cache of engine-oracle verdicts: ``judge_line(oracle, argv, env)`` judges a line once per session
and gives the same answer to every later test that sends the same line to the same release.

The engine-check tables judge many lines twice: an example's accepted twin is another example's refused line, the
Python rules' lines repeat the table's, an entry listed for several examples of one release repeats its base line
(tests/engine_oracle/test_checks_sglang.py judged 1,330 lines, 1,152 distinct; test_checks_vllm.py 970, 918). A
verdict depends on the release, the line (argv after the oracle's model mapping, env, hardware, GPU count) and the
files the line names, nothing else: each line is judged in a forked child of a worker whose state never depends on
the lines before it (tests/engine_oracle/test_neutral_judge.py re-judges a sample in shuffled order and gets
identical verdicts; that test calls the worker itself, never this cache). So the key is exactly those: the release,
the mapped argv, the env, hardware and GPUs, and each existing path the line names (a model directory: its files'
names, sizes and modification times; a file: its size and modification time), so a line on a config.json that a
test rewrote is judged again. ``GPUSTACK_K3_JUDGE_CACHE=0`` judges every line (no cache). Each caller gets its own
copy of the answer."""
from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

_CACHE: dict[tuple, dict] = {}
_PATH = re.compile(r"/[^\s\"',=;:{}\[\]]+")
STATS = {"judged": 0, "cached": 0}


def _files(tokens: list[str]) -> tuple:
    out = []
    for tok in tokens:
        for p in sorted(set(_PATH.findall(tok))):
            try:
                path = Path(p)
                if path.is_dir():
                    out.append((p, tuple(sorted((f.name, st.st_size, st.st_mtime_ns) for f in path.iterdir()
                                                if f.is_file() and (st := f.stat())))))
                elif path.is_file():
                    st = path.stat()
                    out.append((p, st.st_size, st.st_mtime_ns))
            except OSError:
                continue
    return tuple(out)


def key(oracle, argv: list[str], env: dict | None, hardware: str, gpus: int | None) -> tuple:
    mapped = oracle._map([str(t) for t in argv])
    return (oracle.release, tuple(mapped), json.dumps(env or {}, sort_keys=True), hardware, gpus, _files(mapped))


def judge_line(oracle, argv: list[str], env: dict | None = None, hardware: str = "b300",
               gpus: int | None = None) -> dict:
    """``oracle.judge_line(argv, env, hardware, gpus)``, once per session for the same release, line and files."""
    if os.environ.get("GPUSTACK_K3_JUDGE_CACHE", "1") == "0":
        return oracle.judge_line(argv, env, hardware, gpus)
    k = key(oracle, argv, env, hardware, gpus)
    if k in _CACHE:
        STATS["cached"] += 1
    else:
        STATS["judged"] += 1
        ans = oracle.judge_line(argv, env, hardware, gpus)
        if ans.get("reason") == "oracle-error":   # a crash is not the release's answer: never kept
            return ans
        _CACHE[k] = ans
    return copy.deepcopy(_CACHE[k])
