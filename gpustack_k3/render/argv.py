"""argv target: the engine command as data (JSON) and as a copy-pasteable shell line.

``argv_document`` is ``{"image", "command", "args", "env", "secret_env"}`` straight from the launch spec (argv is
always a list; ``secret_env`` names each secret variable's Secret and key, never its value). ``shell_command`` quotes every token with :func:`shlex.quote` and passes the
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
        # secrets by reference only: where each value comes from, never the value (spec.secretEnv)
        "secret_env": [{"name": s.name, "secret": s.secret_name, "key": s.secret_key} for s in launch.secret_env],
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


# ----------------------------------------------------------------------------- topologies (roles)

# How a per-pod value reads where the pod starts (LeaderWorkerSet's env; docs/sources.md#per-pod-env)
PER_POD_SHELL = {"leader_address": "$LWS_LEADER_ADDRESS", "start_rank": "$((LWS_WORKER_INDEX * {dp_local}))",
                 # SGLang multi-node (docs/design/007-sglang-topologies.md): --node-rank, --dist-init-addr <leader>:<port>
                 "worker_index": "$LWS_WORKER_INDEX", "leader_endpoint": "${{LWS_LEADER_ADDRESS}}:{port}"}


def per_pod_tokens(role, *, worker: bool) -> list[str]:
    """The per-pod arguments of a role's leader (``worker=False``) or workers, as shell expressions."""
    out: list[str] = []
    for a in role.per_pod:
        if a.on == "workers" and not worker:
            continue
        out += [a.flag, PER_POD_SHELL[a.source].format(dp_local=role.dp_local, port=a.port)]
    return out


def topology_argv_document(tl) -> dict:
    """Every role's leader and worker command (argv lists; per-pod values as the shell expressions they take)."""
    roles = []
    for r in tl.roles:
        pods = [("leader", r.leader, False)] + ([("worker", r.worker, True)] if r.worker else [])
        roles.append({
            "role": r.role, "kind": r.kind, "instances": r.instances, "pods_per_instance": r.pods_per_instance,
            "gpus_per_pod": r.gpus_per_pod,
            **{name: {**argv_document(spec), "per_pod_args": per_pod_tokens(r, worker=w),
                      "env_from_pod": dict(r.env_from_pod)} for name, spec, w in pods},
        })
    return {"name": tl.name, "disaggregation": tl.disaggregation, "roles": roles}


def topology_shell(tl) -> str:
    """One shell line per role and pod kind; per-pod values are double-quoted expressions the pod's shell expands
    (LWS sets LWS_LEADER_ADDRESS and LWS_WORKER_INDEX; the downward-API env is named in a comment)."""
    parts = []
    for r in tl.roles:
        for name, spec, w in [("leader", r.leader, False)] + ([("worker", r.worker, True)] if r.worker else []):
            head = comment(f"role {r.role} ({r.kind}) {name}: {r.instances} instance(s) x {r.pods_per_instance} "
                           f"pod(s) x {r.gpus_per_pod} GPU(s)")
            env_pod = [comment(f"{k} from the pod's {v} (downward API)") for k, v in r.env_from_pod.items()]
            body = shell_command(spec).rstrip("\n")
            extra = per_pod_tokens(r, worker=w)
            lines = [" ".join([extra[i], f'"{extra[i + 1]}"']) for i in range(0, len(extra), 2)]
            if lines:
                body += " \\\n  " + " \\\n  ".join(lines)
            parts.append("\n".join([head, *env_pod, body]) + "\n")
    return "\n".join(parts)
