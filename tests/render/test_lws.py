"""Kubernetes target for topologies: one LeaderWorkerSet per role (or one DisaggregatedSet), the quoted per-pod
entrypoint run under a real /bin/sh, Services and the ecosystem router; every object schema-checked (built-ins
and pod templates: kubernetes-validate strict; LWS/DS fields: tests/support/lws_schema.py, LWS v0.10.0; against the
upstream CRD files: tools/check_lws_crds.py)."""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import subprocess

import pytest

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.launch import build_topology_launch
from gpustack_k3.core.launch_topology_types import PerPodArg
from gpustack_k3.render.lws import (
    entrypoint,
    lws_objects,
    pod_templates,
    render_topology,
    validate_topology_objects,
)
from gpustack_k3.render import router as routing
from gpustack_k3.render.templates import RenderError
from tests.support import lws_schema

def _internal(d):
    d["spec"]["roles"][1]["loadBalancing"] = "internal"       # headless workers, start rank on the workers only


def _serve(d):
    d["spec"]["roles"] = [dict(d["spec"]["roles"][1], role="serve", name="wide")]
    d["spec"].pop("disaggregation", None)


VARIANTS = {   # case -> (preset, mutation of its document)
    "pd-wide-ep": ("dsv41-flash-gb300-8p1d", None),            # seed 002: 8 x DEP2 prefill, DEP32 decode (hybrid LB)
    "pd-internal": ("dsv41-flash-gb300-8p1d", _internal),
    "kimi-1p1d": ("kimi-k3-b300-1p1d", None),
    "serve-hybrid": ("dsv41-flash-gb300-8p1d", _serve),
}
ADDRESS = "x-decode-0.x-decode.llm"


def topology(case: str):
    """The document of a case and its TopologyLaunch (per-pod arguments and downward-API env as the core fills them)."""
    preset, mutate = VARIANTS[case]
    data = copy.deepcopy(load_catalog().presets[preset].document)
    if mutate:
        mutate(data)
    doc = DeploymentDocument.model_validate(data)
    return doc, build_topology_launch(doc)[0]


def pd():
    return topology("pd-wide-ep")


def lws_by_role(objs):
    return {o["metadata"]["labels"][api.LABEL_ROLE]: o for o in objs if o["kind"] == api.LWS_KIND}


def per_pod_expected(role, worker_index: int, address: str = ADDRESS) -> list[str]:
    """What the pod's shell must append: each per-pod argument of the role for this pod, computed here."""
    out = []
    for a in role.per_pod:
        if a.on == "workers" and worker_index == 0:
            continue
        value = {"start_rank": str(worker_index * role.dp_local), "leader_address": address,
                 "worker_index": str(worker_index), "leader_endpoint": f"{address}:{getattr(a, 'port', None)}"}[a.source]
        out += [a.flag, value]
    return out


CASES = sorted(VARIANTS)


@pytest.mark.parametrize("form", ["leaderworkerset", "disaggregatedset"])
@pytest.mark.parametrize("version", ["1.30", "1.33"])
@pytest.mark.parametrize("case", CASES)
def test_every_object_passes_the_schemas(case, version, form):
    doc, topo = topology(case)
    if form == "disaggregatedset" and len(topo.roles) < 2:
        with pytest.raises(RenderError, match="2-10 roles"):
            render_topology(topo, doc, form=form)
        return
    objs = render_topology(topo, doc, form=form)
    assert validate_topology_objects(objs, version) == []
    for o in objs:
        if o["kind"] in lws_schema.SCHEMAS:
            assert lws_schema.problems(o) == [], o["metadata"]["name"]


def test_the_validators_catch_errors():
    """Both checks are real: an unknown pod field, an unknown LWS field and a bad enum are each reported."""
    doc, topo = pd()
    objs = render_topology(topo, doc)
    lws = lws_by_role(objs)["decode"]
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["gpuCount"] = 8
    assert any("gpuCount" in p for p in validate_topology_objects(objs))
    lws["spec"]["leaderWorkerTemplate"]["groupSize"] = 2
    lws["spec"]["startupPolicy"] = "LeaderStarted"
    found = "\n".join(lws_schema.problems(lws))
    assert "groupSize" in found and "LeaderStarted" in found


