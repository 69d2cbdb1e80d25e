"""manifests/examples: the golden tree, one case per (target, shape); every other case is asserted semantically.

A case is a catalog preset or a spec of tests/render/fixtures/specs. ``GOLDEN`` names the few cases whose files are
committed, one per shape (single-engine vLLM and SGLang, a target's documented refusal, a vLLM P/D topology as
LeaderWorkerSets and as a DisaggregatedSet, rack scale with a ComputeDomain); ``GOLDEN_RESOURCES`` the presets whose
custom resource is committed; plus the invalid example the CRD's CEL refuses. Every case (golden or not) is rendered
for every target by tests/render/test_golden.py, which asserts what must hold of any render: only the documented
refusals (``documented_refusals``), the rendered objects valid, and the engine argv of every file equal to the launch
spec's. A new preset is covered there; it gets golden files only if it is a new shape (add it to ``GOLDEN``).

    manifests/examples/<case>/<target>/<file>      launch, argv, kubernetes, docker, gpustack (GOLDEN cases)
    manifests/examples/<case>/gpustack-worker/...  the GPUStack files with all GPUs pinned on WORKER
    manifests/examples/<case>/kubernetes-disaggregatedset/kubernetes.yaml   a topology as one DisaggregatedSet
    manifests/examples/<preset>/k3deployment.yaml  the preset as a custom resource (GOLDEN_RESOURCES)
    manifests/examples/invalid-*.yaml              refused by the API server (CEL)

Regenerate with `python3 tools/generate.py` (tests/render/test_golden.py fails on drift).
"""
from __future__ import annotations

from pathlib import Path

from tools import chart

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "manifests" / "examples"
SPECS = REPO / "tests" / "render" / "fixtures" / "specs"
WORKER = "b300-node-1"          # the GPUStack worker the gpustack-worker files pin their GPUs on

# case -> the shape it stands for (tests/render/test_golden.py checks each claim against the document)
GOLDEN = {
    "vllm-seed": "single engine, vLLM (tests/packaging compares the installed wheel's render with it)",
    "sglang-seed": "single engine, SGLang",
    "statefulset-secret": "single engine as a StatefulSet with secret env, which the gpustack target refuses",
    "kimi-k3-b300-1p1d": "vLLM P/D topology: one LeaderWorkerSet per role, the DisaggregatedSet form, refusals",
    "dsv41-flash-gb300-8p1d": "rack scale: a topology on GB300 NVL72 with its ComputeDomain and router",
}
# presets whose custom resource is committed: a single-engine one (the README applies it) and a topology
GOLDEN_RESOURCES = ("vllm-fixed", "kimi-k3-b300-1p1d")
TOPOLOGY_TARGETS = ("launch", "argv", "kubernetes", "kubernetes-disaggregatedset", "docker", "gpustack")


def cases() -> dict[str, object]:
    """case name -> DeploymentDocument (presets first, then the fixture spec files)."""
    import yaml

    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.catalog import load_catalog

    out: dict[str, object] = {}
    for name, preset in load_catalog().presets.items():
        out[name] = DeploymentDocument.model_validate(preset.document)
    for p in sorted(SPECS.glob("*.yaml")):
        if p.stem in out:
            raise ValueError(f"fixture spec {p.name} has the name of a preset")
        out[p.stem] = DeploymentDocument.model_validate(yaml.safe_load(p.read_text(encoding="utf-8")))
    return out


def documented_refusals(doc) -> set[str]:
    """The targets that refuse ``doc`` by design (README "Commands"): docker and gpustack run one engine, not a
    multi-pod or P/D topology; GPUStack deployments have no secret references (``spec.secretEnv``)."""
    from gpustack_k3.core.topology import multi_pod

    if multi_pod(doc):
        return {"docker", "gpustack"}
    return {"gpustack", "gpustack-worker"} if doc.spec.secretEnv else set()


