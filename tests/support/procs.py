"""Stop what a fixture starts, on every exit path (issue 33 item 7), including what it starts indirectly: a
``gpustack-k3 run`` whose engine runs in a session of its own, a server's worker processes.

A fixture puts a marker of its own into the environment of what it starts (``marked``); every descendant inherits
it unless something replaces the whole environment. ``stop_marked`` stops whatever still carries it (SIGTERM to
the process group, SIGKILL after the grace period) and says what it had to stop. The scan is the test gate's
(tools/testgate.py ``run_processes``), with the fixture's variable: the gate's own marker stays untouched.
"""
from __future__ import annotations

import os
import uuid

from tools.testgate import Proc, leftover_processes

FIXTURE_MARKER = "GPUSTACK_K3_TEST_FIXTURE"


def marked(env: dict[str, str] | None = None) -> tuple[dict[str, str], str]:
    """(``env`` or this process's environment, plus a fresh marker; the marker)."""
    token = uuid.uuid4().hex
    return {**(os.environ if env is None else env), FIXTURE_MARKER: token}, token


def stop_marked(token: str, grace_s: float = 30.0) -> list[Proc]:
    """Stop every live process carrying ``token``, after ``grace_s`` to go by itself; what had to be stopped."""
    return leftover_processes([], token, grace_s, var=FIXTURE_MARKER) or []
