"""The launch of a document with roles: per role, the leader's and workers' launch specs and what differs per pod.

Apart from :mod:`gpustack_k3.core.launch_types` because only a launch of a topology builds these: the single-engine
commands (validate, check-args, plan) import that module at every start and need not create these classes.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from gpustack_k3.core.launch_types import LaunchSpec

@dataclass(frozen=True)
class PerPodArg:
    """An engine argument whose value is known only where a pod of an instance starts.

    ``source`` says what the value is: ``start_rank`` (the pod's worker index x the role's ``dp_local``),
    ``leader_address`` (the address of the instance's leader pod), ``worker_index`` (the pod's index in its
    instance, 0 on the leader: SGLang's ``--node-rank``), ``leader_endpoint`` (``<leader address>:<port>``: SGLang's
    ``--dist-init-addr``). Targets compute it (Kubernetes/LWS: a quoted entrypoint reading ``LWS_WORKER_INDEX`` /
    ``LWS_LEADER_ADDRESS``); the argv stays a list."""

    flag: str
    source: str
    field: str                    # the spec path that asks for it (findings and explain point there)
    on: str = "all"               # "all" pods of an instance, or "workers" only (pods 1..): with internal LB a
                                  # start rank on the leader would switch it to hybrid LB (arg_utils.py:2489-2491@0.33.0)
    port: int | None = None       # leader_endpoint: the port after the leader's address


@dataclass(frozen=True)
class RoleLaunch:
    """One role of a topology: ``instances`` independent engine instances of ``pods_per_instance`` pods each.

    ``leader`` is pod 0 of an instance (it serves the API unless the role balances externally); ``worker`` is
    pods 1.. (None when an instance is one pod). ``per_pod`` arguments are appended to both at start;
    ``env_from_pod`` maps env vars to downward-API field paths (``VLLM_NIXL_SIDE_CHANNEL_HOST``:
    ``status.podIP``)."""

    role: str                     # the role's name (spec.roles[].name; "serve" for a roleless document)
    kind: str                     # prefill | decode | serve
    field_prefix: str             # spec.roles[i] (spec for a roleless document)
    instances: int
    pods_per_instance: int
    gpus_per_pod: int
    dp: int
    dp_local: int                 # DP ranks per pod: start rank = worker index x dp_local
    load_balancing: str           # internal | hybrid | external
    leader: LaunchSpec
    worker: LaunchSpec | None
    per_pod: list[PerPodArg]
    env_from_pod: dict[str, str]
    ports: dict[str, int] = field(default_factory=dict)   # further ports the engine listens on, by purpose
                                                          # (SGLang prefill: {"bootstrap": 8998})


@dataclass(frozen=True)
class TopologyLaunch:
    """Every role of a deployment; ``disaggregation`` is the P/D connector name (vLLM: the KV connector; SGLang: the
    transfer backend, e.g. ``nixl``; "" when not disaggregated)."""

    name: str
    roles: list[RoleLaunch]
    disaggregation: str

    def role(self, name: str) -> RoleLaunch:
        return next(r for r in self.roles if r.role == name)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        """The topology launch as JSON (stable key order, 2-space indent): render target ``launch`` of a
        document with roles."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"
