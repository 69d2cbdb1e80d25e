"""manifests/examples is the golden tree, one case per target and shape (tools/examples.py GOLDEN): every file must
equal a fresh render. Every case, golden or not (each preset and fixture spec), is rendered for every target here
and asserted semantically: only the documented refusals, valid objects, and the launch spec's argv in every file.

Regenerate after an intended change and review the diff:  python3 tools/generate.py
"""
from __future__ import annotations

import difflib
import subprocess
import sys

import pytest

from tools import examples
from tools.generate import diff_tree

FRESH = examples.example_files()
REGENERATE = "python3 tools/generate.py"


def _show(path, want: str) -> str:
    have = path.read_text() if path.is_file() else ""
    return "".join(list(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                             f"committed {path.name}", "fresh render"))[:60])


@pytest.mark.parametrize("rel", sorted(FRESH))
def test_golden_file(rel):
    path = examples.EXAMPLES / rel
    assert path.is_file(), f"missing golden {rel}: run {REGENERATE}"
    assert path.read_text() == FRESH[rel], (
        f"{rel} changed; if intended, run {REGENERATE} and review the diff\n" + _show(path, FRESH[rel]))


def test_no_stale_golden_files():
    assert diff_tree(examples.EXAMPLES, FRESH) == [], f"run {REGENERATE}"


def test_golden_covers_every_target_of_its_cases():
    from gpustack_k3.core.topology import multi_pod
    from gpustack_k3.render.targets import TARGETS

    have = {tuple(rel.split("/")[:2]) for rel in FRESH if rel.count("/") >= 2}
    all_cases = examples.cases()
    want = {(c, t) for c in examples.GOLDEN
            for t in (examples.TOPOLOGY_TARGETS if multi_pod(all_cases[c]) else (*TARGETS, "gpustack-worker"))}
    assert have == want
    assert {rel.split("/")[0] for rel in FRESH if rel.endswith("/k3deployment.yaml")} == set(examples.GOLDEN_RESOURCES)
    assert [rel for rel in FRESH if rel.startswith("invalid-")]


def test_each_golden_case_is_the_shape_it_stands_for():
    """The golden list is short and explicit; each entry is checked against its document, so the tree keeps one
    case per shape: vLLM and SGLang single-engine, a refusal, a vLLM P/D topology, rack scale."""
    from gpustack_k3.core.topology import multi_pod

    docs = examples.cases()
    engine = {c: docs[c].spec.engine.name for c in examples.GOLDEN}
    single = {c for c in examples.GOLDEN if not multi_pod(docs[c])}
    assert {engine[c] for c in single} == {"vllm", "sglang"}
    assert any(examples.documented_refusals(docs[c]) for c in single)
    assert any("kind: StatefulSet" in FRESH.get(f"{c}/kubernetes/kubernetes.yaml", "") for c in single)
    topo = set(examples.GOLDEN) - single
    assert "vllm" in {engine[c] for c in topo} and all(docs[c].spec.disaggregation for c in topo)
    assert any("kind: ComputeDomain" in FRESH[f"{c}/kubernetes/kubernetes.yaml"] for c in topo)
    assert any("kind: ComputeDomain" not in FRESH[f"{c}/kubernetes/kubernetes.yaml"] for c in topo)
    assert all("kind: DisaggregatedSet" in FRESH[f"{c}/kubernetes-disaggregatedset/kubernetes.yaml"] for c in topo)
    assert set(examples.GOLDEN) < set(docs)      # the rest are asserted below, not committed


CASES = examples.cases()


def _objects(text: str) -> list[dict]:
    import yaml

    return [d for d in yaml.safe_load_all(text) if d]


