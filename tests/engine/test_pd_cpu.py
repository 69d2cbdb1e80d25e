"""A real 1P1D pair on the vLLM CPU build behind the router our renderer commands, and the probe's KV-transfer
verdict on it (issue 34 items 3 and 5; docs/design/010-pd-rollouts.md).

What runs, all on 127.0.0.1, each process in its own process group, every one stopped by the fixture's finalizer
whatever happens (SIGTERM to the group, SIGKILL after the grace period):

* prefill and decode: the leader argv our launcher renders for tests/engine/fixtures/cpu-1p1d.yaml (the catalog's
  CPU command ``python -m vllm.entrypoints.launchers.api_server.entry``, the venv's SmolLM2), on free ports, with
  one change: the ``--kv-transfer-config`` connector. The document selects NixlConnector, which works on CPU but
  crawls on two shared cores (test_multiproc.py runs it); here ``ExampleConnector`` moves the KV through files in
  a directory both processes share (vllm distributed/kv_transfer/kv_connector/v1/example_connector.py@0.32.0-cpu;
  shared/research/pd-on-cpu.md ran it first). The schema does not offer it (spec.py ``Disaggregation.connector``),
  so the rendered JSON is edited here: same kv_role per side, connector and its shared path swapped;
* the router: ``vllm-router`` (PyPI vllm-router 0.1.17, installed in the venv by .ci/setup_vllm_cpu.sh) with the
  arguments gpustack_k3/render/router.py renders for that document, the instances' Service URLs replaced by the
  engines' loopback URLs and ``--host 0.0.0.0`` by 127.0.0.1. The decode policy is the one rendered for the
  document (left out with one decode instance: round_robin); an explicit ``power_of_two`` is refused by the router
  with a single decode instance (asserted below; rule router-power-of-two-one-instance refuses it before).

Then ``gpustack_k3.probe.client.collect`` sends a few bounded requests through the router and reads both engines'
/metrics around them; ``summarize`` gives the verdict (gpustack_k3/probe/kvtransfer.py). A control sends the same
kind of traffic straight to the decode: the verdict must turn False, naming the prompt tokens the decode computed.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from gpustack_k3.api.v1alpha1.spec import Routing
from multiproc import Case, Group, ProcSpec
from vllm_cpu_harness import VllmCpu

from tests.support import ports, tiers

pytestmark = [pytest.mark.engine, pytest.mark.timeout(400)]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
START_BUDGET_S = 240.0      # two engines at once on 2 shared cores: ~35 s each alone (pd-on-cpu.md), more when loaded
ROUTER_BUDGET_S = 30.0
NS = "ns"
# each engine as a pod of its own would run: one unbound OpenMP thread (test_multiproc.py OWN_CPU_SHARE explains)
OWN_CPU_SHARE = {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1"}


def _document():
    import yaml

    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument

    return DeploymentDocument.model_validate(yaml.safe_load((FIXTURES / "cpu-1p1d.yaml").read_text()))


def _example_connector(rendered: str, store: Path) -> str:
    """The rendered --kv-transfer-config with ExampleConnector and its shared directory (see the module docstring)."""
    cfg = json.loads(rendered)
    return json.dumps({"kv_connector": "ExampleConnector", "kv_role": cfg["kv_role"],
                       "kv_connector_extra_config": {"shared_storage_path": str(store)}})


def engine_procs(tl, store: Path) -> tuple[ProcSpec, ...]:
    """Each role's rendered leader as a harness process on its own free port."""
    procs = []
    for role in tl.roles:
        spec = role.leader
        argv = [("{model}" if a == spec.model_path else a) for a in spec.argv]
        i = argv.index("--kv-transfer-config")
        argv[i + 1] = _example_connector(argv[i + 1], store)
        argv += ["--port", f"{{port:{role.role}}}"]
        env = {k: v for k, v in spec.env.items() if not v.startswith("/cache/")}
        env.update({var: "127.0.0.1" for var in role.env_from_pod})     # status.podIP
        procs.append(ProcSpec(role.role, tuple(argv), {**env, **OWN_CPU_SHARE}, health=f"{{port:{role.role}}}"))
    return tuple(procs)


def router_argv(tl, router: Path, urls: dict[str, str], port: int, decode_policy: str) -> list[str]:
    """The rendered router arguments on loopback: Service URLs -> the engines', 0.0.0.0 -> 127.0.0.1."""
    from gpustack_k3.render.router import (
        ROUTER_PORT,
        instance_service_name,
        router_args,
    )

    args = router_args(tl, NS, "cache_aware", decode_policy)
    for role in tl.roles:
        svc = f"http://{instance_service_name(tl, role, 0)}.{NS}.svc:{role.leader.port}"
        assert svc in args, (svc, args)
        args[args.index(svc)] = urls[role.role]
    assert args[args.index("--host") + 1] == "0.0.0.0" and args[args.index("--port") + 1] == str(ROUTER_PORT)
    args[args.index("--host") + 1] = "127.0.0.1"
    args[args.index("--port") + 1] = str(port)
    return [str(router), *args]


def _router(vllm_cpu: VllmCpu) -> Path:
    exe = vllm_cpu.python.parent / "vllm-router"
    if not exe.is_file():
        tiers.unavailable(f"vllm-router is not in {exe.parent}: run .ci/setup_vllm_cpu.sh",
                          require_env="GPUSTACK_K3_REQUIRE_ENGINE")
    return exe


