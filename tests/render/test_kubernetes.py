"""Kubernetes target: schema-valid (strict, 1.30+), runs exactly the launch spec, GPU pod semantics."""
from __future__ import annotations

import json
import math
import subprocess
import time

import kubernetes_validate  # test dependency: kubernetes-validate==1.37.0
import pytest

from gpustack_k3.render.kubernetes import (
    kubernetes_yaml,
    placement,
    render_kubernetes,
    validate_objects,
    workload_kind,
)
from tests.render.conftest import EDGES, PRESETS, doc_of, launch_of, preset_data
from tests.support import tiers

CASES = {**{p: preset_data(p) for p in PRESETS}, **EDGES}


def objects(data: dict) -> tuple[object, list[dict]]:
    launch = launch_of(data)
    return launch, render_kubernetes(launch, doc_of(data))


def by_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def workload(objs):
    (w,) = [o for o in objs if o["kind"] in ("Deployment", "StatefulSet")]
    return w


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("version", ["1.30", "1.33", "1.37"])
def test_every_object_passes_strict_schema_validation(case, version):
    _, objs = objects(CASES[case])
    for o in objs:
        kubernetes_validate.validate(o, version, strict=True)   # raises on any error
    assert validate_objects(objs, version) == []


def test_validator_catches_an_unknown_field():
    """The schema check is real: an unknown field in a rendered object is reported."""
    _, objs = objects(CASES["vllm-seed"])
    workload(objs)["spec"]["template"]["spec"]["containers"][0]["gpuCount"] = 8
    assert any("gpuCount" in p for p in validate_objects(objs))