def test_the_transcription_also_checks_the_webhooks_and_the_ds_cel_rule():
    """What the CRD schema cannot say (tests/support/lws_schema.py WEBHOOK_RULES, the DS CEL rule), each reported
    on a schema-valid object: in an LWS and in a DisaggregatedSet's role."""
    doc, topo = pd()
    lws = lws_by_role(render_topology(topo, doc))["decode"]
    lws["spec"]["leaderWorkerTemplate"]["size"] = 0
    lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = -1
    assert lws_schema.problems(lws) == [
        "spec.leaderWorkerTemplate.size: size must be equal or greater than 1 (LWS webhook)",
        "spec.rolloutStrategy.rollingUpdateConfiguration.partition: must be greater than or equal to 0 (LWS webhook)"]
    lws["spec"]["leaderWorkerTemplate"]["size"], lws["spec"]["replicas"] = 2**16, 2**15
    lws["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] = 0
    assert lws_schema.problems(lws) == [
        "spec.replicas: the product of replicas and worker replicas must not exceed 2147483647 (LWS webhook)"]
    (ds,) = [o for o in render_topology(topo, doc, form="disaggregatedset") if o["kind"] == api.DS_KIND]
    assert lws_schema.problems(ds) == []
    ds["spec"]["roles"][1]["spec"]["replicas"] = 0
    assert lws_schema.problems(ds) == [
        "spec: replicas must be zero for all non-External roles or non-zero for all non-External roles"]
    ds["spec"]["roles"][1]["scaling"] = {"mode": "External"}
    ds["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["size"] = 0
    assert lws_schema.problems(ds) == [
        "spec.roles.0.spec.leaderWorkerTemplate.size: size must be equal or greater than 1 (LWS webhook)"]


def test_one_lws_per_role_with_the_roles_shape_and_policies():
    doc, topo = pd()
    sets = lws_by_role(render_topology(topo, doc))
    assert sorted(sets) == ["decode", "prefill"]
    for r in topo.roles:
        spec = sets[r.role]["spec"]
        assert sets[r.role]["metadata"]["name"] == r.leader.name == f"{doc.metadata.name}-{r.role}"
        assert spec["replicas"] == r.instances and spec["leaderWorkerTemplate"]["size"] == r.pods_per_instance
        assert spec["startupPolicy"] == "LeaderCreated"
        assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupAfterStart"
    assert (sets["prefill"]["spec"]["replicas"], sets["decode"]["spec"]["leaderWorkerTemplate"]["size"]) == (8, 8)


def test_a_one_pod_role_has_only_the_worker_template_and_headless_workers_have_no_probes():
    doc, topo = topology("pd-internal")
    sets = lws_by_role(render_topology(topo, doc))
    assert list(pod_templates(sets["prefill"]["spec"])) == [("workerTemplate", sets["prefill"]["spec"]
                                                             ["leaderWorkerTemplate"]["workerTemplate"])]
    lwt = sets["decode"]["spec"]["leaderWorkerTemplate"]
    leader, worker = lwt["leaderTemplate"], lwt["workerTemplate"]
    lc, wc = leader["spec"]["containers"][0], worker["spec"]["containers"][0]
    assert {"startupProbe", "readinessProbe", "livenessProbe"} <= set(lc) and not {"startupProbe", "readinessProbe",
                                                                                   "livenessProbe"} & set(wc)
    assert leader["metadata"]["labels"][api.LABEL_API_SERVER] == "true"
    assert api.LABEL_API_SERVER not in worker["metadata"]["labels"]


def test_hybrid_load_balancing_workers_serve_too_so_the_templates_are_one():
    doc, topo = pd()
    lws = lws_by_role(render_topology(topo, doc))["decode"]
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert "leaderTemplate" not in lwt and lwt["workerTemplate"]["metadata"]["labels"][api.LABEL_API_SERVER] == "true"


def test_probes_are_sized_per_role_and_pods_get_gpus_and_downward_api_env():
    doc, topo = pd()
    sets = lws_by_role(render_topology(topo, doc))
    for r in topo.roles:
        lwt = sets[r.role]["spec"]["leaderWorkerTemplate"]
        c = (lwt.get("leaderTemplate") or lwt["workerTemplate"])["spec"]["containers"][0]
        p = c["startupProbe"]
        assert p["periodSeconds"] * p["failureThreshold"] >= r.leader.startup_budget_s
        for _, tpl in pod_templates(sets[r.role]["spec"]):
            res = tpl["spec"]["containers"][0]["resources"]
            assert res["limits"][r.leader.gpu_resource] == r.gpus_per_pod
    env = sets["decode"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["env"]
    assert {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in env
    penv = sets["prefill"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["env"]
    assert [e for e in penv if "fieldRef" in e.get("valueFrom", {})] == [
        {"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in topo.role("prefill").env_from_pod.items()]


FAKE_ENGINE = """#!/bin/sh
# prints its own name and every argument as one JSON-able line each (the argv the engine would see)
printf '%s\\n' "$0" "$@"
"""


@pytest.fixture
def fake_engine(tmp_path):
    path = tmp_path / "bin" / "vllm"
    path.parent.mkdir()
    path.write_text(FAKE_ENGINE)
    path.chmod(0o755)
    return path


def run_container(container: dict, engine, env: dict) -> list[str]:
    """Run the container's command + args under the real /bin/sh with the fake engine first on PATH."""
    argv = [*container["command"], *container["args"]]
    path = f"{engine.parent}:{os.environ['PATH']}"
    out = subprocess.run(argv, env={"PATH": path, **env}, capture_output=True, text=True, check=True, timeout=10)
    lines = out.stdout.split("\n")
    assert lines[-1] == ""
    return lines[:-1]


@pytest.mark.parametrize("case,worker_index", [("pd-wide-ep", 0), ("pd-wide-ep", 1), ("pd-wide-ep", 7),
                                               ("pd-internal", 0), ("pd-internal", 3)])
def test_the_entrypoint_appends_the_computed_flags_and_keeps_every_argument(fake_engine, case, worker_index):
    assert shutil.which("sh")
    doc, topo = topology(case)
    role = topo.role("decode")
    assert role.per_pod, "the core fills the decode role's per-pod arguments"
    lwt = lws_by_role(render_topology(topo, doc))["decode"]["spec"]["leaderWorkerTemplate"]
    tpl = lwt["workerTemplate"] if worker_index else lwt.get("leaderTemplate", lwt["workerTemplate"])
    launch = role.worker if worker_index else role.leader
    c = tpl["spec"]["containers"][0]
    assert c["command"][:2] == ["/bin/sh", "-c"] and c["args"] == launch.argv   # the argv stays a list
    seen = run_container(c, fake_engine, {api.LWS_ENV_WORKER_INDEX: str(worker_index),
                                          api.LWS_ENV_LEADER_ADDRESS: ADDRESS, api.LWS_ENV_GROUP_SIZE: "8"})
    assert seen[0] == str(fake_engine)
    assert seen[1:] == [*launch.argv[1:], *per_pod_expected(role, worker_index)]
    if case == "pd-internal":
        assert ("--data-parallel-start-rank" in seen) == (worker_index > 0)   # on="workers": not on the leader


def test_the_entrypoint_does_not_re_split_or_expand_arguments(fake_engine):
    """Arguments with spaces, quotes, $ and globs reach the engine unchanged (JSON configs contain all of them)."""
    doc, topo = pd()
    role = topo.role("decode")
    assert role.per_pod
    tricky = ["--x", 'a b "c" $HOME $((1+1)) * `id` \\n', json.dumps({"k": "v w"})]
    launch = dataclasses.replace(role.leader, arguments=[*role.leader.arguments,
                                                         dataclasses.replace(role.leader.arguments[0],
                                                                             field="extraArgs", tokens=tricky)])
    role = dataclasses.replace(role, leader=launch)
    command, args = entrypoint(role, launch)
    seen = run_container({"command": command, "args": args}, fake_engine,
                         {api.LWS_ENV_WORKER_INDEX: "1", api.LWS_ENV_LEADER_ADDRESS: "leader", "HOME": "/nowhere"})
    assert seen[1:] == [*launch.argv[1:], *per_pod_expected(role, 1, "leader")]
    assert tricky[1] in seen


def test_the_entrypoint_refuses_what_it_cannot_quote_or_compute():
    doc, topo = pd()
    role = topo.role("decode")
    with pytest.raises(RenderError, match="not a --flag"):
        entrypoint(dataclasses.replace(role, per_pod=[PerPodArg("--x; rm -rf /", "start_rank", "f")]), role.leader)
    with pytest.raises(RenderError, match="unknown per-pod source"):
        entrypoint(dataclasses.replace(role, per_pod=[PerPodArg("--x", "pod_name", "f")]), role.leader)


def test_sglang_node_rank_and_dist_init_addr_are_computed_where_the_pod_starts(fake_engine):
    """SGLang multi-node: ``--node-rank`` is the pod's worker index, ``--dist-init-addr`` the leader's address and a
    port (srt/arg_groups/fields/parallel.py:32-44@0.5.23), both computed by the pod's shell from the LWS env."""
    import types
    doc, topo = pd()
    role = topo.role("decode")
    args = [types.SimpleNamespace(flag="--node-rank", source="worker_index", field="parallel", on="all", port=None),
            types.SimpleNamespace(flag="--dist-init-addr", source="leader_endpoint", field="parallel", on="all",
                                  port=20000)]
    command, argv = entrypoint(dataclasses.replace(role, per_pod=args), role.leader)
    seen = run_container({"command": command, "args": argv}, fake_engine,
                         {api.LWS_ENV_WORKER_INDEX: "3", api.LWS_ENV_LEADER_ADDRESS: ADDRESS})
    assert seen[1:] == [*role.leader.argv[1:], "--node-rank", "3", "--dist-init-addr", f"{ADDRESS}:20000"]
    args[1].port = None
    with pytest.raises(RenderError, match="has no port"):
        entrypoint(dataclasses.replace(role, per_pod=args), role.leader)


def test_without_per_pod_arguments_the_container_runs_the_argv_directly():
    doc, topo = pd()
    lws = lws_by_role(render_topology(topo, doc))["prefill"]
    c = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert not topo.role("prefill").per_pod and [*c["command"], *c["args"]] == topo.role("prefill").leader.argv


def test_services_front_the_api_servers_and_the_router_routes_pd():
    doc, topo = pd()
    objs = render_topology(topo, doc, namespace="llm")
    svcs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    name = doc.metadata.name
    for r in topo.roles:
        s = svcs[f"{name}-{r.role}-api"]
        assert s["spec"]["selector"] == {api.LABEL_APP_NAME: "kimi-k3", api.LABEL_APP_INSTANCE: r.leader.name,
                                         api.LABEL_API_SERVER: "true"}
    (router,) = [o for o in objs if o["kind"] == "Deployment"]
    c = router["spec"]["template"]["spec"]["containers"][0]
    args = c["args"]
    # one URL per instance (cache_aware tells instances apart), each its own Service of that LWS group
    for r in topo.roles:
        urls = [args[i + 1] for i, a in enumerate(args) if a == f"--{r.kind}"]
        assert urls == [f"http://{name}-{r.role}-{g}.llm.svc:8000" for g in range(r.instances)]
        for g in range(r.instances):
            sel = svcs[f"{name}-{r.role}-{g}"]["spec"]["selector"]
            assert sel[api.LWS_LABEL_GROUP_INDEX] == str(g) and sel[api.LABEL_ROLE] == r.role
    assert "--vllm-pd-disaggregation" in args
    # pinned by the catalog, never a moving tag
    assert c["image"] == load_catalog().routing.vllm_router.image and c["imagePullPolicy"] == "IfNotPresent"
    assert not c["image"].endswith((":nightly", ":latest"))
    assert svcs[name]["spec"]["selector"] == router["spec"]["selector"]["matchLabels"]
    # LWS creates a headless Service named like the LWS: ours never takes that name
    assert not {o["metadata"]["name"] for o in objs if o["kind"] == api.LWS_KIND} & set(svcs)


def test_without_disaggregation_the_endpoint_selects_every_api_server_and_no_router():
    doc, topo = topology("serve-hybrid")
    objs = render_topology(topo, doc)
    assert not [o for o in objs if o["kind"] == "Deployment"]
    svc = next(o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == doc.metadata.name)
    assert svc["spec"]["selector"] == {api.LABEL_DEPLOYMENT: doc.metadata.name, api.LABEL_API_SERVER: "true"}


def test_the_vllm_router_routes_vllm_pd_only():
    doc, topo = pd()
    with pytest.raises(RenderError, match="does not route sglang P/D"):
        routing.vllm_router(dataclasses.replace(topo, roles=[
            dataclasses.replace(r, leader=dataclasses.replace(r.leader, engine="sglang")) for r in topo.roles]),
            "llm", {}, prefill_policy="cache_aware", decode_policy="round_robin")


def test_disaggregatedset_holds_the_same_lws_specs():
    doc, topo = pd()
    plain = dict(lws_objects(render_topology(topo, doc)))
    objs = render_topology(topo, doc, form="disaggregatedset")
    (ds,) = [o for o in objs if o["kind"] == api.DS_KIND]
    assert ds["apiVersion"] == "disaggregatedset.x-k8s.io/v1" and ds["metadata"]["name"] == doc.metadata.name
    assert dict(lws_objects(objs)) == plain
    assert not [o for o in objs if o["kind"] == api.LWS_KIND]
    with pytest.raises(RenderError, match="unknown form"):
        render_topology(topo, doc, form="statefulset")


def test_the_render_command_renders_a_topology_per_target(tmp_path):
    """``render`` of a document with roles: kubernetes = the LWS objects (or the DisaggregatedSet), argv per role;
    launch is the TopologyLaunch; docker refuses with the reason and exit 1; ``all`` writes the refusals next to the
    files."""
    import yaml
    from click.testing import CliRunner

    from gpustack_k3.cli.render_cmd import render

    def run(*args):
        return CliRunner().invoke(render, ["--preset", "dsv41-flash-gb300-8p1d", *args])

    r = run("--target", "kubernetes", "--namespace", "llm")
    assert r.exit_code == 0, r.output
    objs = [d for d in yaml.safe_load_all(r.stdout) if d]
    doc, topo = pd()
    assert objs == render_topology(topo, doc, namespace="llm")
    r = run("--target", "kubernetes", "--lws-form", "disaggregatedset")
    assert r.exit_code == 0 and [d["kind"] for d in yaml.safe_load_all(r.stdout) if d][-1] == api.DS_KIND
    r = run("--target", "argv")
    assert r.exit_code == 0 and [x["role"] for x in json.loads(r.stdout)["roles"]] == ["prefill", "decode"]
    r = run("--target", "docker")
    assert r.exit_code == 1 and r.stdout == "", r.output
    r = run("--target", "launch")   # the TopologyLaunch: every role's leader/worker launch spec
    assert r.exit_code == 0 and [x["role"] for x in json.loads(r.stdout)["roles"]] == ["prefill", "decode"]
    r = run("--out", str(tmp_path / "all"))
    assert r.exit_code == 0, r.output
    written = sorted(str(p.relative_to(tmp_path / "all")) for p in (tmp_path / "all").rglob("*")
                     if p.is_file() and p.name != ".gpustack-k3-render")
    assert written == ["argv/argv.json", "argv/argv.sh", "docker/refused.txt", "gpustack/refused.txt",
                       "kubernetes/kubernetes.yaml", "launch/launch.json"]
