"""Operator scale benchmark against the API emulator (run in its own process, over HTTP).

    python3 bench/operator_scale.py --crs 1000 [--workers 4] [--render project|fake]

Creates N K3Deployment resources (the vllm-fixed preset, renamed) while the operator runs, waits
for steady state (every resource has a status for its generation and the work queue is idle), then
triggers a full resync of an unchanged cluster. Prints one JSON line:
{"crs", "seconds_to_steady", "writes_per_create", "writes_per_noop_resync", "rss_mb", ...}
Writes are the operator's write requests as counted by the emulator (server-side apply of each
owned object and of the status, Event creation); ``writes_breakdown`` itemises them per resource.
rss_mb is the peak resident memory of this process (operator + client), not the emulator's.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import resource
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NS = "bench"
from gpustack_k3.api.v1alpha1.constants import GROUP as G, PLURAL as P, VERSION as V  # noqa: E402
from tests.support.waiting import reconciles, wait_idle  # noqa: E402  (the benchmark waits as the tests do)


def start_emulator() -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.k8s_emulator", "--no-journal",
                             "--history", "200000"], stdout=subprocess.PIPE, env=env, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        proc.kill()
        raise SystemExit("the API emulator did not start (see its stderr above)")
    return proc, json.loads(line)["url"]


def writes(url: str, agent_prefix: str) -> tuple[int, dict[str, int]]:
    doc = json.load(urllib.request.urlopen(f"{url}/_emulator/writes"))
    per: dict[str, int] = {}
    for row in doc["writes"]:
        if row["agent"].startswith(agent_prefix):
            per[f"{row['verb']} {row['resource']}"] = per.get(f"{row['verb']} {row['resource']}", 0) + row["count"]
    return sum(per.values()), per


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 1)
    except (OSError, IndexError, ValueError):
        return None


def hooks(kind: str):
    if kind == "fake":
        from tests.operator.operator_fakes import fake_plan, fake_render, fake_validate
        return fake_validate, fake_render, fake_plan
    from gpustack_k3.operator import hooks as h
    return h.validate, h.render, h.plan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--crs", type=int, default=100)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--render", choices=["project", "fake"], default="project",
                    help="project: the real validate/render/plan; fake: the small test stand-ins")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args()

    import yaml
    from kubernetes import client

    from gpustack_k3.operator.controller import Options, new_operator

    validate, render, plan = hooks(args.render)
    preset = yaml.safe_load((ROOT / "gpustack_k3/catalog/data/presets/vllm-fixed.yaml").read_text())
    proc, url = start_emulator()
    try:
        cfg = client.Configuration()
        cfg.host = url
        cfg.connection_pool_maxsize = 32
        api = client.ApiClient(cfg)
        api.user_agent = "bench/1"
        core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
        core.create_namespace({"metadata": {"name": NS}})
        op_api = client.ApiClient(cfg)
        op = new_operator(op_api, Options(validate=validate, render=render, plan=plan), namespaces=[NS],
                          resync_s=3600, workers=args.workers, identity="bench").start()
        agent = "gpustack-k3-operator/"
        while not op.ready()[0]:
            time.sleep(0.05)

        def create(i: int) -> None:
            body = json.loads(json.dumps(preset))
            body["metadata"] = {"name": f"m{i:05d}", "namespace": NS}
            co.create_namespaced_custom_object(G, V, NS, P, body)

        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(args.crs)))

        def steady() -> bool:
            keys = op.caches.crs.list_keys()
            if len(keys) < args.crs:
                return False
            for ns, name in keys:
                obj = op.caches.crs.get(ns, name) or {}
                if (obj.get("status") or {}).get("observedGeneration") != obj.get("metadata", {}).get("generation"):
                    return False
            return op.queue.idle and op.queue.pending_delayed == 0

        while not steady():
            if time.monotonic() - t0 > args.timeout:
                raise SystemExit(f"no steady state after {args.timeout}s")
            time.sleep(0.05)
        seconds = time.monotonic() - t0
        wait_idle(op, 30, settle=1.0)
        create_writes, breakdown = writes(url, agent)
        phases: dict[str, int] = {}
        for ns, name in op.caches.crs.list_keys():
            ph = ((op.caches.crs.get(ns, name) or {}).get("status") or {}).get("phase", "None")
            phases[ph] = phases.get(ph, 0) + 1

        before_reconciles = reconciles(op)
        reconciles_per_create = before_reconciles / args.crs
        for key in op.caches.crs.list_keys():  # one full resync of an unchanged cluster
            op.queue.add(key)
        wait_idle(op, 120, settle=1.0)
        resync_writes = writes(url, agent)[0] - create_writes
        resynced = reconciles(op) - before_reconciles
        op.stop()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        rss_mb = usage.ru_maxrss / 1024
        emu_cpu = _cpu_seconds(proc.pid)
        print(json.dumps({"crs": args.crs, "seconds_to_steady": round(seconds, 2),
                          "writes_per_create": round(create_writes / args.crs, 3),
                          "writes_per_noop_resync": round(resync_writes / args.crs, 3),
                          "rss_mb": round(rss_mb, 1), "render": args.render, "workers": args.workers,
                          "reconciles_per_create": round(reconciles_per_create, 2),
                          "resync_reconciles": resynced, "phases": phases,
                          "cpu_s": {"operator_process": round(usage.ru_utime + usage.ru_stime, 1),
                                    "emulator_process": emu_cpu},
                          "writes_breakdown": {k: round(v / args.crs, 3) for k, v in sorted(breakdown.items())}}))
        return 0
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    raise SystemExit(main())
