"""issue 23 items 1 and 2: every channel honours the whole document, and a model's path lies inside its volume.

* `run` (docker, local) and `gpustack apply` carry out a document of one single-pod role, and refuse any other
  topology with the refusal `render --target` of that channel gives (same field, message and way out), before
  anything is started or sent; the field named is one the document has.
* `import -- vllm serve org/name` makes the hub id `spec.model.source` and serves `/models/name` from the volume
  mounted at `/models`; a `spec.model.path` outside any mountable directory is refused naming the field.
"""
from __future__ import annotations

import json

import pytest
import yaml

from gpustack_k3.cli.main import run

TOPOLOGIES = ["kimi-k3-b300-1p1d", "dsv41-flash-gb300-8p1d", "dsv41-flash-gb300-7p1d"]


def _run(capsys, argv, stdin=None, monkeypatch=None):
    code = run(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _has(doc: dict, field: str) -> bool:
    """Does the document spell ``field`` (spec.roles[1].podsPerInstance) out?"""
    node = doc
    for part in field.replace("]", "").replace("[", ".").split("."):
        if isinstance(node, list):
            node = node[int(part)] if part.isdigit() and int(part) < len(node) else None
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            return False
        if node is None:
            return False
    return True


def _preset(name):
    from gpustack_k3.catalog import load_catalog

    return load_catalog().presets[name].document


@pytest.mark.parametrize("preset", TOPOLOGIES)
@pytest.mark.parametrize("channel", [["run", "start", "--dry-run"], ["run", "start", "--runtime", "local", "--dry-run"],
                                     ["gpustack", "apply", "--dry-run", "--server", "http://127.0.0.1:9"]])
def test_a_topology_is_refused_like_render_refuses_it(capsys, monkeypatch, preset, channel):
    monkeypatch.setenv("GPUSTACK_API_KEY", "k")
    target = "gpustack" if channel[0] == "gpustack" else "docker"
    rcode, rout, _ = _run(capsys, ["render", "--preset", preset, "--target", target, "-o", "json"])
    code, out, err = _run(capsys, [*channel, "--preset", preset, "-o", "json"])
    assert rcode == code == 1, err
    mine, theirs = json.loads(out)["error"], json.loads(rout)["error"]
    assert mine["where"] == theirs["where"] and mine["fix"] == theirs["fix"]
    assert _has({"spec": _preset(preset)["spec"]}, mine["where"]), mine["where"]
    assert "nothing was" in err and "Traceback" not in err


def test_a_single_pod_role_runs_as_that_role(capsys, tmp_path):
    doc = _preset("vllm-cpu-smollm2")
    spec = {k: v for k, v in doc["spec"].items() if k not in ("parallel",)}
    spec["roles"] = [{"name": "serve", "role": "serve", "instances": 1, "podsPerInstance": 1,
                      "gpusPerPod": doc["spec"].get("hardware", {}).get("gpuCount", 1) or 1}]
    p = tmp_path / "one-role.yaml"
    p.write_text(yaml.safe_dump({**doc, "spec": spec}))
    rcode, _, rerr = _run(capsys, ["render", str(p), "--target", "docker", "-o", "json"])
    code, out, err = _run(capsys, ["run", "start", str(p), "--dry-run", "-o", "json"])
    assert code == rcode == 0, (err, rerr)
    assert "docker run" in json.loads(out)["docker_run"]


def test_hub_id_is_a_source_and_the_served_path_is_in_the_volume(capsys):
    code, out, _ = _run(capsys, ["import", "--engine", "vllm", "-o", "json", "--", "vllm", "serve",
                                 "moonshotai/Kimi-K3", "-tp", "8"])
    assert code == 0
    model = json.loads(out)["spec"]["model"]
    assert model["source"] == "moonshotai/Kimi-K3" and model["path"] == "/models/Kimi-K3"


def test_rendered_mount_holds_the_served_path(capsys, tmp_path):
    code, out, _ = _run(capsys, ["import", "--engine", "vllm", "--", "vllm", "serve", "moonshotai/Kimi-K3", "-tp", "8"])
    p = tmp_path / "imported.yaml"
    p.write_text(out)
    code, out, err = _run(capsys, ["render", str(p), "--target", "docker", "-o", "json"])
    assert code == 0, err
    params = json.loads(out)
    binds = [m["bind"] for m in params["volumes"].values()]
    served = "/models/Kimi-K3"
    assert any(served.startswith(b.rstrip("/") + "/") for b in binds), binds
    assert all(":" not in src for src in params["volumes"])


@pytest.mark.parametrize("path", ["/Kimi-K3", "moonshotai/Kimi-K3", "models/x", "/models/../etc", "/models//x", "/"])
def test_a_path_outside_a_mountable_directory_is_refused_naming_the_field(capsys, tmp_path, path):
    doc = {"apiVersion": "k3.gpustack.ai/v1alpha1", "kind": "K3Deployment", "metadata": {"name": "x"},
           "spec": {"engine": {"name": "vllm"}, "model": {"path": path}}}
    p = tmp_path / "d.yaml"
    p.write_text(yaml.safe_dump(doc))
    for cmd in (["render", str(p)], ["validate", str(p)], ["run", "start", str(p), "--dry-run"]):
        code, out, err = _run(capsys, [*cmd, "-o", "json"])
        assert code == 2 and json.loads(out)["error"]["where"].endswith("spec.model.path"), (cmd, err)