@pytest.mark.parametrize("case", sorted(CASES))
def test_pod_runs_exactly_the_launch_spec(case):
    launch, objs = objects(CASES[case])
    pod = workload(objs)["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == launch.image
    assert c["command"] == launch.command and c["args"] == launch.args
    plain = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    assert {k: plain[k] for k in launch.env} == launch.env
    # the pod template carries the hash of the launch spec (target `launch`), so a launch change rolls the pod
    import hashlib

    from gpustack_k3.render.targets import render_target

    launch_file = render_target(launch, "launch")["launch.json"]
    assert json.loads(launch_file) == json.loads(json.dumps(launch.to_dict()))
    assert workload(objs)["spec"]["template"]["metadata"]["annotations"]["k3.gpustack.ai/launch-sha256"] == \
        hashlib.sha256(launch_file.encode()).hexdigest()
    assert not by_kind(objs, "ConfigMap")   # the launch spec is not stored in the cluster


@pytest.mark.parametrize("case", sorted(CASES))
def test_network_policy_only_when_asked(case):
    launch, objs = objects(CASES[case])
    policies = by_kind(objs, "NetworkPolicy")
    assert len(policies) == (1 if doc_of(CASES[case]).spec.serving.networkPolicy else 0)
    for pol in policies:   # admits only the engine port, on exactly the engine's pods
        assert pol["spec"]["podSelector"]["matchLabels"] == workload(objs)["spec"]["selector"]["matchLabels"]
        assert pol["spec"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": launch.port}]}]


def test_network_policy_follows_the_spec_field():
    import copy

    on = CASES["hostpath-placement"]
    assert on["spec"]["serving"]["networkPolicy"] is True
    assert len(by_kind(objects(on)[1], "NetworkPolicy")) == 1
    off = copy.deepcopy(on)
    off["spec"]["serving"]["networkPolicy"] = False
    assert not by_kind(objects(off)[1], "NetworkPolicy")


@pytest.mark.parametrize("case", sorted(CASES))
def test_gpu_shm_volumes_probes_placement(case):
    launch, objs = objects(CASES[case])
    w = workload(objs)
    pod = w["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    res = c["resources"]
    if launch.gpu_type == "b300":
        assert res["limits"][launch.gpu_resource] == launch.gpu_count == 8
        assert res["requests"][launch.gpu_resource] == launch.gpu_count
    else:                                                   # CPU test hardware: no extended resource
        assert not launch.gpu_resource and res["limits"] == {}
    vols = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    shm = vols[mounts["/dev/shm"]["name"]]["emptyDir"]
    assert shm == {"medium": "Memory", "sizeLimit": f"{launch.shm_size_gib}Gi"}
    model = next(v for v in launch.volumes if v.purpose == "model")
    assert mounts[model.mount_path]["readOnly"] is True
    assert launch.model_path.startswith(model.mount_path + "/")
    cache = next(v for v in launch.volumes if v.purpose == "cache")
    assert mounts[cache.mount_path]["readOnly"] is False
    # Every cache env var points into the persistent cache mount.
    for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE", "DG_JIT_CACHE_DIR"):
        assert launch.env[k].startswith(cache.mount_path + "/"), k
    # Probes: startup covers the budget; readiness on /health; liveness more tolerant than readiness.
    sp, rp, lp = c["startupProbe"], c["readinessProbe"], c["livenessProbe"]
    assert sp["periodSeconds"] * sp["failureThreshold"] >= launch.startup_budget_s
    assert sp["failureThreshold"] == math.ceil(launch.startup_budget_s / sp["periodSeconds"])
    assert rp["httpGet"]["path"] == "/health" and rp["httpGet"]["port"] == "http"
    assert lp["periodSeconds"] * lp["failureThreshold"] > rp["periodSeconds"] * rp["failureThreshold"]
    assert lp["timeoutSeconds"] >= rp["timeoutSeconds"]
    assert c["ports"] == [{"name": "http", "containerPort": launch.port, "protocol": "TCP"}]
    assert (pod["nodeSelector"], pod["tolerations"]) == placement(launch, doc_of(CASES[case]).spec.placement)
    # Service targets the pod's port; selectors match the pod labels.
    svc = next(o for o in by_kind(objs, "Service") if o["spec"].get("clusterIP") != "None")
    assert svc["spec"]["ports"][0]["port"] == launch.port
    labels = w["spec"]["template"]["metadata"]["labels"]
    for o in (svc["spec"]["selector"], w["spec"]["selector"]["matchLabels"]):
        assert o.items() <= labels.items()
    for o in objs:
        for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by",
                  "app.kubernetes.io/part-of", "app.kubernetes.io/version", "app.kubernetes.io/component"):
            assert k in o["metadata"]["labels"], (o["kind"], k)


@pytest.mark.parametrize("case", sorted(CASES))
def test_security_context_is_strict(case):
    _launch, objs = objects(CASES[case])
    pod = workload(objs)["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False
    assert sc["readOnlyRootFilesystem"] is True and sc["runAsNonRoot"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    assert not any(pod.get(k) for k in ("hostNetwork", "hostIPC", "hostPID"))
    # A read-only root needs a writable HOME/tmp: the scratch emptyDir.
    home = next(e["value"] for e in c["env"] if e["name"] == "HOME")
    assert any(m["mountPath"] == home and not m.get("readOnly") for m in c["volumeMounts"])


def test_secret_env_only_by_secret_key_ref():
    _launch, objs = objects(EDGES["statefulset-secret"])
    (c,) = workload(objs)["spec"]["template"]["spec"]["containers"]
    (tok,) = [e for e in c["env"] if e["name"] == "HF_TOKEN"]
    assert tok == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub-token", "key": "token"}}}
    from gpustack_k3.render.targets import render_target

    stored = json.loads(render_target(_launch, "launch")["launch.json"])
    assert "HF_TOKEN" not in stored["env"]
    assert stored["secret_env"] == [{"name": "HF_TOKEN", "secret_name": "hub-token", "secret_key": "token"}]


def test_workload_kind_follows_volume_identity():
    launch, objs = objects(EDGES["statefulset-secret"])
    assert workload_kind(launch) == "StatefulSet"
    sts = workload(objs)
    assert sts["kind"] == "StatefulSet"
    (tpl,) = sts["spec"]["volumeClaimTemplates"]
    assert tpl["metadata"]["name"] == "compile-cache"
    assert tpl["spec"]["resources"]["requests"]["storage"] == "200Gi"
    headless = [o for o in by_kind(objs, "Service") if o["spec"].get("clusterIP") == "None"]
    assert [h["metadata"]["name"] for h in headless] == [sts["spec"]["serviceName"]]
    pod_vols = {v["name"] for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert "compile-cache" not in pod_vols                   # comes from the claim template
    for case in ("vllm-seed", "hostpath-placement"):
        _l2, o2 = objects(CASES[case])
        assert workload(o2)["kind"] == "Deployment"
        assert workload(o2)["spec"]["strategy"] == {"type": "Recreate"}


def test_hostpath_volumes_and_namespace():
    _launch, objs = objects(EDGES["hostpath-placement"])
    assert {o["metadata"]["namespace"] for o in objs} == {"inference"}
    vols = {v["name"]: v for v in workload(objs)["spec"]["template"]["spec"]["volumes"]}
    assert vols["model"]["hostPath"] == {"path": "/data/models", "type": "Directory"}
    assert vols["compile-cache"]["hostPath"] == {"path": "/data/k3-cache", "type": "DirectoryOrCreate"}
    pod = workload(objs)["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["pool"] == "b300"


def test_storage_problems_refuse_the_render():
    from gpustack_k3.core.launch import Refused
    from gpustack_k3.render.targets import prepare

    d = preset_data("vllm-fixed")
    d["spec"]["storage"] = {"cache": {"kind": "pvc"}}          # new per-pod claim without a size
    with pytest.raises(Refused) as exc:
        prepare(doc_of(d), targets=("kubernetes",))
    assert [f.field for f in exc.value.findings if f.severity == "error"] == ["spec.storage.cache.sizeGiB"]
    d["spec"]["storage"] = {"model": {"kind": "emptyDir"}}
    with pytest.raises(Refused) as exc:
        prepare(doc_of(d), targets=("kubernetes",))
    assert {f.rule for f in exc.value.findings if f.severity == "error"} == {"render-model-emptydir"}
    # argv needs no storage: the same document renders for argv.
    prepare(doc_of(d), targets=("argv",))


@pytest.mark.tools
def test_checkov_passes_with_written_skips(tmp_path):
    """checkov over every rendered object: nothing fails; every skip carries a written reason."""
    exe = tiers.checkov()
    n_objects = 0
    for case, data in sorted(CASES.items()):
        _, objs = objects(data)
        n_objects += len(objs)
        (tmp_path / f"{case}.yaml").write_text(kubernetes_yaml(objs))
    t0 = time.monotonic()
    proc = subprocess.run([exe, "-d", str(tmp_path), "--framework", "kubernetes", "--compact", "-o", "json",
                           "--skip-download"], check=False, capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - t0
    report = json.loads(proc.stdout)
    report = report[0] if isinstance(report, list) else report
    failed = report["results"]["failed_checks"]
    assert failed == [], [(f["check_id"], f["resource"], f["file_path"]) for f in failed]
    assert report["summary"]["parsing_errors"] == 0
    assert report["summary"]["passed"] > 0 and report["summary"]["resource_count"] >= n_objects
    skipped = report["results"]["skipped_checks"]
    assert skipped, "the templates declare skips; checkov should report them"
    for s in skipped:
        assert len(s["check_result"]["suppress_comment"]) > 40, s["check_id"]
    # Only the documented skips, and the secret-env one only where secret env exists.
    ids = {(s["check_id"], s["file_path"].rsplit("/", 1)[-1]) for s in skipped}
    assert {i for i, _ in ids} == {"CKV_K8S_11", "CKV_K8S_13", "CKV_K8S_43", "CKV_K8S_35", "CKV2_K8S_6"}
    assert {f for i, f in ids if i == "CKV_K8S_35"} == {"statefulset-secret.yaml"}
    # no NetworkPolicy is skipped only where none is rendered (and with one, checkov's graph check passes)
    assert {f for i, f in ids if i == "CKV2_K8S_6"} == {
        f"{c}.yaml" for c, data in CASES.items() if not by_kind(objects(data)[1], "NetworkPolicy")}
    assert "hostpath-placement.yaml" not in {f for i, f in ids if i == "CKV2_K8S_6"}
    assert elapsed < 120, f"checkov took {elapsed:.0f}s"


def test_hostile_values_survive_the_yaml_round_trip(tmp_path):
    """Quotes, newlines, `$()`, YAML specials in values: the written file loads back to the exact argv/env."""
    import yaml
    from click.testing import CliRunner

    from gpustack_k3.cli.render_cmd import render

    evil = "it's \"q\" $(x) `y`; a: b\n- c\n{d: [e]} # f & *g !h %i @j"
    d = preset_data("vllm-fixed")
    d["spec"]["model"]["path"] = f"/models/{evil}/Kimi-K3"
    d["spec"]["env"]["EVIL"] = evil
    d["spec"]["env"]["YES"] = "yes"                 # YAML 1.1 boolean if left unquoted
    d["spec"]["env"]["OCT"] = "0755"
    d["spec"]["speculative"]["draftModel"] = f"/models/{evil}"   # inside the --speculative-config JSON
    spec = tmp_path / "evil.yaml"
    spec.write_text(yaml.safe_dump(d, sort_keys=False))
    res = CliRunner().invoke(render, [str(spec), "--target", "kubernetes", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    launch = launch_of(d)
    objs = list(yaml.safe_load_all((tmp_path / "o" / "kubernetes.yaml").read_text()))
    (c,) = workload(objs)["spec"]["template"]["spec"]["containers"]
    assert c["args"] == launch.args
    plain = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    assert {k: plain[k] for k in launch.env} == launch.env
    assert validate_objects(objs) == []
