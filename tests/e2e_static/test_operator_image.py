"""The operator image, built for real on the Docker tier's dockerd (marker ``docker``): FROM the local
Debian base (nothing can be pulled on the CI machines; pip reaches PyPI through --network host), then
run as the chart runs it: uid 65532, read-only root filesystem, /tmp a tmpfs, no capabilities.

The tag carries a hash of the build context and the base image id, so an unchanged tree is not rebuilt.
Run: ``DOCKER_HOST=... python3 -m pytest -m docker tests/e2e_static``.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest
import yaml

from ._docker import docker as _docker
from ._paths import (
    BUILD_SH,
    DOCKERIGNORE,
    INSTALL_YAML,
    KIND_CR,
    OPERATOR_DOCKERFILE,
    REPO,
)

pytestmark = pytest.mark.docker

REPO_TAG = "gpustack-k3/operator-test"
RUN_AS_CHART = ["--network", "none", "--read-only", "--tmpfs", "/tmp:rw,size=64m", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges"]


@pytest.fixture(scope="module")
def host(e2e_docker_host: str) -> str:
    return e2e_docker_host


@pytest.fixture(scope="module")
def image(host: str, e2e_base_image: str) -> str:
    base = e2e_base_image
    base_id = _docker(host, "image", "inspect", "--format", "{{.Id}}", base).stdout.strip()
    h = hashlib.sha256(base_id.encode())
    files = [OPERATOR_DOCKERFILE, DOCKERIGNORE, REPO / "pyproject.toml",
             *sorted(p for p in (REPO / "gpustack_k3").rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")]
    for p in files:
        h.update(str(p.relative_to(REPO)).encode() + b"\0" + p.read_bytes() + b"\0")
    tag = f"{REPO_TAG}:{h.hexdigest()[:12]}"
    if _docker(host, "image", "inspect", tag).returncode != 0:
        res = subprocess.run(["bash", str(BUILD_SH), "operator", tag, "--network", "host",
                              "--build-arg", f"BASE_IMAGE={base}"], capture_output=True, text=True, timeout=900,
                             check=False, env={**os.environ, "DOCKER_HOST": host})
        assert res.returncode == 0, res.stderr[-4000:]
        # older builds of this test (other trees) are only cache weight
        old = _docker(host, "image", "ls", REPO_TAG, "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
        for stale in (t for t in old if t != tag):
            _docker(host, "rmi", stale)
    return tag


def test_help_and_version_as_the_chart_runs_it(host, image):
    res = _docker(host, "run", "--rm", *RUN_AS_CHART, image, "--help")
    assert res.returncode == 0 and "Usage: gpustack-k3" in res.stdout, res.stderr
    ver = _docker(host, "run", "--rm", *RUN_AS_CHART, image, "--version")
    chart_version = yaml.safe_load((REPO / "charts" / "gpustack-k3" / "Chart.yaml").read_text())["appVersion"]
    assert ver.returncode == 0 and ver.stdout.strip() == f"gpustack-k3, version {chart_version}"
    who = _docker(host, "run", "--rm", *RUN_AS_CHART, "--entrypoint", "id", image)
    assert who.stdout.strip() == "uid=65532 gid=65532 groups=65532"


def test_chart_args_are_accepted_by_the_image(host, image):
    docs = [d for d in yaml.safe_load_all(INSTALL_YAML.read_text()) if d]
    (c,) = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"]
    res = _docker(host, "run", "--rm", *RUN_AS_CHART, "--entrypoint", c["command"][0], image, *c["args"], "--help")
    assert res.returncode == 0 and "Reconcile K3Deployment" in res.stdout, res.stdout + res.stderr
    # without a cluster the operator stops with a message, not a traceback
    run = _docker(host, "run", "--rm", *RUN_AS_CHART, image, *c["args"], timeout=60)
    assert run.returncode != 0
    assert "Traceback" not in run.stderr and "kubeconfig" in run.stderr.lower(), run.stderr


def test_package_data_is_in_the_image(host, image):
    """The catalog and templates are package data: the image renders the kind resource exactly as
    the checkout does."""
    here = subprocess.run([sys.executable, "-m", "gpustack_k3", "render", str(KIND_CR), "--target", "kubernetes"],
                          capture_output=True, text=True, check=True, cwd=REPO).stdout
    there = _docker(host, "run", "--rm", *RUN_AS_CHART, "-v", f"{KIND_CR}:/in/k3.yaml:ro", image,
                    "render", "/in/k3.yaml", "--target", "kubernetes")
    assert there.returncode == 0, there.stderr
    assert there.stdout == here
