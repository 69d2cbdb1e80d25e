"""A free TCP port on the loopback interface, for tests that start servers (engines, emulators, workers)."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A port the kernel just handed out on 127.0.0.1 and released (free until someone else binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
