"""The kind tests' preflight: run a script's ``--preflight`` and skip with its ``PREFLIGHT:`` reason (exit 3) where
its prerequisites are missing (e2e/kind/run.sh, e2e/kind/lws.sh)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

PREFLIGHT_MISSING = 3


def preflight(script: Path, *args: str, timeout: int = 300) -> None:
    res = subprocess.run(["bash", str(script), "--preflight", *args], capture_output=True, text=True,
                         timeout=timeout, check=False)
    if res.returncode == PREFLIGHT_MISSING:
        reason = [ln for ln in res.stderr.splitlines() if "PREFLIGHT:" in ln]
        pytest.skip(reason[-1].split("PREFLIGHT:", 1)[1].strip() if reason else res.stderr.strip())
    assert res.returncode == 0, f"preflight failed unexpectedly: {res.stderr}"
