"""GPUStack tier fixtures: a real GPUStack 2.3.0 server (``.ci/setup_gpustack.sh``, gpustack.md §5).

* ``gs``: the running server (``setup_gpustack.sh env``) or, if none runs, one started here
  (``setup_gpustack.sh start``: cached venv, PostgreSQL 15 + ``gpustack start`` inside a network namespace
  with only ``lo``) and stopped at the end of the session by PID, namespace deleted - also after failures.
  The tests talk to it through the host-loopback forwarder the script starts (``GPUSTACK_URL``); the fake
  worker runs inside the namespace via ``ip netns exec``.
* An admin API key is created over Basic auth; the cluster ``default`` is created when missing.
Only tests marked ``gpustack`` use these fixtures. Timings go to the terminal summary.
"""
from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import tiers

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / ".ci" / "setup_gpustack.sh"
TIMINGS: dict[str, str] = {}


@dataclass
class GPUStack:
    url: str            # host loopback (forwarded into the namespace)
    netns: str
    netns_url: str      # the same server as seen from inside the namespace
    python: str         # the GPUStack venv's interpreter
    run: Path
    key: str
    key_file: Path
    cluster: str
    cluster_id: int

    def http(self, key: str | None = None):
        import httpx

        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {key or self.key}"}, timeout=60)


def _env(stdout: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line and not line.startswith("["))


@pytest.fixture(scope="session")
def gs(tmp_path_factory) -> GPUStack:
    import httpx

    t_session = time.monotonic()
    proc = subprocess.run([str(SETUP), "env"], capture_output=True, text=True)
    started = False
    if proc.returncode != 0:
        if os.geteuid() != 0:
            tiers.unavailable("the GPUStack tier needs root (ip netns, PostgreSQL as postgres)")
        t0 = time.monotonic()
        # output to files, not pipes: a daemon that inherited a pipe would keep it open forever
        logdir = tmp_path_factory.mktemp("gs-setup")
        with open(logdir / "stdout", "w") as out, open(logdir / "stderr", "w") as err:
            rc = subprocess.run([str(SETUP), "start"], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                timeout=1800).returncode
        proc = subprocess.CompletedProcess([], rc, (logdir / "stdout").read_text(), (logdir / "stderr").read_text())
        if proc.returncode != 0:
            subprocess.run([str(SETUP), "stop"], capture_output=True, text=True)
            pytest.fail(f"{SETUP.name} start failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        started = True
        TIMINGS["server"] = f"install (if needed) + start {time.monotonic() - t0:.1f} s"
        TIMINGS["setup log"] = " | ".join(ln.split("] ", 1)[-1] for ln in proc.stderr.splitlines()
                                          if "installed in" in ln or " up " in ln or "cached:" in ln)
    else:
        TIMINGS["server"] = "already running (setup_gpustack.sh env)"
    env = _env(proc.stdout)
    try:
        pw = Path(env["GPUSTACK_ADMIN_PASSWORD_FILE"]).read_text().strip()
        admin = httpx.Client(base_url=env["GPUSTACK_URL"], auth=("admin", pw), timeout=60)
        r = admin.post("/v2/api-keys", json={"name": f"pytest-{int(time.time() * 1000)}"})
        r.raise_for_status()
        key = r.json()["value"]
        key_file = tmp_path_factory.mktemp("gs") / "api_key"
        key_file.write_text(key)
        key_file.chmod(0o644)
        c = httpx.Client(base_url=env["GPUSTACK_URL"], headers={"Authorization": f"Bearer {key}"}, timeout=60)
        clusters = c.get("/v2/clusters").raise_for_status().json()["items"]
        found = [x for x in clusters if x["name"] == "default"]
        cid = found[0]["id"] if found else c.post("/v2/clusters", json={"name": "default", "provider": "Docker"}
                                                  ).raise_for_status().json()["id"]
        yield GPUStack(env["GPUSTACK_URL"], env["GPUSTACK_NETNS"], env["GPUSTACK_NETNS_URL"], env["GPUSTACK_PYTHON"],
                       Path(env["GPUSTACK_RUN"]), key, key_file, "default", int(cid))
    finally:
        if started:
            subprocess.run([str(SETUP), "stop"], capture_output=True, text=True, timeout=120)
            TIMINGS["stopped"] = "server, PostgreSQL, forwarder stopped by PID; netns deleted"
        TIMINGS["tier"] = f"{time.monotonic() - t_session:.1f} s (session fixture lifetime)"


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.write_sep("-", "gpustack tier timings")
        for k, v in TIMINGS.items():
            terminalreporter.write_line(f"{k}: {v}")
