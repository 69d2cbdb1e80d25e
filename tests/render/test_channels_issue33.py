"""Issue 33, the channels: nothing of the document silently dropped, one rule for what a target cannot express."""
from __future__ import annotations

import json
import os
import re

import yaml
from click.testing import CliRunner

from tests.render.conftest import REPO, doc_of, preset_data, run, write_spec


def readme_example() -> dict:
    """The first document of the README's "The deployment spec" section, as a user copies it."""
    text = (REPO / "README.md").read_text()
    section = text.split("## The deployment spec", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.DOTALL).group(1)
    return yaml.safe_load(block)


def pd_with_role_placement() -> dict:
    d = preset_data("kimi-k3-b300-1p1d")
    d["spec"]["placement"] = {"nodeSelector": {"pool": "shared"}}
    d["spec"]["roles"][0]["placement"] = {"nodeSelector": {"pool": "prefill"},
                                          "tolerations": [{"key": "prefill-only", "operator": "Exists",
                                                           "effect": "NoSchedule"}]}
    d["spec"]["roles"][1]["placement"] = {"nodeSelector": {"pool": "decode"}}
    return d


def _pod_specs_by_role(objs: list[dict]) -> dict[str, list[dict]]:
    from gpustack_k3.render.lws import lws_objects, pod_templates

    return {role: [t["spec"] for _w, t in pod_templates(spec)] for role, spec in lws_objects(objs)}


# ---------------------------------------------------------------- item 1: per-role placement, every Kubernetes form

def _check_role_placement(objs):
    pods = _pod_specs_by_role(objs)
    assert set(pods) == {"prefill", "decode"}
    for p in pods["prefill"]:
        assert p["nodeSelector"]["pool"] == "prefill"
        assert {"key": "prefill-only", "operator": "Exists", "effect": "NoSchedule"} in p["tolerations"]
    for p in pods["decode"]:
        assert p["nodeSelector"]["pool"] == "decode"
        assert not any(t.get("key") == "prefill-only" for t in p["tolerations"])


def test_role_placement_reaches_every_leaderworkerset():
    from gpustack_k3.render.lws import render_document

    _check_role_placement(render_document(doc_of(pd_with_role_placement()), validate=False))


def test_role_placement_reaches_the_disaggregatedset():
    from gpustack_k3.render.lws import render_document

    _check_role_placement(render_document(doc_of(pd_with_role_placement()), form="disaggregatedset",
                                          validate=False))


def test_role_placement_reaches_the_operators_render():
    from gpustack_k3.operator import hooks

    d = pd_with_role_placement()
    d["metadata"]["namespace"] = "ns1"
    _check_role_placement(hooks.render(d))


def test_role_without_placement_inherits_the_shared_one():
    from gpustack_k3.render.lws import render_document

    d = pd_with_role_placement()
    del d["spec"]["roles"][1]["placement"]
    pods = _pod_specs_by_role(render_document(doc_of(d), validate=False))
    assert all(p["nodeSelector"]["pool"] == "shared" for p in pods["decode"])


# ---------------------------------------------------------------- minor: user tolerations keep the GPU toleration

def test_user_tolerations_are_merged_with_the_gpu_toleration():
    from gpustack_k3.render.kubernetes import GPU_TOLERATION, render_kubernetes
    from gpustack_k3.render.targets import prepare

    d = preset_data("vllm-fixed")
    mine = {"key": "dedicated", "operator": "Equal", "value": "k3", "effect": "NoSchedule"}
    d["spec"]["placement"] = {"tolerations": [mine]}
    doc = doc_of(d)
    launch, _ = prepare(doc)
    (wl,) = [o for o in render_kubernetes(launch, doc) if o["kind"] in ("Deployment", "StatefulSet")]
    tol = wl["spec"]["template"]["spec"]["tolerations"]
    assert mine in tol and GPU_TOLERATION in tol and len(tol) == 2