def topology_files(name: str, doc) -> dict[str, str]:
    """A multi-pod/P-D document: the topology launch; argv per role and pod kind; kubernetes as one LeaderWorkerSet
    per role (and as one DisaggregatedSet); docker and gpustack refuse with their reason (``refused.txt``)."""
    from gpustack_k3.render.targets import render_topology_targets

    out: dict[str, str] = {}
    for folder, form in (("", "leaderworkerset"), ("kubernetes-disaggregatedset", "disaggregatedset")):
        targets = ("launch", "argv", "kubernetes", "docker", "gpustack") if not folder else ("kubernetes",)
        files, refused, _ = render_topology_targets(doc, targets, namespace=doc.metadata.namespace, form=form)
        for target, exc in refused.items():
            out[f"{name}/{target}/refused.txt"] = exc.line() + "\n"
        for target, texts in files.items():
            for rel, text in texts.items():
                out[f"{name}/{folder or target}/{rel}"] = text
    return out


def case_files(name: str, doc) -> dict[str, str]:
    """``<case>/<target>/<file>`` of one case, every target; a target that refuses gets ``refused.txt`` with its
    message. Raises AssertionError when the targets that refuse are not ``documented_refusals(doc)``."""
    from gpustack_k3.core.topology import multi_pod
    from gpustack_k3.render.targets import TARGETS, prepare, render_target
    from gpustack_k3.render.templates import RenderError

    if multi_pod(doc):
        files = topology_files(name, doc)
    else:
        variants = [(t, t, {}) for t in TARGETS] + [("gpustack-worker", "gpustack", {"worker": WORKER})]
        files = {}
        launch, _ = prepare(doc)
        for folder, target, gpustack in variants:
            try:
                out = render_target(launch, target, namespace=doc.metadata.namespace, doc=doc, gpustack=gpustack)
            except RenderError as exc:
                out = {"refused.txt": exc.line() + "\n"}
            for rel, text in out.items():
                files[f"{name}/{folder}/{rel}"] = text
    refused = {rel.split("/")[1] for rel in files if rel.endswith("/refused.txt")}
    if refused != documented_refusals(doc):
        raise AssertionError(f"{name}: refused by {sorted(refused)}, documented {sorted(documented_refusals(doc))}: "
                             + "; ".join(files[f"{name}/{t}/refused.txt"].strip() for t in sorted(refused)))
    return files


def rendered_files(names=None) -> dict[str, str]:
    """``<case>/<target>/<file>`` of the cases named (default: ``GOLDEN``)."""
    all_cases = cases()
    files: dict[str, str] = {}
    for name in (GOLDEN if names is None else names):
        files.update(case_files(name, all_cases[name]))
    return files


def readme(files: dict[str, str]) -> str:
    cases_ = sorted({rel.split("/", 1)[0] for rel in files if "/" in rel})
    loose = sorted(rel for rel in files if "/" not in rel)
    lines = ["# Examples (generated)", "",
             f"Generated by `{chart.REGENERATE}` (tools/examples.py); do not edit by hand. The project's golden "
             "tree: one case per target and shape, and `python3 -m pytest tests/render` fails when a file differs "
             "from a fresh render. Every other preset and fixture spec is rendered for every target by the same "
             "test and asserted semantically (documented refusals only, valid objects, the launch spec's argv).", "",
             "| case | shape | files |", "| --- | --- | --- |"]
    for c in cases_:
        rels = sorted(rel.split("/", 1)[1] for rel in files if rel.startswith(c + "/"))
        shape = GOLDEN.get(c, "its custom resource" if c in GOLDEN_RESOURCES else "")
        lines.append(f"| {c} | {shape} | " + ", ".join(f"`{r}`" for r in rels) + " |")
    if loose:
        lines += ["", "Also here: " + ", ".join(f"`{r}`" for r in loose)
                  + " (custom resources the API server's CEL rules refuse)."]
    return "\n".join(lines) + "\n"


def example_files() -> dict[str, str]:
    """Everything under manifests/examples, relative to it."""
    files = rendered_files()
    keep = {f"{name}/k3deployment.yaml" for name in GOLDEN_RESOURCES}
    files.update({rel: text for rel, text in chart.example_resources().items() if "/" not in rel or rel in keep})
    files["README.md"] = readme(files)
    return files
