"""argv target: the engine command as data (JSON) and as a copy-pasteable shell line.

``argv_document`` is ``{"image", "command", "args", "env"}`` straight from the launch spec (argv is
always a list). ``shell_command`` quotes every token with :func:`shlex.quote` and passes the
environment through ``env K=V ... cmd``; secret env values are never printed: the line inherits them
from the caller's environment and a comment names them.
"""
from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.core.launch_types import LaunchSpec


def argv_document(launch: LaunchSpec) -> dict:
    return {
        "image": launch.image,
        "command": list(launch.command),
        "args": list(launch.args),
        "env": dict(launch.env),
    }


def option_lines(tokens: list[str]) -> list[str]:
    """Shell-quoted tokens grouped one option per line (a value stays on its flag's line)."""
    lines: list[list[str]] = []
    last_is_bare_flag = False
    for tok in tokens:
        q = shlex.quote(tok)
        if last_is_bare_flag and not tok.startswith("-"):
            lines[-1].append(q)
            last_is_bare_flag = False
        else:
            lines.append([q])
            last_is_bare_flag = tok.startswith("-")
    return [" ".join(words) for words in lines]


def comment(text: str) -> str:
    """A one-line shell comment; values are JSON-escaped so no newline can end the comment."""
    return "# " + json.dumps(text, ensure_ascii=False)[1:-1]


def shell_command(launch: LaunchSpec) -> str:
    """``env K=V ... <command> <args>``, one option per continuation line; every token shlex-quoted."""
    lines = [comment(f"{launch.name}: {launch.engine} {launch.engine_version}, image {launch.image}")]
    for s in launch.secret_env:
        lines.append(comment(f"needs {s.name} in the environment (Kubernetes: secret {s.secret_name}, "
                             f"key {s.secret_key})"))
    rest = option_lines(launch.args)
    head = " ".join(shlex.quote(t) for t in launch.command)
    if rest and not launch.args[0].startswith("-"):
        head += " " + rest.pop(0)           # vLLM's positional model path stays with "vllm serve"
    words = ["env", *(shlex.quote(f"{k}={v}") for k, v in launch.env.items()), head]
    body = " \\\n  ".join([*words, *rest])
    return "\n".join(lines) + "\n" + body + "\n"