def test_a_user_toleration_equal_to_the_gpu_one_is_not_doubled():
    from gpustack_k3.render.kubernetes import GPU_TOLERATION, render_kubernetes
    from gpustack_k3.render.targets import prepare

    d = preset_data("vllm-fixed")
    d["spec"]["placement"] = {"tolerations": [dict(GPU_TOLERATION)]}
    doc = doc_of(d)
    launch, _ = prepare(doc)
    (wl,) = [o for o in render_kubernetes(launch, doc) if o["kind"] in ("Deployment", "StatefulSet")]
    assert wl["spec"]["template"]["spec"]["tolerations"] == [GPU_TOLERATION]


# ---------------------------------------------------------------- item 2: --out twice from the folder holding it

def test_out_twice_from_the_directory_that_holds_it(tmp_path):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for _ in range(2):
            res = run("--preset", "vllm-fixed", "--target", "argv", "--out", "outA")
            assert res.exit_code == 0, res.output
        assert sorted(os.listdir("outA")) == [".gpustack-k3-render", "argv.json", "argv.sh"]
    finally:
        os.chdir(cwd)


def test_out_that_is_the_current_directory_or_holds_it_is_still_refused(tmp_path):
    from gpustack_k3.errors import InputError
    from gpustack_k3.render.writer import replace_dir

    out = tmp_path / "o"
    replace_dir(out, {"a.txt": "1\n"})
    (out / "sub").mkdir()
    cwd = os.getcwd()
    for inside in (out, out / "sub"):
        os.chdir(inside)
        try:
            try:
                replace_dir(out, {"a.txt": "2\n"})
            except InputError as exc:
                assert "current directory" in exc.message
            else:
                raise AssertionError("replacing the directory the process stands in must be refused")
        finally:
            os.chdir(cwd)


# ---------------------------------------------------------------- item 3: one rule for both shapes

def test_readme_example_renders_all_with_gpustack_refused_per_target(tmp_path):
    spec = write_spec(tmp_path, readme_example())
    out = tmp_path / "all"
    res = run(str(spec), "--out", str(out))
    assert res.exit_code == 0, res.output
    assert (out / "kubernetes" / "kubernetes.yaml").is_file() and (out / "argv" / "argv.json").is_file()
    refusal = (out / "gpustack" / "refused.txt").read_text()
    assert "spec.secretEnv" in refusal
    assert not (out / "gpustack" / "model.json").exists()


def test_readme_example_gpustack_alone_is_refused_naming_the_field(tmp_path):
    spec = write_spec(tmp_path, readme_example())
    res = run(str(spec), "--target", "gpustack", "-o", "json")
    assert res.exit_code == 1
    assert json.loads(res.stdout)["error"]["where"] == "spec.secretEnv"


def test_readme_example_dry_run_reports_the_gpustack_refusal_and_exits_0(tmp_path):
    from gpustack_k3.cli.core_cmds import dry_run

    spec = write_spec(tmp_path, readme_example())
    res = CliRunner().invoke(dry_run, [str(spec), "-o", "json"])
    assert res.exit_code == 0, res.output
    targets = json.loads(res.stdout)["targets"]
    assert targets["gpustack"].startswith("refused:") and "spec.secretEnv" in targets["gpustack"]
    assert not targets["kubernetes"].startswith("refused")


# ---------------------------------------------------------------- item 9: --worker/--cluster for a one-role document

def one_role_document() -> dict:
    d = preset_data("vllm-fixed")
    d["spec"]["roles"] = [{"name": "serve", "role": "serve", "gpusPerPod": d["spec"]["hardware"].get("gpuCount", 8)}]
    return d


