"""``render`` (one spec -> one or all targets) and ``manifests`` (regenerate manifests/examples).

Exit codes: 0 rendered, 1 refused (error findings, or a target could not be produced), 2 unusable input.
Nothing is written unless every requested file rendered and validated.
"""
from __future__ import annotations

import sys

import click

from gpustack_k3.cli.common import EXIT_REFUSED, fail_input, load_document, print_findings_text
from gpustack_k3.core.errors import InputError

TARGET_CHOICES = ["launch", "argv", "kubernetes", "gpustack", "docker", "all"]
# Which file of a target is printed for each --output (no --out). None: every file, with headers.
STDOUT_FILE = {
    "launch": {"json": "launch.json", "text": "launch.json", "yaml": None},
    "argv": {"json": "argv.json", "shell": "argv.sh", "text": "argv.sh", "yaml": None},
    "kubernetes": {"yaml": "kubernetes.yaml", "text": "kubernetes.yaml", "json": None},
    "docker": {"json": "docker-run-params.json", "shell": "docker-run.sh", "text": "docker-run.sh", "yaml": None},
}
DEFAULT_OUTPUT = {"launch": "json", "argv": "json", "kubernetes": "yaml", "docker": "json", "gpustack": "text", "all": "text"}


def _refused(findings) -> None:
    click.echo("refused: the spec has errors; nothing was rendered", err=True)
    print_findings_text([f for f in findings if f.severity == "error"], err=True)
    sys.exit(EXIT_REFUSED)


def _render_failed(exc) -> None:
    click.echo(f"error: {exc.line()}; nothing was written", err=True)
    sys.exit(EXIT_REFUSED)


def _checked_name(pattern_of, what: str, max_len: int | None = 63):
    """Refuse an option value (exit 2) that the pattern the target itself uses would refuse; the pattern is
    looked up only when the option is given, so the module stays light to import."""
    def callback(ctx, param, value):
        import re

        if value is not None and not ((max_len is None or len(value) <= max_len)
                                      and re.fullmatch(pattern_of(), value)):
            raise click.BadParameter(f"{value!r} is not a valid {what}")
        return value
    return callback


def _dns_label() -> str:
    from gpustack_k3.api.spec import DNS_LABEL
    return DNS_LABEL


def _gpustack_name() -> str:
    from gpustack_k3.render.gpustack import NAME
    return NAME


def _warn(findings) -> None:
    warnings = [f for f in findings if f.severity == "warning"]
    if warnings:
        print_findings_text(warnings, err=True)
    infos = sum(f.severity == "info" for f in findings)
    if infos:
        click.echo(f"({infos} info finding(s); `validate` lists them)", err=True)


def _stdout_text(target: str, output: str, files: dict[str, str], launch) -> str:
    import json

    import yaml

    if target in STDOUT_FILE:
        if output not in STDOUT_FILE[target]:
            raise InputError("--output", f"{output} is not available for target {target}",
                             f"one of: {', '.join(STDOUT_FILE[target])}")
        name = STDOUT_FILE[target][output]
        if name is not None:
            return files[name]
        if target == "launch":
            return yaml.safe_dump(json.loads(files["launch.json"]), sort_keys=False, width=1000)
        if target == "argv":
            return yaml.safe_dump(json.loads(files["argv.json"]), sort_keys=False, width=1000)
        if target == "docker":
            return yaml.safe_dump(json.loads(files["docker-run-params.json"]), sort_keys=False, width=1000)
        if target == "kubernetes":
            items = [d for d in yaml.safe_load_all(files["kubernetes.yaml"]) if d]
            return json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2,
                              ensure_ascii=False) + "\n"
    if output not in ("text", "json", "yaml"):
        raise InputError("--output", f"{output} is not available for target {target}", "use text (all files)")
    return "".join(f"==> {rel} <==\n{text}" + ("" if text.endswith("\n") else "\n")
                   for rel, text in files.items())


