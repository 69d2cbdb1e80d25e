"""gpustack_k3/oracle/engine_side/worker.py ``_LineWatch`` (the aimed lines' cheap answer to "did this line run?"):
the watched lines that ran and only those, in nested functions, a raise's line, an assert's first code line, a
thread's code; nothing of another file; tracing off after ``stop``. (Against coverage.py on the releases' own code:
tests/engine_oracle/test_aimed.py test_the_line_mode_answers_as_coverage_does.)"""
from __future__ import annotations

import importlib.util
import sys
import threading

from gpustack_k3.oracle.engine_side import worker

SOURCE = '''\
def check(x):
    if x > 1:
        raise ValueError("too big")          # line 3
    def inner(y):
        assert (
            y < 5                            # line 6: the assert's first code line
        ), "y"
        return y
    return inner(x + 3)


def other():
    return 1                                 # line 13


def in_thread(out):
    out.append(2)                            # line 17
'''


def _module(tmp_path, name="watched_speed10"):
    p = tmp_path / f"{name}.py"
    p.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location(name, p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, str(p)


def test_the_watched_lines_that_ran_and_only_those(tmp_path):
    mod, path = _module(tmp_path)
    w = worker._LineWatch({path: [3, 6, 13, 17]})
    try:
        try:
            mod.check(0)       # inner's assert (line 6) holds with y=3 -- runs; line 3 does not
            mod.check(2)       # raises at line 3
        except ValueError:
            pass
        out = []
        t = threading.Thread(target=mod.in_thread, args=(out,))
        t.start()
        t.join()
    finally:
        ran = w.stop()
    assert ran == {path: [3, 6, 17]}
    assert sys.gettrace() is None


def test_nothing_ran_nothing_said(tmp_path):
    mod, path = _module(tmp_path, "watched_speed10_b")
    w = worker._LineWatch({path: [3]})
    mod.check(0)
    mod.other()
    assert w.stop() == {}