def test_gpustack_worker_and_cluster_reach_a_one_role_document(tmp_path):
    spec = write_spec(tmp_path, one_role_document())
    out = tmp_path / "g"
    res = run(str(spec), "--target", "gpustack", "--worker", "node-7", "--cluster", "c2", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert "node-7" in (out / "model.json").read_text()
    assert "c2" in (out / "import.yaml").read_text()


def test_render_topology_targets_passes_the_gpustack_options():
    from gpustack_k3.render.targets import render_topology_targets

    files, refused, _ = render_topology_targets(doc_of(one_role_document()), ("gpustack",),
                                                gpustack={"worker": "node-7", "cluster": "c2"})
    assert not refused
    assert "node-7" in files["gpustack"]["model.json"] and "c2" in files["gpustack"]["import.yaml"]


# ---------------------------------------------------------------- item 4: Kubernetes' own name limits

def _name_findings(data):
    from gpustack_k3.core.rules import validate

    return [f for f in validate(doc_of(data)) if f.rule == "k8s-name-length"]


def test_validate_names_the_role_whose_lws_name_kubernetes_refuses():
    d = preset_data("kimi-k3-b300-1p1d")
    d["metadata"]["name"] = "k" * 53                       # the schema's maximum
    found = _name_findings(d)
    assert {f.field for f in found} == {"spec.roles[0].name", "spec.roles[1].name"}
    assert all(f.severity == "error" and "at most 52" in f.message for f in found)


def test_validate_counts_the_group_suffix_of_multi_pod_roles():
    d = preset_data("dsv41-flash-gb300-8p1d")
    decode = next(i for i, r in enumerate(d["spec"]["roles"]) if r.get("podsPerInstance", 1) > 1)
    name = d["spec"]["roles"][decode]["name"] = "decodewide"     # the longest role name
    d["metadata"]["name"] = "d" * (52 - 1 - len(name))   # <name>-<role> = 52: fits a leader set, not <lws>-0
    assert [f.field for f in _name_findings(d)] == [f"spec.roles[{decode}].name"]
    d["metadata"]["name"] = "d" * (52 - 3 - len(name))
    assert _name_findings(d) == []


def test_validate_refuses_a_statefulset_name_past_52_and_a_service_name_beginning_with_a_digit():
    d = preset_data("vllm-fixed")
    d["metadata"]["name"] = "s" * 53
    assert _name_findings(d) == []                         # a Deployment: 53 is fine
    d["spec"]["storage"] = {"model": {"kind": "pvc", "source": "m"}, "cache": {"kind": "pvc", "sizeGiB": 10}}
    (f,) = _name_findings(d)
    assert f.field == "metadata.name" and "StatefulSet" in f.message
    d = preset_data("vllm-fixed")
    d["metadata"]["name"] = "1k3"
    (f,) = _name_findings(d)
    assert f.field == "metadata.name" and "DNS-1035" in f.message


def test_the_longest_accepted_names_render_objects_kubernetes_accepts():
    from gpustack_k3.core.k8s_names import object_problems
    from gpustack_k3.render.lws import render_document

    for preset in ("kimi-k3-b300-1p1d", "dsv41-flash-gb300-8p1d"):
        d = preset_data(preset)
        longest = max(len(r["name"]) for r in d["spec"]["roles"])
        d["metadata"]["name"] = "n" * (52 - 5 - longest)
        assert _name_findings(d) == []
        for form in ("leaderworkerset", "disaggregatedset"):
            objs = render_document(doc_of(d), form=form, validate=False)
            assert object_problems(objs) == []


def test_every_preset_renders_within_kubernetes_limits():
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.core.k8s_names import object_problems
    from gpustack_k3.render.kubernetes import render_kubernetes
    from gpustack_k3.render.lws import render_document
    from gpustack_k3.render.targets import prepare

    for name, p in load_catalog().presets.items():
        doc = doc_of(p.document)
        objs = render_document(doc, validate=False) if doc.spec.roles else render_kubernetes(prepare(doc)[0], doc)
        assert object_problems(objs) == [], name


def test_object_problems_sees_what_the_api_server_refuses():
    from gpustack_k3.core.k8s_names import object_problems

    ok = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a" * 63, "labels": {"x": "y"}}, "spec": {}}
    assert object_problems([ok]) == []
    bad = [
        {"kind": "Service", "metadata": {"name": "a" * 64}},
        {"kind": "Service", "metadata": {"name": "1abc"}},
        {"kind": "StatefulSet", "metadata": {"name": "s" * 53}},
        {"kind": "Deployment", "metadata": {"name": "d", "labels": {"app.kubernetes.io/instance": "v" * 64}}},
        {"kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"metadata": {"labels": {"k": "-x"}}}}},
        {"kind": "Deployment", "metadata": {"name": "d", "annotations": {"a" * 64: "v"}}},
        {"kind": "Deployment", "metadata": {"name": "d", "annotations": {"a": "v" * (256 * 1024)}}},
        {"kind": "LeaderWorkerSet", "metadata": {"name": "l"}, "spec": {"leaderWorkerTemplate": {
            "workerTemplate": {"metadata": {"labels": {"k": "v" * 64}}}}}},
    ]
    for o in bad:
        assert object_problems([o]), o


def test_derived_names_get_a_stable_hash_suffix_only_past_the_limit():
    from gpustack_k3.core.k8s_names import derived_name

    assert derived_name("kimi", "-api") == "kimi-api"
    long_a, long_b = "a" * 60 + "-prefill", "a" * 60 + "-prefilm"
    na, nb = derived_name(long_a, "-api"), derived_name(long_b, "-api")
    assert len(na) == 63 and na.endswith("-api") and na == derived_name(long_a, "-api") and na != nb


def test_a_render_past_the_limits_is_refused_not_printed():
    from gpustack_k3.render.kubernetes import render_kubernetes
    from gpustack_k3.render.targets import prepare
    from gpustack_k3.render.templates import RenderError

    d = preset_data("vllm-fixed")
    d["metadata"]["labels"] = {"team": "x"}
    launch, _ = prepare(doc_of(d))
    import dataclasses

    try:
        render_kubernetes(dataclasses.replace(launch, name="x" * 70), doc_of(d))
    except RenderError as exc:
        assert "Kubernetes would refuse" in exc.message
    else:
        raise AssertionError("a 70-character Service name must not render")


# ---------------------------------------------------------------- metadata.labels / annotations are carried

def test_document_labels_and_annotations_reach_every_object():
    from gpustack_k3.render.kubernetes import render_kubernetes
    from gpustack_k3.render.lws import render_document
    from gpustack_k3.render.targets import prepare

    for preset in ("vllm-fixed", "kimi-k3-b300-1p1d"):
        d = preset_data(preset)
        d["metadata"]["labels"] = {"team": "inference"}
        d["metadata"]["annotations"] = {"example.com/owner": "me",
                                        "kubectl.kubernetes.io/last-applied-configuration": "{}"}
        doc = doc_of(d)
        objs = render_document(doc, validate=False) if doc.spec.roles else render_kubernetes(prepare(doc)[0], doc)
        for o in objs:
            assert o["metadata"]["labels"]["team"] == "inference", o["kind"]
            assert o["metadata"]["annotations"]["example.com/owner"] == "me"
            assert "kubectl.kubernetes.io/last-applied-configuration" not in o["metadata"]["annotations"]


def test_a_role_may_repeat_the_shared_nvlink_but_not_contradict_it():
    from gpustack_k3.render.lws import render_document
    from gpustack_k3.render.templates import RenderError

    d = preset_data("dsv41-flash-gb300-8p1d")
    for r in d["spec"]["roles"]:
        r["placement"] = {"nvlink": "computeDomain"}
    render_document(doc_of(d), validate=False)
    for r in d["spec"]["roles"]:
        r["placement"] = {"nvlink": "none"}
    try:
        render_document(doc_of(d), validate=False)
    except RenderError as exc:
        assert exc.where.endswith(".placement.nvlink")
    else:
        raise AssertionError("every role saying nvlink none while the layout uses a ComputeDomain must not render")


# ---------------------------------------------------------------- minors: argv.json, secretEnv keys, no roles

def test_argv_json_names_secret_env_by_reference():
    from gpustack_k3.render.argv import argv_document
    from tests.render.conftest import launch_of

    out = argv_document(launch_of(readme_example()))
    assert out["secret_env"] == [{"name": "HF_TOKEN", "secret": "hub", "key": "token"}]
    assert "HF_TOKEN" not in out["env"]


def test_secret_env_keys_kubernetes_refuses_are_unusable_input():
    import pydantic

    from gpustack_k3.api.v1alpha1.spec import SecretEnv

    for key in ("token", "a.b_c-1", "." + "x", "A" * 253):
        SecretEnv(name="T", secretName="hub", key=key)
    for key in ("", "has space", "a/b", ".", "..", "..x", "A" * 254):
        try:
            SecretEnv(name="T", secretName="hub", key=key)
        except pydantic.ValidationError:
            pass
        else:
            raise AssertionError(f"secretEnv key {key!r} passes but Kubernetes refuses it")


def test_disaggregation_routing_network_without_roles_are_refused_naming_the_field():
    from gpustack_k3.core.rules import validate

    d = preset_data("vllm-fixed")
    d["spec"]["disaggregation"] = {"connector": "NixlConnector"}
    d["spec"]["routing"] = {"target": "vllm-router"}
    d["spec"]["network"] = {"ucx": {"transports": "rc"}}
    found = {f.field for f in validate(doc_of(d)) if f.rule == "topology-fields-need-roles"}
    assert found == {"spec.disaggregation", "spec.routing", "spec.network"}


def test_docker_and_gpustack_refuse_a_role_of_several_instances_naming_the_field():
    from gpustack_k3.render.targets import render_topology_targets

    d = one_role_document()
    d["spec"]["roles"][0]["instances"] = 2
    _files, refused, _ = render_topology_targets(doc_of(d), ("docker", "gpustack"))
    assert {t: e.where for t, e in refused.items()} == {"docker": "spec.roles[0].instances",
                                                       "gpustack": "spec.roles[0].instances"}


def test_network_policy_of_a_topology_is_refused_naming_the_field_not_dropped():
    from gpustack_k3.render.lws import render_document
    from gpustack_k3.render.templates import RenderError

    d = preset_data("kimi-k3-b300-1p1d")
    d["spec"]["serving"] = {"networkPolicy": True}
    try:
        render_document(doc_of(d), validate=False)
    except RenderError as exc:
        assert exc.where == "spec.serving.networkPolicy"
    else:
        raise AssertionError("a topology's networkPolicy must not be silently dropped")


def test_kubernetes_yaml_output_is_one_document():
    res = run("--preset", "vllm-fixed", "--target", "kubernetes", "-o", "yaml")
    assert res.exit_code == 0, res.output
    docs = [d for d in yaml.safe_load_all(res.stdout) if d is not None]
    assert len(docs) == 1 and docs[0]["kind"] == "List" and len(docs[0]["items"]) >= 2
    text = run("--preset", "vllm-fixed", "--target", "kubernetes")
    assert len([d for d in yaml.safe_load_all(text.stdout) if d]) >= 2    # the default stays the apply-able stream


# ---------------------------------------------------------------- KNOWN_GAPS of the field-coverage sweep, closed

def test_docker_labels_the_container_with_the_documents_labels_and_annotations():
    from gpustack_k3.render.targets import prepare, render_topology_targets, render_target

    d = preset_data("vllm-fixed")
    d["metadata"]["labels"] = {"team": "inference", "app.kubernetes.io/name": "mine"}
    d["metadata"]["annotations"] = {"example.com/owner": "me", "kubectl.kubernetes.io/last-applied-configuration": "{}"}
    doc = doc_of(d)
    files = render_target(prepare(doc)[0], "docker", doc=doc)
    labels = json.loads(files["docker-run-params.json"])["labels"]
    assert labels["team"] == "inference" and labels["example.com/owner"] == "me"
    assert labels["app.kubernetes.io/name"] == "kimi-k3"           # the product's own label wins a clash
    assert "kubectl.kubernetes.io/last-applied-configuration" not in labels
    assert "--label team=inference" in files["docker-run.sh"]
    one = one_role_document()
    one["metadata"]["labels"] = {"team": "inference"}
    got, refused, _ = render_topology_targets(doc_of(one), ("docker",))
    assert not refused and json.loads(got["docker"]["docker-run-params.json"])["labels"]["team"] == "inference"


def test_ucx_env_is_in_every_roles_launch_and_argv_not_only_the_pods():
    from gpustack_k3.render.targets import render_topology_targets

    d = preset_data("kimi-k3-b300-1p1d")
    d["spec"]["network"] = {"ucx": {"transports": "rc,cuda_copy", "netDevices": "mlx5_0:1"}}
    d["spec"]["env"] = {"UCX_TLS": "tcp"}           # spec.network.ucx wins over spec.env, as on the pods
    files, refused, _ = render_topology_targets(doc_of(d), ("launch", "argv", "kubernetes"))
    assert set(files) == {"launch", "argv", "kubernetes"}, refused
    for role in json.loads(files["argv"]["argv.json"])["roles"]:
        assert role["leader"]["env"]["UCX_TLS"] == "rc,cuda_copy"
        assert role["leader"]["env"]["UCX_NET_DEVICES"] == "mlx5_0:1"
    assert json.loads(files["launch"]["launch.json"])["roles"][0]["leader"]["env"]["UCX_NET_DEVICES"] == "mlx5_0:1"
    for o in yaml.safe_load_all(files["kubernetes"]["kubernetes.yaml"]):
        for c in (_containers(o) if o else []):
            env = [e for e in c.get("env") or [] if e["name"] == "UCX_TLS"]
            assert env == [{"name": "UCX_TLS", "value": "rc,cuda_copy"}], o["kind"]    # once, not twice


def _containers(o: dict) -> list[dict]:
    out = []
    lwt = (o.get("spec") or {}).get("leaderWorkerTemplate") or {}
    for k in ("leaderTemplate", "workerTemplate"):
        out += ((lwt.get(k) or {}).get("spec") or {}).get("containers") or []
    return out


def test_docker_and_gpustack_refuse_an_rdma_request_naming_the_field():
    from gpustack_k3.render.targets import channel_launch, render_topology_targets
    from gpustack_k3.render.templates import RenderError

    d = one_role_document()
    d["spec"]["network"] = {"rdma": {"resource": "rdma/ib", "count": 1}}
    _files, refused, _ = render_topology_targets(doc_of(d), ("docker", "gpustack"))
    assert {t: e.where for t, e in refused.items()} == {"docker": "spec.network.rdma", "gpustack": "spec.network.rdma"}
    for channel in ("docker", "local", "gpustack"):
        try:
            channel_launch(doc_of(d), channel)
        except RenderError as exc:
            assert exc.where == "spec.network.rdma", channel
        else:
            raise AssertionError(f"{channel} must not drop spec.network.rdma")


def test_gpustack_names_the_deployment_after_the_served_model(tmp_path):
    from gpustack_k3.render.targets import prepare, render_target, render_topology_targets

    d = preset_data("vllm-fixed")
    d["spec"]["model"]["servedModelName"] = "kimi-k3-prod"
    doc = doc_of(d)
    files = render_target(prepare(doc)[0], "gpustack", doc=doc)
    assert json.loads(files["model.json"])["name"] == "kimi-k3-prod"
    files, refused, _ = render_topology_targets(doc_of(one_role_document()), ("gpustack",))
    # a one-role document serves under the document's name (core/topology.py), so GPUStack names it so too
    assert json.loads(files["gpustack"]["model.json"])["name"] == one_role_document()["metadata"]["name"], refused
    d["spec"]["model"]["servedModelName"] = "moonshotai/Kimi-K3"
    res = run(str(write_spec(tmp_path, d)), "--target", "gpustack", "-o", "json")
    assert res.exit_code == 1 and json.loads(res.stdout)["error"]["where"] == "spec.model.servedModelName", res.output



def test_routing_policies_without_a_pd_router_are_refused_naming_the_field():
    from gpustack_k3.render.lws import render_document
    from gpustack_k3.render.targets import render_topology_targets
    from gpustack_k3.render.templates import RenderError

    for routing, where in (({"decodePolicy": "round_robin"}, "spec.routing.decodePolicy"),
                           ({"target": "inferencePool", "prefillPolicy": "random"}, "spec.routing.prefillPolicy")):
        d = one_role_document()
        d["spec"]["routing"] = routing
        try:
            render_document(doc_of(d), validate=False)
        except RenderError as exc:
            assert exc.where == where
        else:
            raise AssertionError(f"{where} of a serve role must not be silently dropped")
        _files, refused, _ = render_topology_targets(doc_of(d), ("docker", "gpustack"))
        assert {t: e.where for t, e in refused.items()} == {"docker": "spec.routing", "gpustack": "spec.routing"}
    d = one_role_document()
    d["spec"]["routing"] = {"target": "inferencePool"}          # what the serve role's front is: rendered
    assert any(o["kind"] == "InferencePool" for o in render_document(doc_of(d), validate=False))
    pd = preset_data("kimi-k3-b300-1p1d")
    pd["spec"]["routing"] = {"decodePolicy": "random"}           # the P/D router carries it
    assert any("random" in json.dumps(o) for o in render_document(doc_of(pd), validate=False))