@click.command()
@click.argument("spec", required=False)
@click.option("--preset", help="Use a catalog preset instead of a SPEC file (see `presets`).")
@click.option("--target", type=click.Choice(TARGET_CHOICES), default="all", show_default=True,
              help="What to render.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Write the target's files into DIR (atomically) instead of printing.")
@click.option("--output", "-o", type=click.Choice(["json", "yaml", "shell", "text"]), default=None,
              help="Printed format (default: json for argv/docker, yaml for kubernetes, text otherwise).")
@click.option("--namespace", default=None, help="Kubernetes namespace (default: metadata.namespace, else kimi-k3).",
              callback=_checked_name(_dns_label, "Kubernetes namespace (a DNS label)"))
@click.option("--worker", default=None, help="GPUStack: pin all GPUs of this worker (gpu_selector.gpu_ids).",
              callback=_checked_name(_gpustack_name, "GPUStack worker name", max_len=None))
@click.option("--cluster", default="default", show_default=True, help="GPUStack: cluster name for import.yaml.",
              callback=_checked_name(_gpustack_name, "GPUStack cluster name"))
@click.option("--strict", is_flag=True, help="Unknown flags refuse instead of warn.")
def render(spec, preset, target, out_dir, output, namespace, worker, cluster, strict):
    """Render a deployment document (or preset) for one target or all of them."""
    from gpustack_k3.core.launch import Refused
    from gpustack_k3.render.targets import TARGETS, gpustack_available, prepare, render_all, render_target
    from gpustack_k3.render.templates import RenderError
    from gpustack_k3.render.writer import write_files

    try:
        doc = load_document(spec, preset)
    except InputError as exc:
        fail_input(exc)
    targets = TARGETS if target == "all" else (target,)
    if target == "all" and not gpustack_available():
        targets = tuple(t for t in TARGETS if t != "gpustack")
        click.echo("note: target gpustack skipped (gpustack_k3.render.gpustack is not in this build)", err=True)
    try:
        launch, findings = prepare(doc, targets=targets, strict=strict)
    except Refused as exc:
        _refused(exc.findings)
    _warn(findings)
    ns = namespace or doc.metadata.namespace
    from gpustack_k3.render.targets import schema_validator_available

    if "kubernetes" in targets and not schema_validator_available():
        click.echo("note: kubernetes-validate is not installed: Kubernetes objects are not schema-checked "
                   "(pip install kubernetes-validate==1.37.0)", err=True)
    kw = {"namespace": ns, "doc": doc, "gpustack": {"worker": worker, "cluster": cluster}}
    try:
        files = (render_all(launch, targets, **kw) if target == "all" else render_target(launch, target, **kw))
    except RenderError as exc:
        _render_failed(exc)
    try:
        if out_dir is not None:
            written = write_files(out_dir, files)
            for p in written:
                click.echo(f"wrote {p}", err=True)
            return
        click.echo(_stdout_text(target, output or DEFAULT_OUTPUT[target], files, launch), nl=False)
    except InputError as exc:
        fail_input(exc)


@click.command()
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="manifests", show_default=True,
              help="Folder whose examples/ and install.yaml are regenerated.")