def _engine_container(objs: list[dict]) -> dict:
    (wl,) = [o for o in objs if o["kind"] in ("Deployment", "StatefulSet")]    # one engine workload
    return wl["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_case_renders_for_every_target_as_its_launch_spec_says(case):
    """Golden or not: the targets refuse only as documented (naming a spec field), the Kubernetes objects are
    valid, and the engine argv in argv.json, the Kubernetes container, the Docker parameters and the GPUStack
    backend is the launch spec's."""
    import json

    from gpustack_k3.core.launch import build_topology_launch
    from gpustack_k3.core.topology import multi_pod
    from gpustack_k3.render.kubernetes import validate_objects
    from gpustack_k3.render.targets import prepare

    doc = CASES[case]
    files = {rel.split("/", 1)[1]: text for rel, text in examples.case_files(case, doc).items()}   # raises on an
    refused = {rel.split("/")[0]: text for rel, text in files.items() if rel.endswith("refused.txt")}  # undocumented refusal
    assert set(refused) == examples.documented_refusals(doc)
    assert all(text.startswith("spec.") for text in refused.values()), refused
    for rel, text in files.items():
        if rel.endswith(".json"):
            json.loads(text)
    if multi_pod(doc):
        tl = build_topology_launch(doc)[0]
        assert json.loads(files["launch/launch.json"]) == json.loads(tl.to_json())
        argv_roles = json.loads(files["argv/argv.json"])["roles"]
        assert [(r["role"], r["leader"]["command"] + r["leader"]["args"]) for r in argv_roles] == \
            [(r.role, r.leader.argv) for r in tl.roles]
        lws = [o for o in _objects(files["kubernetes/kubernetes.yaml"]) if o["kind"] == "LeaderWorkerSet"]
        assert len(lws) == len(tl.roles)
        assert validate_objects([o for o in _objects(files["kubernetes/kubernetes.yaml"])
                                 if o["apiVersion"] in ("v1", "apps/v1")], required=True) == []
        ds = [o for o in _objects(files["kubernetes-disaggregatedset/kubernetes.yaml"]) if o["kind"] == "DisaggregatedSet"]
        assert len(ds) == 1
        return
    launch, _ = prepare(doc)
    assert json.loads(files["launch/launch.json"]) == json.loads(launch.to_json())
    argv = json.loads(files["argv/argv.json"])
    assert argv["command"] + argv["args"] == launch.argv and argv["image"] == launch.image
    objs = _objects(files["kubernetes/kubernetes.yaml"])
    assert validate_objects(objs, required=True) == []
    c = _engine_container(objs)
    assert c["command"] + c["args"] == launch.argv and c["image"] == launch.image
    params = json.loads(files["docker/docker-run-params.json"])
    assert params["entrypoint"] + params["command"] == launch.argv and params["image"] == launch.image
    if "gpustack" not in refused:
        backend = json.loads(files["gpustack/backend.json"])
        assert backend["default_entrypoint"] == " ".join(launch.command)
        tokens = " ".join(backend["default_backend_param"]) + " " + backend["default_run_command"]
        assert all(t.split("=")[0] in tokens for t in launch.engine_args if t.startswith("--")), case


def test_regeneration_is_deterministic():
    assert examples.example_files() == FRESH


def test_generate_check_detects_drift_and_names_the_file(tmp_path, monkeypatch):
    """``tools/generate.py --check`` lists a changed and an extra file and exits 1 (examples only: the chart
    and install.yaml are checked by the helm tier)."""
    from tools import generate

    tree = tmp_path / "examples"
    monkeypatch.setattr(examples, "EXAMPLES", tree)
    files = {tree / rel: text for rel, text in FRESH.items()}
    for p, text in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    assert generate.stale(files) == ([], [])
    victim = next(p for p in files if p.name == "kubernetes.yaml")
    victim.write_text(victim.read_text().replace("nvidia.com/gpu: 8", "nvidia.com/gpu: 7"))
    (tree / "extra.txt").write_text("x")
    changed, extra = generate.stale(files)
    assert changed == [victim] and extra == [tree / "extra.txt"]


def test_generate_refuses_unknown_arguments():
    proc = subprocess.run([sys.executable, "tools/generate.py", "--frobnicate"], capture_output=True, text=True,
                          cwd=examples.REPO, timeout=120)
    assert proc.returncode == 2 and "usage" in proc.stderr
