"""The per-role status of a topology (pure): each role's LeaderWorkerSet (or DisaggregatedSet role) as read
now, its groups from their leader pods, group recreations, and what they mean for the Ready condition and the
phase (a role short of ready groups, a group recreated again and again)."""
from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import GroupStatus, RoleStatus
from gpustack_k3.operator.conditions import Conditions
from gpustack_k3.operator.podstate import parse_time


# A group recreated this many times and still not ready is a restart loop (LWS itself has no bound: lws#877)
RESTART_LOOP_RECREATIONS = 3


def pod_ready_at(pod: Mapping[str, Any]) -> float | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "True":
            return parse_time(c.get("lastTransitionTime"))
    return None


def _leader_cold_start(pod: Mapping[str, Any]) -> float | None:
    """Seconds from the leader's engine container start to its Ready condition (None while not ready)."""
    ready = pod_ready_at(pod)
    started = [parse_time(((c.get("state") or {}).get("running") or {}).get("startedAt"))
               for c in (pod.get("status") or {}).get("containerStatuses") or []]
    started = [t for t in started if t is not None]
    if ready is None or not started:
        return None
    return round(max(0.0, ready - max(started)), 1)


def _role_sets(owned: Mapping[tuple[str, str, str], dict]) -> list[tuple[str, str, dict, dict]]:
    """(role, kind, its spec, its status) of each LeaderWorkerSet role and each DisaggregatedSet role."""
    sets: list[tuple[str, str, dict, dict]] = []
    for (_av, kind, _name), obj in sorted(owned.items()):
        if kind == api.LWS_KIND:
            role = ((obj.get("metadata") or {}).get("labels") or {}).get(api.LABEL_ROLE)
            if role:
                sets.append((role, kind, obj.get("spec") or {}, obj.get("status") or {}))
        elif kind == api.DS_KIND:
            by_name = {r.get("name"): r for r in (obj.get("status") or {}).get("roleStatuses") or []}
            for r in (obj.get("spec") or {}).get("roles") or []:
                sets.append((r.get("name"), kind, r.get("spec") or {}, by_name.get(r.get("name")) or {}))
    return sorted(sets, key=lambda s: s[0])


def _leaders(role: str, pods: Sequence[Mapping[str, Any]]) -> dict[int, Mapping[str, Any]]:
    """The role's group leader pods (worker index 0) by group index."""
    leaders = {}
    for p in pods:
        labels = (p.get("metadata") or {}).get("labels") or {}
        if labels.get(api.LABEL_ROLE) == role and labels.get(api.LWS_LABEL_WORKER_INDEX) == "0":
            with contextlib.suppress(ValueError):
                leaders[int(labels.get(api.LWS_LABEL_GROUP_INDEX, ""))] = p
    return leaders


def _groups(leaders: Mapping[int, Mapping[str, Any]], prev_groups: Mapping[int, GroupStatus],
            want: int) -> list[GroupStatus]:
    """Each group from its leader pod; a leader with a new uid was recreated by LWS (counted against the last
    status); a group between LWS deleting its pods and creating them again keeps its last entry, not ready."""
    groups = []
    for idx in sorted(set(leaders) | {i for i in prev_groups if i < want}):
        pod, old = leaders.get(idx), prev_groups.get(idx)
        if pod is None:
            groups.append(old.model_copy(update={"ready": False}))
            continue
        uid = (pod.get("metadata") or {}).get("uid") or ""
        recreated = old is not None and old.leaderUid != uid
        groups.append(GroupStatus(index=idx, leader=pod["metadata"]["name"], leaderUid=uid,
                                  ready=pod_ready_at(pod) is not None,
                                  recreations=(old.recreations if old else 0) + (1 if recreated else 0)))
    return groups


