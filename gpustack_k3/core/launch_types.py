"""The launch spec: everything a target needs to start the engine, computed once from a valid spec.

Target-neutral: every target (argv, Kubernetes, GPUStack, Docker, local process) is a projection of this
object, and what only one target needs (Kubernetes probes, labels, tolerations, node selectors, network
policy; GPUStack placeholders) is decided by that target's renderer. Engine arguments are kept structured,
one :class:`Arg` per spec field, so no renderer has to re-tokenise an argv to find a flag again.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from gpustack_k3.core.flags import Arg  # the flag table's output; defined there, off the launch-only path


@dataclass(frozen=True)
class Volume:
    """A mount the engine needs. ``kind`` is ``pvc``, ``hostPath`` or ``emptyDir``; ``source`` is the
    claim name / host path (empty for emptyDir); ``purpose`` is ``model``, ``cache`` or ``shm``."""

    name: str
    mount_path: str
    kind: str
    source: str
    purpose: str
    read_only: bool = False
    size_gib: int | None = None


@dataclass(frozen=True)
class SecretEnv:
    """An env var whose value comes from a secret, by reference only (never the value)."""

    name: str
    secret_name: str
    secret_key: str


@dataclass(frozen=True)
class LaunchSpec:
    name: str                      # metadata.name of the deployment document
    engine: str                    # vllm | sglang
    engine_version: str            # catalog version key
    image: str
    command: list[str]             # executable part, e.g. ["vllm", "serve"]
    arguments: list[Arg]           # engine arguments per spec field, in argv order
    env: dict[str, str]            # plain env (already merged: catalog defaults, spec env, caches)
    secret_env: list[SecretEnv]
    host: str
    port: int
    health_path: str               # the engine's health endpoint (200 once it serves)
    model_path: str                # path of the main model inside the container
    served_model_name: str
    gpu_type: str
    gpu_count: int
    gpu_resource: str              # device-plugin resource of the GPU type (e.g. nvidia.com/gpu); "" for CPU
    shm_size_gib: int
    volumes: list[Volume]
    startup_budget_s: int          # cold-start budget derived from the plan

    @property
    def args(self) -> list[str]:
        """Every engine argument, one token per element (model, host, port included)."""
        return [t for a in self.arguments for t in a.tokens]

    @property
    def engine_args(self) -> list[str]:
        """The arguments minus what a platform owns (model path, host, port, served name)."""
        return [t for a in self.arguments if not a.platform for t in a.tokens]

    @property
    def argv(self) -> list[str]:
        return [*self.command, *self.args]

    def arg(self, field: str) -> Arg | None:
        """The tokens a spec field produced (None when it produced none)."""
        return next((a for a in self.arguments if a.field == field), None)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        """The launch spec as JSON (stable key order, 2-space indent): render target ``launch``; the
        Kubernetes pod template carries its sha256."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

