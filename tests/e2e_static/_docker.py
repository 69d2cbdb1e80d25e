"""The docker CLI against one daemon (argv list, never a shell)."""
from __future__ import annotations

import subprocess


def docker(host: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "-H", host, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)
