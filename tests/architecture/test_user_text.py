"""User-facing text names no internal reference (issue 35 item 6): no project issue, no numbered seed document, no
helper of a working session. What a user reads: the CRD's descriptions (the deployment document's and the status's
schema), every rule's title, why, fix and sources (explain, findings), the CLI's help, and the string values of the
package's data files (preset descriptions, finding texts, the sources a figure names). A public source is cited by
what it is (the write-up §N, docs/sources.md#anchor, an engine's file:line@version).

Texts whose fix is a patch waiting for the owner's branch to merge are listed with the patch (reported, not
silent); a listed text that no longer occurs is not a failure."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import yaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gpustack_k3"
INTERNAL = re.compile(r"\bseed \d{3}\b|\bissues? #?\d+\b|\bh-(?:house|rollout|edges|coverage|oraclepkg|v034|modelcfg)\b",
                      re.IGNORECASE)

# (where, the internal reference) -> the patch that removes it
KNOWN: dict[tuple[str, str], str] = {
    ("crd spec: Eplb", "seed 002"): "h-house-9.patch (api/v1alpha1/spec.py)",
    ("crd spec: includeDraft", "seed 002"): "h-house-9.patch",
    ("crd spec: connector", "seed 002"): "h-house-9.patch",
    ("rule topology-max-num-seqs-per-rank: fix", "seed 002"): "h-house-10.patch (core/rules/topology.py)",
    ("gpustack_k3/catalog/data/presets/index.yaml", "seed 002"): "h-house-11.patch",
    ("gpustack_k3/probe/data/findings.yaml", "issue 34"): "h-house-12.patch",
    ("gpustack_k3/predict/data/measured.yaml", "seed 001"): "h-house-13.patch",
    ("gpustack_k3/predict/data/measured.yaml", "seed 002"): "h-house-13.patch",
    ("gpustack_k3/predict/data/aic.yaml", "seed 001"): "h-house-13.patch",
}


def _schema_texts(node: object, where: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key in ("description", "title"):
            if isinstance(node.get(key), str):
                yield where, node[key]
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    yield from _schema_texts(sub, name)
            elif key == "$defs" and isinstance(value, dict):
                for name, sub in value.items():
                    yield from _schema_texts(sub, name)
            elif isinstance(value, (dict, list)):
                yield from _schema_texts(value, where)
    elif isinstance(node, list):
        for item in node:
            yield from _schema_texts(item, where)


def crd_texts() -> Iterator[tuple[str, str]]:
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.api.v1alpha1.status import K3DeploymentStatus
    for side, model in (("spec", DeploymentDocument), ("status", K3DeploymentStatus)):
        for where, text in _schema_texts(model.model_json_schema(), side):
            yield f"crd {side}: {where}", text


def rule_texts() -> Iterator[tuple[str, str]]:
    from gpustack_k3.core.rules import registry
    import gpustack_k3.core.rules  # noqa: F401  (registers every rule)
    for r in registry.RULES.values():
        for part in ("title", "why", "fix", "source"):
            yield f"rule {r.id}: {part}", getattr(r, part) or ""
        for key, src in r.sources.items():
            yield f"rule {r.id}: sources[{key}]", src


def _command_texts(cmd: click.Command, ctx: click.Context, path: str) -> Iterator[tuple[str, str]]:
    yield f"cli {path}", cmd.help or ""
    for p in cmd.params:
        yield f"cli {path} {p.name}", getattr(p, "help", None) or ""
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None:
                yield from _command_texts(sub, click.Context(sub, parent=ctx, info_name=name), f"{path} {name}")


def cli_texts() -> Iterator[tuple[str, str]]:
    from gpustack_k3.cli.main import cli
    yield from _command_texts(cli, click.Context(cli, info_name="gpustack-k3"), "gpustack-k3")


def _strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def data_texts() -> Iterator[tuple[str, str]]:
    for path in sorted(PACKAGE.rglob("data/**/*.yaml")):
        rel = path.relative_to(ROOT).as_posix()
        for text in _strings(yaml.safe_load(path.read_text(encoding="utf-8"))):
            yield rel, text


def _internal(texts: Iterator[tuple[str, str]]) -> list[str]:
    found = []
    for where, text in texts:
        for m in INTERNAL.finditer(text):
            ref = m.group(0).lower().replace("#", "")
            if (where, ref) not in KNOWN:
                found.append(f"{where}: {ref!r} in {text[:160]!r}")
    return found


def test_the_crd_names_no_internal_reference():
    assert _internal(crd_texts()) == []


def test_rule_texts_name_no_internal_reference():
    assert _internal(rule_texts()) == []


def test_cli_help_names_no_internal_reference():
    assert _internal(cli_texts()) == []


def test_data_files_name_no_internal_reference():
    assert _internal(data_texts()) == []


def test_the_check_sees_each_kind_of_text():
    """Each source yields the texts it claims (a walk that found nothing would pass every test above)."""
    assert any(w == "crd spec: includeDraft" for w, _ in crd_texts())
    assert any(w.startswith("rule topology-max-num-seqs-per-rank: fix") for w, _ in rule_texts())
    assert any(w == "cli gpustack-k3 validate strict" and t for w, t in cli_texts())
    assert any(w.endswith("presets/index.yaml") for w, _ in data_texts())
    assert _internal(iter([("x", "as in seed 002"), ("y", "see issue 34"), ("z", "h-edges owns it")])) == [
        "x: 'seed 002' in 'as in seed 002'", "y: 'issue 34' in 'see issue 34'", "z: 'h-edges' in 'h-edges owns it'"]