def _start_router(argv: list[str], port: int):
    from gpustack_k3.runtime.local import LocalProcess

    chunks: list[bytes] = []
    loopback = "127.0.0.1,localhost"      # the router's HTTP client must not send loopback traffic to a proxy
    proc = LocalProcess(argv, host="127.0.0.1", port=port, on_output=chunks.append,
                        env={"PATH": "/usr/bin:/bin", "NO_PROXY": loopback, "no_proxy": loopback})
    proc.start()
    return proc, chunks


def _wait_router(proc, chunks, port: int) -> None:
    import httpx

    deadline = time.monotonic() + ROUTER_BUDGET_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the router exited {proc.poll()}: {b''.join(chunks).decode(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"the router did not answer /health in {ROUTER_BUDGET_S:.0f} s")


@pytest.fixture(scope="module")
def pd(vllm_cpu, tmp_path_factory, request):
    """The running pair and its router: {"router", "prefill", "decode", "group", "store", "tl", "exe"}."""
    from gpustack_k3.core.launch import build_topology_launch

    exe = _router(vllm_cpu)
    tl, findings, _ = build_topology_launch(_document())
    assert not [f for f in findings if f.severity == "error"], findings
    work = tmp_path_factory.mktemp("pd-cpu")
    store = work / "kvstore"
    store.mkdir()
    group = Group(Case(procs=engine_procs(tl, store)), vllm_cpu, work)
    stops = [group.stop]
    request.addfinalizer(lambda: [stop() for stop in reversed(stops)])
    group.start()
    t0 = time.monotonic()
    group.wait_serving(START_BUDGET_S)
    started = time.monotonic() - t0
    port = ports.free_port()
    # the decode policy the renderer picks for this document (spec.routing left out, one decode instance)
    doc = _document()
    policy = (doc.spec.routing or Routing()).decode_policy_for(sum(r.instances for r in tl.roles if r.kind == "decode"))
    assert policy == "round_robin"
    proc, chunks = _start_router(router_argv(tl, exe, {r: group.url(r) for r in ("prefill", "decode")}, port,
                                             policy), port)
    stops.append(lambda: proc.stop(grace_s=10))
    _wait_router(proc, chunks, port)
    return {"router": f"http://127.0.0.1:{port}", "prefill": group.url("prefill"), "decode": group.url("decode"),
            "group": group, "store": store, "tl": tl, "exe": exe, "started_s": started}


def _probe(url: str, pd: dict):
    from gpustack_k3.probe.client import collect
    from gpustack_k3.probe.core import ProbeConfig
    from gpustack_k3.probe.report import summarize

    # 3 requests of ~300 prompt tokens (two whole 128-token blocks move, the rest is computed on D), 8 tokens out
    cfg = ProbeConfig(requests=3, concurrency=1, input_len=300, output_len=8, warmup=0, request_timeout_s=120,
                      metrics_interval_s=0)
    return summarize(cfg, collect(url, cfg, prefill=(pd["prefill"],), decode=(pd["decode"],)))


def test_kv_moves_from_prefill_to_decode_through_the_rendered_router(pd):
    rep = _probe(pd["router"], pd)
    d = rep.to_dict()
    kv = d["kv_transfer"]
    assert d["completed"] == 3, d["error_examples"]
    assert (kv["status"], kv["reason"], kv["engine"]) == ("True", "KVTransferred", "vllm"), kv["message"]
    s = kv["evidence"]["signals"]
    prompts = [int(p) for p in (d["input_tokens"]["min"], d["input_tokens"]["max"])]
    # whole blocks arrived on D for every request, D computed only the tails, P computed every prompt token
    assert s["arrived"]["delta"] >= 3 * 128 * ((min(prompts) - 2) // 128), kv
    assert s["recomputed"]["delta"] <= 3 * 129 and s["prefilled"]["delta"] >= 3 * min(prompts), kv
    assert rep.exit_code == 0, d["findings"]
    print(f"engines serving after {pd['started_s']:.1f} s; {kv['message']}")   # the figures, with -rP
    # the engines' own logs agree: D found P's KV and injected it (example_connector.py:171,292@0.32.0-cpu)
    log_d = pd["group"].log("decode")
    assert "External Cache Hit!" in log_d and "Inject KV cache of" in log_d
    print("decode log:", sorted(set(re.findall(r"Inject KV cache of \d+ tokens", log_d))))
    assert any(pd["store"].iterdir()), "P wrote no KV into the shared directory"


def test_traffic_that_skips_the_prefill_is_kv_not_moving(pd):
    rep = _probe(pd["decode"], pd)       # "router" = the decode itself: nothing is prefilled on P
    kv = rep.to_dict()["kv_transfer"]
    assert (kv["status"], kv["reason"]) == ("False", "DecodeRecomputedPrompts"), kv["message"]
    assert "prefill computed 0" in kv["message"] and rep.exit_code == 1


def test_the_router_refuses_power_of_two_decode_with_one_decode_instance(pd):
    """decodePolicy power_of_two with one decode instance: the router exits at start (vllm-router 0.1.17 config
    validation: "Power-of-two policy for decode requires at least 2 decode workers"). The rule
    router-power-of-two-one-instance refuses such a document; left out, the renderer picks round_robin."""
    port = ports.free_port()
    proc, chunks = _start_router(router_argv(pd["tl"], pd["exe"], {"prefill": pd["prefill"], "decode": pd["decode"]},
                                             port, "power_of_two"), port)
    try:
        deadline = time.monotonic() + ROUTER_BUDGET_S
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.3)
        code = proc.poll()
    finally:
        proc.stop(grace_s=5)
    out = b"".join(chunks).decode(errors="replace")
    assert code not in (None, 0), out[-2000:]
    assert "Power-of-two policy for decode requires at least 2 decode workers" in out
