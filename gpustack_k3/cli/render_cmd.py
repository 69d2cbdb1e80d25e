"""``render`` (one spec -> one or all targets) and ``manifests`` (regenerate manifests/examples).

Exit codes: 0 rendered, 1 refused (error findings, or a target could not be produced), 2 unusable input.
Nothing is written unless every requested file rendered and validated.
"""
from __future__ import annotations

import sys

import click

from gpustack_k3.cli.common import EXIT_INPUT, EXIT_REFUSED, fail_input, load_document, print_findings_text
from gpustack_k3.core.errors import InputError

TARGET_CHOICES = ["argv", "kubernetes", "gpustack", "docker", "all"]
# Which file of a target is printed for each --output (no --out). None: every file, with headers.
STDOUT_FILE = {
    "argv": {"json": "argv.json", "shell": "argv.sh", "text": "argv.sh", "yaml": None},
    "kubernetes": {"yaml": "kubernetes.yaml", "text": "kubernetes.yaml", "json": None, "shell": None},
    "docker": {"json": "docker-run-params.json", "shell": "docker-run.sh", "text": "docker-run.sh", "yaml": None},
}
DEFAULT_OUTPUT = {"argv": "json", "kubernetes": "yaml", "docker": "json", "gpustack": "text", "all": "text"}


def _refused(findings) -> None:
    click.echo("refused: the spec has errors; nothing was rendered", err=True)
    print_findings_text([f for f in findings if f.severity == "error"], err=True)
    sys.exit(EXIT_REFUSED)


def _render_failed(exc) -> None:
    click.echo(f"error: {exc.line()}; nothing was written", err=True)
    sys.exit(EXIT_REFUSED)


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
@click.option("--namespace", default=None, help="Kubernetes namespace (default: metadata.namespace, else kimi-k3).")
@click.option("--strict", is_flag=True, help="Unknown flags refuse instead of warn.")
def render(spec, preset, target, out_dir, output, namespace, strict):
    """Render a deployment document (or preset) for one target or all of them."""
    from gpustack_k3.core.launch import Refused
    from gpustack_k3.render.targets import TARGETS, prepare, render_all, render_target
    from gpustack_k3.render.templates import RenderError
    from gpustack_k3.render.writer import write_files

    try:
        doc = load_document(spec, preset)
    except InputError as exc:
        fail_input(exc)
    targets = TARGETS if target == "all" else (target,)
    try:
        launch, findings = prepare(doc, targets=targets, strict=strict)
    except Refused as exc:
        _refused(exc.findings)
    _warn(findings)
    ns = namespace or doc.metadata.namespace
    try:
        files = (render_all(launch, targets, namespace=ns) if target == "all"
                 else render_target(launch, target, namespace=ns))
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
              help="Folder whose examples/ (and install.yaml) are regenerated.")
@click.option("--check", is_flag=True, help="Do not write; exit 1 if the folder differs from a fresh render.")
def manifests(out_dir, check):
    """Regenerate manifests/examples (every preset x target) byte-for-byte deterministically."""
    from pathlib import Path

    from gpustack_k3.core.launch import Refused
    from gpustack_k3.render.targets import example_files
    from gpustack_k3.render.templates import RenderError
    from gpustack_k3.render.writer import replace_tree, write_files

    try:
        files, notes = example_files()
    except Refused as exc:
        _refused(exc.findings)
    except RenderError as exc:
        _render_failed(exc)
    for n in notes:
        click.echo(f"note: {n}", err=True)
    files["README.md"] = _examples_readme(files)
    install = _install_yaml()
    root = Path(out_dir)
    if check:
        drift = diff_tree(root / "examples", files)
        if install is not None:
            cur = root / "install.yaml"
            if not cur.is_file() or cur.read_text(encoding="utf-8") != install:
                drift.append("install.yaml")
        for d in drift:
            click.echo(f"drift: {root / 'examples' if d != 'install.yaml' else root}/{d}", err=True)
        if drift:
            click.echo("manifests are stale: run `gpustack-k3 manifests`", err=True)
            sys.exit(EXIT_REFUSED)
        click.echo(f"{root}: up to date ({len(files)} files)", err=True)
        return
    try:
        replace_tree(root / "examples", files)
        if install is not None:
            write_files(root, {"install.yaml": install})
    except InputError as exc:
        fail_input(exc)
    click.echo(f"wrote {len(files)} files under {root / 'examples'}"
               + (f" and {root / 'install.yaml'}" if install is not None else ""), err=True)


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


def _install_yaml() -> str | None:
    """manifests/install.yaml from the Helm/CRD part, if that part is in this build."""
    import importlib
    import importlib.util

    if importlib.util.find_spec("gpustack_k3.charts") is None:
        return None
    mod = importlib.import_module("gpustack_k3.charts")
    fn = getattr(mod, "render_install_yaml", None)
    if fn is None:
        return None
    text = fn()
    return text if isinstance(text, str) else None


def _examples_readme(files: dict[str, str]) -> str:
    presets = sorted({rel.split("/", 1)[0] for rel in files})
    lines = ["# Examples (generated)", "",
             "Generated by `gpustack-k3 manifests` from the catalog presets; do not edit by hand.",
             "`python3 -m pytest tests/render` fails when this folder differs from a fresh render.", "",
             "| preset | files |", "| --- | --- |"]
    for p in presets:
        rels = sorted(rel.split("/", 1)[1] for rel in files if rel.startswith(p + "/"))
        lines.append(f"| {p} | " + ", ".join(f"`{r}`" for r in rels) + " |")
    return "\n".join(lines) + "\n"