def role_statuses(owned: Mapping[tuple[str, str, str], dict], pods: Sequence[Mapping[str, Any]],
                  previous: Sequence[RoleStatus], cold_starts: Mapping[str, str] | None = None) -> list[RoleStatus]:
    """Per role: its LeaderWorkerSet's status as read now (never a copy kept from an earlier reconcile:
    kserve#6043), its groups from their leader pods, and group recreations counted against what the last
    status saw (a group's leader pod with a new uid was recreated by LWS). [] when nothing is an LWS."""
    before = {r.name: r for r in previous}
    out = []
    for role, kind, spec, st in _role_sets(owned):
        leaders = _leaders(role, pods)
        want = int(spec.get("replicas", 1) or 0)
        groups = _groups(leaders, {g.index: g for g in before[role].groups} if role in before else {}, want)
        entry = RoleStatus(
            name=role, kind=kind, instances=want,
            podsPerInstance=int((spec.get("leaderWorkerTemplate") or {}).get("size", 1) or 1),
            replicas=int(st.get("replicas", 0)), readyReplicas=int(st.get("readyReplicas", 0)),
            updatedReplicas=int(st.get("updatedReplicas", 0)),
            groupRecreations=sum(g.recreations for g in groups), groups=groups,
            coldStartPhase=(cold_starts or {}).get(role))
        colds = [c for p in leaders.values() if (c := _leader_cold_start(p)) is not None]
        if colds:
            entry.leaderColdStartSeconds = max(colds)
        out.append(entry)
    return out


def _ready_groups(role: RoleStatus, pods: Sequence[Mapping[str, Any]]) -> int:
    """Groups of ``role`` ready by both accounts: the LWS's count and the pods (every pod of the group ready).
    The smaller one: the two are written by different controllers at different moments, and a role is only as
    ready as the later of them says."""
    members: dict[str, list[bool]] = {}
    for p in pods:
        labels = (p.get("metadata") or {}).get("labels") or {}
        if labels.get(api.LABEL_ROLE) == role.name and labels.get(api.LWS_LABEL_GROUP_INDEX) is not None:
            members.setdefault(labels[api.LWS_LABEL_GROUP_INDEX], []).append(pod_ready_at(p) is not None)
    by_pods = sum(1 for ready in members.values() if len(ready) >= role.podsPerInstance and all(ready))
    return min(role.readyReplicas, by_pods)


def restart_loop(roles: Sequence[RoleStatus]) -> str:
    """Groups recreated ``RESTART_LOOP_RECREATIONS``+ times and still not ready ("" when none)."""
    looping = [f"{r.name} group {g.index} ({g.recreations}x)" for r in roles for g in r.groups
               if g.recreations >= RESTART_LOOP_RECREATIONS and not g.ready]
    return f"group(s) recreated {RESTART_LOOP_RECREATIONS}+ times and not ready: {', '.join(looping)}" if looping else ""


def short_roles(roles: Sequence[RoleStatus], pods: Sequence[Mapping[str, Any]],
                cold_starts: Mapping[str, str] | None = None) -> str:
    """The roles short of ready groups, each with its count and where its pods' cold start is as their engine
    logs say (``cold_starts``: ``role_phases`` of the pod-log bridge); "" when every role counts all its groups
    ready. A topology is Ready only then."""
    phases = cold_starts or {}
    short = [f"{r.name} {ready}/{r.instances}" + (f" ({phases[r.name]})" if phases.get(r.name) else "")
             for r in roles if (ready := _ready_groups(r, pods)) < r.instances]
    return f"ready groups per role: {', '.join(short)}" if short else ""


def restart_loop_condition(conds: Conditions, roles: Sequence[RoleStatus], looping: str) -> None:
    """GroupRestartLoop: a group recreated again and again (LWS itself has no bound)."""
    if looping:
        conds.set(api.CONDITION_GROUP_RESTART_LOOP, True, api.REASON_GROUPS_RECREATED, looping)
    else:
        conds.set(api.CONDITION_GROUP_RESTART_LOOP, False, api.REASON_GROUPS_STABLE,
                  f"{sum(r.groupRecreations for r in roles)} group recreation(s) observed, none looping")
