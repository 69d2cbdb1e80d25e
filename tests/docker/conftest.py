"""Docker tier fixtures: a real dockerd (ours, or DOCKER_HOST), locally built images, free ports.

* ``docker_host``: DOCKER_HOST when set (``.ci/run`` starts the daemon), else ``.ci/setup_dockerd.sh start``;
  a daemon this fixture started is stopped (by its recorded PID) at the end of the session.
* ``base_image``: ``.ci/setup_dockerd.sh base-image`` (debootstrap + docker import, cached by tag).
* ``replay_image``: ``tests/docker/images/replay-engine`` built FROM the base, tagged with a hash
  of the build context and the base image id, so an unchanged context is never rebuilt.
Timings (install/start, base image, replay image) are printed in the terminal summary.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.support import ports, tiers

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / ".ci" / "setup_dockerd.sh"
REPLAY_CONTEXT = Path(__file__).resolve().parent / "images" / "replay-engine"
REPLAY_REPO = "gpustack-k3/replay-engine"
MANAGED = "app.kubernetes.io/managed-by=gpustack-k3"
TEST_PREFIX = "k3test-"

TIMINGS: dict[str, str] = {}


def _setup(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(SETUP), *args], capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})


def _last_value(stdout: str, key: str) -> str | None:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith(key + "="):
            return line.split("=", 1)[1]
    return None


@pytest.fixture(scope="session")
def docker_host() -> str:
    env_host = os.environ.get("DOCKER_HOST")
    if env_host:
        TIMINGS["dockerd"] = f"given by DOCKER_HOST={env_host}"
        yield env_host
        return
    already = _setup("status").returncode == 0
    t0 = time.monotonic()
    proc = _setup("start")
    host = _last_value(proc.stdout, "DOCKER_HOST")
    if proc.returncode != 0 or not host:
        tiers.unavailable(f"dockerd could not start via {SETUP.relative_to(REPO)} start (exit {proc.returncode}): "
                    f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'no output'}")
    TIMINGS["dockerd"] = ("already running" if already else
                          f"install (if needed) + start {time.monotonic() - t0:.1f} s") + f" ({host})"
    yield host
    if not already:
        _setup("stop")


@pytest.fixture(scope="session")
def docker_client(docker_host: str):
    import docker
    client = docker.DockerClient(base_url=docker_host, timeout=120)
    client.ping()
    yield client
    leftovers = [c for c in client.containers.list(all=True, filters={"label": MANAGED})
                 if c.name.startswith(TEST_PREFIX)]
    for c in leftovers:
        c.remove(force=True)
    client.close()
    assert not leftovers, f"tests left containers behind: {[c.name for c in leftovers]}"


@pytest.fixture(scope="session")
def base_image(docker_host: str) -> str:
    t0 = time.monotonic()
    proc = _setup("base-image", env={"DOCKER_HOST": docker_host})
    image = _last_value(proc.stdout, "BASE_IMAGE")
    assert proc.returncode == 0 and image, f"base image build failed:\n{proc.stderr[-3000:]}"
    cached = "cached" in proc.stderr
    TIMINGS["base image"] = f"{image} {'cached' if cached else 'built'} in {time.monotonic() - t0:.1f} s"
    return image


def _context_digest(context: Path, base_id: str) -> str:
    h = hashlib.sha256(base_id.encode())
    for path in sorted(p for p in context.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(context)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:12]


@pytest.fixture(scope="session")
def replay_image(docker_client, base_image: str) -> str:
    import docker

    base_id = docker_client.images.get(base_image).id
    tag = f"{REPLAY_REPO}:{_context_digest(REPLAY_CONTEXT, base_id)}"
    t0 = time.monotonic()
    try:
        docker_client.images.get(tag)
        TIMINGS["replay image"] = f"{tag} cached ({time.monotonic() - t0:.2f} s)"
    except docker.errors.ImageNotFound:
        docker_client.images.build(path=str(REPLAY_CONTEXT), tag=tag, buildargs={"BASE_IMAGE": base_image},
                                   network_mode="none", rm=True, forcerm=True)
        TIMINGS["replay image"] = f"{tag} built in {time.monotonic() - t0:.1f} s"
        for img in docker_client.images.list(name=REPLAY_REPO):  # drop builds of older contexts
            if tag not in img.tags:
                try:
                    docker_client.images.remove(img.id, force=False)
                except docker.errors.APIError:
                    pass  # still used by a container: leave it
    return tag


@pytest.fixture
def free_port() -> int:
    return ports.free_port()


@pytest.fixture
def container_name() -> str:
    return f"{TEST_PREFIX}{uuid.uuid4().hex[:8]}"


@pytest.fixture
def runner(docker_client):
    from gpustack_k3.runtime.docker import DockerRunner, local_ulimit_caps

    # this VM's dockerd inherits an 8 MiB memlock hard limit and no CAP_SYS_RESOURCE: clamp to it
    return DockerRunner(docker_client, poll_s=0.1, ulimit_caps=local_ulimit_caps())


def pytest_terminal_summary(terminalreporter) -> None:
    if TIMINGS:
        terminalreporter.section("docker tier timings")
        for key, value in TIMINGS.items():
            terminalreporter.write_line(f"{key}: {value}")