@click.option("--check", is_flag=True, help="Do not write; exit 1 if anything differs from a fresh render.")
def manifests(out_dir, check):
    """Regenerate manifests/ byte-for-byte deterministically: examples/ (every preset x target, plus
    the Helm/CRD part's invalid-*.yaml), install.yaml, and the chart's generated files when DIR is the
    repository's manifests/ folder."""
    from pathlib import Path

    from gpustack_k3.core.launch import Refused
    from gpustack_k3.render.targets import example_files
    from gpustack_k3.render.templates import RenderError
    from gpustack_k3.render.writer import preflight, replace_tree, write_files

    try:
        files, notes = example_files()
    except Refused as exc:
        _refused(exc.findings)
    except RenderError as exc:
        _render_failed(exc)
    charts = _charts()
    if charts is not None:
        files.update(charts.example_resources())   # <preset>/k3deployment.yaml + the invalid example
    files["README.md"] = _examples_readme(files)
    install, note = _install_yaml(charts)
    notes += [note] if note else []
    for n in notes:
        click.echo(f"note: {n}", err=True)
    root = Path(out_dir)
    repo_manifests = root.resolve() == (Path(__file__).resolve().parents[2] / "manifests").resolve()
    chart_files = (charts.chart_generated_files() if repo_manifests and charts is not None
                   and hasattr(charts, "chart_generated_files") else {})
    if check:
        drift = [f"{root / 'examples'}/{d}" for d in diff_tree(root / "examples", files)]
        if install is not None:
            cur = root / "install.yaml"
            if not cur.is_file() or cur.read_text(encoding="utf-8") != install:
                drift.append(str(cur))
        drift += [str(charts.CHART_DIR / rel) for rel in diff_tree(charts.CHART_DIR, chart_files)
                  if rel in chart_files] if chart_files else []
        for d in drift:
            click.echo(f"drift: {d}", err=True)
        if drift:
            click.echo("manifests are stale: run `gpustack-k3 manifests`", err=True)
            sys.exit(EXIT_REFUSED)
        click.echo(f"{root}: up to date ({len(files)} example files)", err=True)
        return
    try:
        preflight(root, ["install.yaml"] if install is not None else [])
        replace_tree(root / "examples", files)
        if install is not None:
            write_files(root, {"install.yaml": install})
        if chart_files:
            write_files(charts.CHART_DIR, chart_files)
    except InputError as exc:
        fail_input(exc)
    click.echo(f"wrote {len(files)} files under {root / 'examples'}"
               + (f", {root / 'install.yaml'}" if install is not None else "")
               + (f" and {len(chart_files)} generated chart files" if chart_files else ""), err=True)


def diff_tree(tree, files: dict[str, str]) -> list[str]:
    """Relative paths that differ between ``tree`` on disk and ``files`` (missing, extra or changed)."""
    from pathlib import Path

    tree = Path(tree)
    on_disk = {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()} if tree.is_dir() else set()
    out = sorted(on_disk ^ set(files))
    for rel in sorted(on_disk & set(files)):
        if (tree / rel).read_bytes() != files[rel].encode("utf-8"):
            out.append(rel)
    return sorted(set(out))


def _charts():
    """The Helm/CRD part (gpustack_k3.charts), if it is in this build."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("gpustack_k3.charts") is None:
        return None
    return importlib.import_module("gpustack_k3.charts")


def _install_yaml(charts) -> tuple[str | None, str | None]:
    """manifests/install.yaml text (rendered by helm through the charts part), or a note why not."""
    if charts is None or not hasattr(charts, "render_install_yaml"):
        return None, "install.yaml not regenerated: gpustack_k3.charts is not in this build"
    try:
        text = charts.render_install_yaml()
    except Exception as exc:  # HelmError (helm missing/failed): examples are still regenerated
        if type(exc).__name__ != "HelmError":
            raise
        return None, f"install.yaml not regenerated: {exc}"
    return (text, None) if isinstance(text, str) else (None, "install.yaml: render_install_yaml returned no text")


def _examples_readme(files: dict[str, str]) -> str:
    presets = sorted({rel.split("/", 1)[0] for rel in files if "/" in rel})
    loose = sorted(rel for rel in files if "/" not in rel)
    lines = ["# Examples (generated)", "",
             "Generated by `gpustack-k3 manifests` from the catalog presets; do not edit by hand.",
             "`python3 -m pytest tests/render` fails when this folder differs from a fresh render.", "",
             "| preset | files |", "| --- | --- |"]
    for p in presets:
        rels = sorted(rel.split("/", 1)[1] for rel in files if rel.startswith(p + "/"))
        lines.append(f"| {p} | " + ", ".join(f"`{r}`" for r in rels) + " |")
    if loose:
        lines += ["", "Also generated here (by the Helm/CRD part, gpustack_k3.charts): "
                  + ", ".join(f"`{r}`" for r in loose) + "."]
    return "\n".join(lines) + "\n"
