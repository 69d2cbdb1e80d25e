"""argv target: the engine command as data (JSON) and as a copy-pasteable shell line.

``argv_document`` is ``{"image", "command", "args", "env"}`` straight from the launch spec (argv is
always a list). ``shell_command`` quotes every token with :func:`shlex.quote` and passes the
environment through ``env K=V ... cmd``; secret env values are never printed: the line inherits them
from the caller's environment and a comment names them.
"""
from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.core.launch_types import LaunchSpec


def argv_document(launch: "LaunchSpec") -> dict:
    return {
        "image": launch.image,
        "command": list(launch.command),
        "args": list(launch.args),
        "env": dict(launch.env),
    }


def shell_command(launch: "LaunchSpec") -> str:
    """``env K=V ... <command> <args>``, one flag per continuation line; every token shlex-quoted."""
    lines = [f"# {launch.name}: {launch.engine} {launch.engine_version}, image {launch.image}"]
    for s in launch.secret_env:
        lines.append(f"# needs {s.name} in the environment (Kubernetes: secret {s.secret_name}, key {s.secret_key})")
    words: list[list[str]] = [["env"]]
    words += [[shlex.quote(f"{k}={v}")] for k, v in launch.env.items()]
    words.append([shlex.quote(t) for t in launch.command])
    last_is_bare_flag = False
    for tok in launch.args:
        q = shlex.quote(tok)
        # One option per continuation line, like the seeds; a value stays on its flag's line.
        if last_is_bare_flag and not tok.startswith("-"):
            words[-1].append(q)
            last_is_bare_flag = False
        else:
            words.append([q])
            last_is_bare_flag = tok.startswith("-")
    body = " \\\n  ".join(" ".join(w) for w in words)
    return "\n".join(lines) + "\n" + body + "\n"
