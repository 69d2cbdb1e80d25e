"""Golden files for the render tests: every preset and every spec in tests/render/fixtures/specs,
rendered for every target into tests/render/golden/<case>/<target>/.

Regenerate after an intended change, then review the diff:

    python3 -m gpustack_k3.render.golden          # rewrite tests/render/golden
    python3 -m gpustack_k3.render.golden --check  # exit 1 if stale (what the tests check)
"""
from __future__ import annotations

import sys
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]   # the source checkout (goldens live in its tests/)
GOLDEN = REPO / "tests" / "render" / "golden"
SPECS = REPO / "tests" / "render" / "fixtures" / "specs"


def cases() -> dict[str, object]:
    """case name -> DeploymentDocument (presets first, then fixture spec files)."""
    import yaml

    from gpustack_k3.api.spec import DeploymentDocument
    from gpustack_k3.catalog import load_catalog

    out: dict[str, object] = {}
    for name, preset in load_catalog().presets.items():
        out[name] = DeploymentDocument.model_validate(preset.document)
    for p in sorted(SPECS.glob("*.yaml")):
        out[p.stem] = DeploymentDocument.model_validate(yaml.safe_load(p.read_text(encoding="utf-8")))
    return out


def golden_files() -> dict[str, str]:
    """Presets must render for every target. A fixture spec a target refuses (e.g. secret env for
    GPUStack, which has no secret references) gets ``<case>/<target>/refused.txt`` with the message."""
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.render.targets import TARGETS, gpustack_available, prepare, render_target
    from gpustack_k3.render.templates import RenderError

    presets = set(load_catalog().presets)
    targets = tuple(t for t in TARGETS if t != "gpustack" or gpustack_available())
    files: dict[str, str] = {}
    for name, doc in cases().items():
        launch, _ = prepare(doc, targets=targets)
        for t in targets:
            try:
                rendered = render_target(launch, t, namespace=doc.metadata.namespace, doc=doc)
            except RenderError as exc:
                if name in presets:
                    raise
                rendered = {"refused.txt": exc.line() + "\n"}
            for rel, text in rendered.items():
                files[f"{name}/{t}/{rel}"] = text
    return files


def main(argv: list[str] | None = None) -> int:
    from gpustack_k3.cli.render_cmd import diff_tree
    from gpustack_k3.render.writer import replace_tree

    argv = sys.argv[1:] if argv is None else argv
    files = golden_files()
    if "--check" in argv:
        drift = diff_tree(GOLDEN, files)
        for d in drift:
            print(f"stale: {GOLDEN / d}", file=sys.stderr)
        if drift:
            print("run: python3 -m gpustack_k3.render.golden", file=sys.stderr)
        return 1 if drift else 0
    replace_tree(GOLDEN, files)
    print(f"wrote {len(files)} golden files under {Path(GOLDEN).relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
