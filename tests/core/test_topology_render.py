"""The topology presets through the launch builder and the argv/docker/gpustack targets: per-role flags, per-pod
arguments as quoted shell expressions, refusals that name the field; a roleless document is unchanged."""
from __future__ import annotations

import shlex

import pytest

from gpustack_k3.cli.common import load_document
from gpustack_k3.core.launch import build_launch, build_topology_launch
from gpustack_k3.render import docker, gpustack
from gpustack_k3.render.argv import topology_argv_document, topology_shell
from gpustack_k3.render.templates import RenderError


def tl_of(preset):
    return build_topology_launch(load_document(None, preset))[0]


def test_decode_dep32_flags_and_per_pod_args():
    d = tl_of("dsv41-flash-gb300-8p1d").role("decode")
    a = d.leader.args
    for flag, val in [("--data-parallel-size", "32"), ("--data-parallel-size-local", "4"),
                      ("--data-parallel-rpc-port", "29550"), ("--max-num-seqs", "64")]:
        assert a[a.index(flag) + 1] == val
    assert "--data-parallel-hybrid-lb" in a and "--enable-eplb" in a and "--headless" not in d.worker.args
    assert '"kv_role":"kv_consumer"' in a[a.index("--kv-transfer-config") + 1]
    assert [(p.flag, p.source, p.on) for p in d.per_pod] == [
        ("--data-parallel-address", "leader_address", "all"), ("--data-parallel-start-rank", "start_rank", "all")]
    assert d.env_from_pod == {"VLLM_NIXL_SIDE_CHANNEL_HOST": "status.podIP"}
    assert d.leader.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5600"
    assert a[-2:] == ["--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}']   # extraArgs stay last
    assert (d.instances, d.pods_per_instance, d.gpus_per_pod, d.dp_local) == (1, 8, 4, 4)


def test_internal_lb_workers_are_headless_and_only_workers_get_a_start_rank():
    import copy

    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.catalog import load_catalog

    data = copy.deepcopy(load_catalog().presets["dsv41-flash-gb300-8p1d"].document)
    data["spec"]["roles"][1]["loadBalancing"] = "internal"
    data["spec"]["roles"][1]["apiServerCount"] = 2
    d = build_topology_launch(DeploymentDocument.model_validate(data))[0].role("decode")
    assert "--headless" in d.worker.args and "--headless" not in d.leader.args
    assert "--api-server-count" in d.leader.args and "--api-server-count" not in d.worker.args
    assert "--data-parallel-hybrid-lb" not in d.leader.args
    assert [p.on for p in d.per_pod if p.source == "start_rank"] == ["workers"]


def test_roleless_document_is_its_single_launch():
    doc = load_document(None, "vllm-fixed")
    tl = build_topology_launch(doc)[0]
    assert tl.roles[0].leader == build_launch(doc)[0] and tl.roles[0].worker is None and tl.disaggregation == ""


def test_argv_target_prints_each_role_and_worker_with_quoted_per_pod_values():
    tl = tl_of("dsv41-flash-gb300-8p1d")
    sh = topology_shell(tl)
    assert sh.count("vllm serve") == 3    # prefill leader, decode leader, decode worker
    worker = sh.split("# role decode (decode) worker")[1]
    assert '--data-parallel-start-rank "$((LWS_WORKER_INDEX * 4))"' in worker
    assert '--data-parallel-address "$LWS_LEADER_ADDRESS"' in worker
    body = worker.split("\n", 3)[3].replace("\\\n", " ")
    toks = shlex.split(body)   # the line parses back: every token quoted
    assert toks[toks.index("--data-parallel-start-rank") + 1] == "$((LWS_WORKER_INDEX * 4))"
    doc = topology_argv_document(tl)
    assert [r["role"] for r in doc["roles"]] == ["prefill", "decode"] and "worker" not in doc["roles"][0]
    assert doc["roles"][1]["worker"]["per_pod_args"][0] == "--data-parallel-address"


@pytest.mark.parametrize("preset,field", [("dsv41-flash-gb300-8p1d", "spec.roles[1].podsPerInstance"),
                                          ("kimi-k3-b300-1p1d", "spec.disaggregation")])
def test_docker_refuses_a_topology_naming_the_field(preset, field):
    with pytest.raises(RenderError) as exc:
        docker.refuse_topology(tl_of(preset))
    assert exc.value.line().startswith(field)


def test_gpustack_refuses_naming_the_single_worker_limitation():
    with pytest.raises(RenderError) as exc:
        gpustack.refuse_topology(tl_of("dsv41-flash-gb300-8p1d"))
    assert "cannot span workers" in exc.value.line() and "#4464" in exc.value.line()
