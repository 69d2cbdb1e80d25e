"""The launch spec: everything a target needs to start the engine, computed once from a valid spec.

Every target (argv, Kubernetes, GPUStack, Docker, local process) is a projection of this object.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


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
class Probe:
    path: str
    period_s: int
    failure_threshold: int
    timeout_s: int = 5
    initial_delay_s: int = 0


@dataclass(frozen=True)
class LaunchSpec:
    name: str                      # metadata.name of the deployment document
    engine: str                    # vllm | sglang
    engine_version: str            # catalog version key
    image: str
    command: list[str]             # executable part, e.g. ["vllm", "serve"]
    args: list[str]                # full engine arguments, one token per element (model, host, port included)
    engine_args: list[str]         # args minus what a platform owns (model path, host, port, served name):
                                   # GPUStack composes model/host/port from its own placeholders + these
    env: dict[str, str]            # plain env (already merged: catalog defaults, spec env, caches)
    secret_env: list[SecretEnv]
    host: str
    port: int
    model_path: str                # path of the main model inside the container
    served_model_name: str
    gpu_type: str
    gpu_count: int
    gpu_resource: str              # e.g. nvidia.com/gpu
    shm_size_gib: int
    volumes: list[Volume]
    startup_budget_s: int          # cold-start budget derived from the plan
    startup_probe: Probe
    readiness_probe: Probe
    liveness_probe: Probe
    labels: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict] = field(default_factory=list)
    network_policy: bool = False   # Kubernetes: render a NetworkPolicy admitting only the engine port

    @property
    def argv(self) -> list[str]:
        return [*self.command, *self.args]

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        """The launch spec as JSON (stable key order, 2-space indent): render target ``launch``; the
        Kubernetes pod template carries its sha256."""
        import json

        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"
