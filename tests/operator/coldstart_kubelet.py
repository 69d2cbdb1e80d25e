"""The test plays the kubelet for the cold-start tests: engine pod status and engine log lines.

Recorded logs are replayed with their timestamps shifted (as the replay engine's REPLAY_RETIME
does) so that the log's clock and the pod's clock (creationTimestamp is set by the API server, i.e.
now) are one timeline; durations, which is what the tests check, are unchanged by the shift."""
import datetime as dt
import pathlib
import re

from operator_helpers import pod_from_deployment

ROOT = pathlib.Path(__file__).resolve().parents[2]
GPU_LOG = ROOT / "tests/docker/images/replay-engine/logs/vllm-0.33-kimi-k3-8xb300.log"
GPU_CRASH_TAIL = ROOT / "tests/docker/images/replay-engine/logs/vllm-0.33-kimi-k3-cuda-graph-oom.tail.log"
CPU_LOG = ROOT / "tests/fixtures/logs/vllm-0.32.0-cpu-eager.log"

_VLLM_STAMP = re.compile(r"(?P<lvl>INFO|WARNING|ERROR|DEBUG|CRITICAL) (?P<md>\d\d-\d\d) (?P<t>\d\d:\d\d:\d\d)")


def retime(text: str, origin: dt.datetime, target: dt.datetime) -> str:
    """Shift every vLLM ``LEVEL MM-DD HH:MM:SS`` stamp by ``target - origin`` (vLLM prints no year:
    the origin's year is assumed)."""
    shift = target - origin

    def sub(m):
        t = dt.datetime.strptime(f"{origin.year}-{m['md']} {m['t']}", "%Y-%m-%d %H:%M:%S") + shift
        return f"{m['lvl']} {t:%m-%d %H:%M:%S}"
    return _VLLM_STAMP.sub(sub, text)


def rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(ts: str) -> dt.datetime:
    return dt.datetime.fromisoformat(ts)


class Kubelet:
    """One engine pod of a K3Deployment; ``report`` patches its status like the kubelet does."""

    def __init__(self, emu, core, ns: str, cr_name: str, pod: str, wait: bool = True) -> None:
        self.emu, self.core, self.ns, self.pod = emu, core, ns, pod
        body = pod_from_deployment(emu, cr_name, pod, [{"name": "engine", "image": "vllm/vllm-openai:v0.33.0"},
                                                       {"name": "sidecar", "image": "busybox"}], ns=ns, wait=wait)
        created = core.create_namespaced_pod(ns, body)
        self.created = created.metadata.creation_timestamp.astimezone(dt.UTC)
        self.restarts = 0
        self.container_id = None

    def report(self, phase: str, *, scheduled: dt.datetime | None = None, ready: bool = False,
               waiting: str | None = None, running: dt.datetime | None = None,
               terminated: dict | None = None, last: dict | None = None) -> None:
        conds = []
        if scheduled is not None:
            conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(scheduled)})
        conds.append({"type": "Ready", "status": "True" if ready else "False",
                      "lastTransitionTime": rfc3339(scheduled or self.created)})
        state = {"waiting": None, "running": None, "terminated": None}  # like the kubelet's merge patch
        if waiting:
            state["waiting"] = {"reason": waiting}
        if running is not None:
            state["running"] = {"startedAt": rfc3339(running)}
        if terminated is not None:
            state["terminated"] = terminated
        cs = {"name": "engine", "image": "vllm/vllm-openai:v0.33.0", "imageID": "", "ready": ready,
              "restartCount": self.restarts, "state": state}
        if self.container_id:
            cs["containerID"] = self.container_id
        if last:
            cs["lastState"] = {"terminated": last}
        side = {"name": "sidecar", "image": "busybox", "imageID": "", "ready": True, "restartCount": 0,
                "state": {"running": {"startedAt": rfc3339(self.created)}}}
        self.core.patch_namespaced_pod_status(self.pod, self.ns, {"status": {
            "phase": phase, "conditions": conds, "containerStatuses": [cs, side]}})

    def start_container(self, at: dt.datetime, *, scheduled: dt.datetime, last: dict | None = None) -> None:
        self.container_id = f"containerd://{self.pod}-{self.restarts}"
        self.report("Running", scheduled=scheduled, running=at, last=last)

    def log(self, text: str) -> None:
        self.emu.append_log(self.ns, self.pod, text, container="engine")
