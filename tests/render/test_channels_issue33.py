"""Issue 33, the channels: nothing of the document silently dropped, one rule for what a target cannot express."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gpustack_k3.cli.render_cmd import render
from tests.render.conftest import REPO, doc_of, preset_data


def run(*args):
    return CliRunner().invoke(render, list(args))


def write_spec(tmp_path, data, name="spec.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def readme_example() -> dict:
    """The first document of the README's "The deployment spec" section, as a user copies it."""
    text = (REPO / "README.md").read_text()
    section = text.split("## The deployment spec", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
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


@pytest.mark.xfail(strict=True, reason="needs /work/patches/h-channels-1.patch (gpustack_k3/cli/, h-cli)")
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


@pytest.mark.xfail(strict=True, reason="needs /work/patches/h-channels-1.patch (gpustack_k3/cli/, h-cli)")
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
