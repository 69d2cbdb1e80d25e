"""The parser service of the engine tier (tests/engine/vllm_parser_service_suite5.py behind
tests/engine/vllm_cpu_harness.py ``parser_service``) without vLLM: run by this interpreter, it loads
.ci/vllm_cpu/vllm_argparser.py (whose top level needs only the standard library), answers a malformed request with an
error, a parse request with vllm_argparser's own failure to import vLLM, and keeps serving after both; one service
per interpreter, stopped by ``close_parser_services``. The answers themselves are the engine tier's
(test_argv_differential.py, test_argv_linear_differential.py, test_flag_drift.py, with the venv)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.engine import vllm_cpu_harness as harness


def test_requests_and_failures_go_through_one_service():
    python = Path(sys.executable)
    service = harness.parser_service(python)
    try:
        assert harness.parser_service(python) is service
        with pytest.raises(RuntimeError, match="a request is"):
            service.ask("options", [])
        with pytest.raises(RuntimeError, match=r"(?s)parse failed: .*No module named 'vllm'"):
            harness.real_parse(python, [["--model", "/m"]])
        with pytest.raises(RuntimeError, match="report failed"):
            harness.real_report(python, [["--model", "/m"]])
        assert service.proc.poll() is None and harness.parser_service(python) is service
    finally:
        harness.close_parser_services()
    assert service.proc.poll() is not None and harness.parser_service.__module__ == harness.__name__
    assert harness._SERVICES == {}
