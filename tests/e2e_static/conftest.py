"""Fixtures of the image checks that need a dockerd (marker ``docker``): the daemon the Docker tier
runs (DOCKER_HOST, set by .ci/run; else the one .ci/setup_dockerd.sh records) and the local Debian
base image (``.ci/setup_dockerd.sh base-image``; nothing can be pulled on the CI machines)."""
from __future__ import annotations

import os
import subprocess

import pytest

from tests.support import tiers

from ._docker import docker
from ._paths import REPO

SETUP = REPO / ".ci" / "setup_dockerd.sh"


@pytest.fixture(scope="session")
def e2e_docker_host() -> str:
    h = os.environ.get("DOCKER_HOST")
    if not h:
        env = subprocess.run(["bash", str(SETUP), "env"], capture_output=True, text=True, check=False)
        h = env.stdout.strip().partition("=")[2]
    if not h or docker(h, "version", "--format", "{{.Server.Version}}", timeout=20).returncode != 0:
        tiers.unavailable(f"no dockerd answers on {h or 'DOCKER_HOST (unset)'}: start it with .ci/setup_dockerd.sh start")
    return h


@pytest.fixture(scope="session")
def e2e_base_image(e2e_docker_host: str) -> str:
    base = os.environ.get("GPUSTACK_K3_BASE_IMAGE", "gpustack-k3/base:bookworm-py3")
    if docker(e2e_docker_host, "image", "inspect", base).returncode != 0:
        proc = subprocess.run(["bash", str(SETUP), "base-image"], capture_output=True, text=True, timeout=900,
                              check=False, env={**os.environ, "DOCKER_HOST": e2e_docker_host})
        assert proc.returncode == 0, proc.stderr[-3000:]
    return base
