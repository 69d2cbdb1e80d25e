"""Shared CLI plumbing: loading documents safely, printing findings, exit codes.

Exit codes: 0 no errors, 1 refused (error findings), 2 unusable input.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from gpustack_k3.core.errors import InputError

MAX_INPUT_BYTES = 1 << 20    # 1 MiB: a deployment document is a few KB
EXIT_OK, EXIT_REFUSED, EXIT_INPUT = 0, 1, 2


def fail_input(err: InputError | str) -> NoReturn:
    click.echo(f"error: {err.line() if isinstance(err, InputError) else err}", err=True)
    sys.exit(EXIT_INPUT)


def read_text(path: str, what: str = "file") -> str:
    """Read a file or ``-`` (stdin), bounded in size; errors become InputError."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            p = Path(path)
            if p.is_dir():
                raise InputError(path, "is a directory", f"give the {what} itself")
            if not p.exists():
                raise InputError(path, f"no such {what}", "check the path")
            # anything else that opens (a pipe, process substitution, /dev/stdin) is read, bounded
            with p.open("rb") as fh:
                data = fh.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}", "check the path and permissions") from None
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(path, f"larger than {MAX_INPUT_BYTES} bytes", "a deployment document is a few KB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start})", "save the file as UTF-8") from None


MAX_YAML_NODES = 100_000   # after alias expansion: a deployment document has a few hundred


class _AliasError(ValueError):
    pass


def _check_nodes(node: Any, limit: int) -> int:
    """One walk over the composed nodes, before anything is constructed: the node count once aliases are
    expanded, without expanding them (memoised per node; _AliasError on a recursive alias or past ``limit``),
    and every mapping checked for a key named twice (PyYAML keeps the last one silently). Before construction,
    because constructing merge keys (``<<``) rewrites mappings in place."""
    from yaml.constructor import ConstructorError
    from yaml.nodes import MappingNode, ScalarNode

    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(n: Any) -> int:
        nid = id(n)
        if nid in sizes:
            return sizes[nid]
        if nid in on_path:
            raise _AliasError(f"a recursive alias at line {n.start_mark.line + 1}")
        on_path.add(nid)
        if isinstance(n, MappingNode):
            keys: dict[tuple[str, str], int] = {}
            for k, _v in n.value:
                if isinstance(k, ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    first = keys.get((k.tag, k.value))
                    if first is not None:
                        raise ConstructorError(None, None, f"duplicate key {k.value!r} (first at line {first})",
                                               k.start_mark)
                    keys[(k.tag, k.value)] = k.start_mark.line + 1
        total = 1
        if isinstance(n.value, list):
            for item in n.value:
                total += sum(size(x) for x in item) if isinstance(item, tuple) else size(item)
                if total > limit:
                    raise _AliasError(f"aliases expand it to more than {limit} nodes")
        on_path.discard(nid)
        sizes[nid] = total
        return total

    return size(node)


def parse_yaml(text: str, where: str) -> Any:
    """One YAML document, safely: no tags beyond plain data, no duplicate keys, no alias bombs or
    recursive aliases, bounded nesting. Errors become InputError naming the place."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    docs = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _check_nodes(node, MAX_YAML_NODES)
            data = loader.construct_document(node)
            if data is not None:
                docs.append(data)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        pos = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(where, f"invalid YAML{pos}: {problem}", "fix the YAML syntax") from None
    except RecursionError:
        raise InputError(where, "YAML nested too deeply", "simplify the document") from None
    except _AliasError as exc:
        raise InputError(where, f"unusable YAML: {exc}", "write the values out without anchors/aliases") from None
    except ValueError as exc:   # an integer beyond Python's digit limit
        raise InputError(where, f"unusable YAML: {str(exc).split(';')[0]}", "use a realistic number") from None
    finally:
        loader.dispose()
    if len(docs) != 1:
        raise InputError(where, f"expected one YAML document, found {len(docs)}", "put one K3Deployment per file")
    return docs[0]


def document_from_data(data: Any, where: str):
    from pydantic import ValidationError

    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument

    if not isinstance(data, dict):
        raise InputError(where, f"expected a mapping (apiVersion, kind, metadata, spec), got {type(data).__name__}",
                         "start from `gpustack-k3 presets --show NAME`")
    try:
        return DeploymentDocument.model_validate(data)
    except ValidationError as exc:
        from gpustack_k3.core.rules.schema import field_path

        errs = exc.errors()
        e = errs[0]
        field = field_path(e["loc"]) or "document"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown field"
            hint = "remove it or check the spelling (see README: The deployment spec)"
        elif e["type"] == "missing":
            hint = "add it"
        else:
            val = e.get("input")
            msg = f"{msg} (got {val!r})" if not isinstance(val, (dict, list)) else msg
            hint = "fix the value"
        more = f"; {len(errs) - 1} more problem(s)" if len(errs) > 1 else ""
        raise InputError(f"{where}: {field}", msg + more, hint) from None


def load_document(path: str | None, preset: str | None):
    """A DeploymentDocument from a file/stdin or a preset; exactly one of the two."""
    if (path is None) == (preset is None):
        raise InputError("arguments", "give a SPEC file (or -) or --preset NAME, not both or neither",
                         "see `gpustack-k3 presets`")
    if preset is not None:
        from gpustack_k3.catalog import load_catalog

        cat = load_catalog()
        if preset not in cat.presets:
            raise InputError("--preset", f"unknown preset {preset!r}", f"known: {', '.join(cat.presets)}")
        return document_from_data(cat.presets[preset].document, f"preset {preset}")
    return document_from_data(parse_yaml(read_text(path), path), path)


def build_launch_or_exit(path: str | None, preset: str | None, *, strict: bool = False, warnings: bool = True):
    """``build_launch`` for SPEC or --preset: an unusable document exits 2, a refused spec prints its
    findings and exits 1; ``warnings`` prints the warning findings to stderr. Returns (launch, findings, plan, doc)."""
    from gpustack_k3.core.launch import Refused, build_launch

    try:
        doc = load_document(path, preset)
    except InputError as exc:
        fail_input(exc)
    try:
        launch, findings, plan = build_launch(doc, strict=strict)
    except Refused as exc:
        print_findings_text(exc.findings, err=True)
        sys.exit(EXIT_REFUSED)
    warn = [f for f in findings if f.severity == "warning"]
    if warn and warnings:
        print_findings_text(warn, err=True)
    return launch, findings, plan, doc


def use_colour() -> bool:
    return sys.stdout.isatty()


SEV_COLOUR = {"error": "red", "warning": "yellow", "info": "cyan"}


def print_findings_text(findings, *, err: bool = False) -> None:
    colour = (sys.stderr if err else sys.stdout).isatty()
    if not findings:
        click.echo("no findings", err=err)
    for f in findings:
        sev = click.style(f.severity.upper(), fg=SEV_COLOUR[f.severity], bold=True) if colour else f.severity.upper()
        click.echo(f"{sev} [{f.rule}] {f.field}: {f.message}", err=err)
        click.echo(f"    fix: {f.fix}", err=err)
        click.echo(f"    source: {f.source}", err=err)


def emit(obj: Any, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(obj, indent=2, sort_keys=False))
    elif output == "yaml":
        import yaml

        click.echo(yaml.safe_dump(obj, sort_keys=False, width=1000).rstrip())
    else:
        raise ValueError(output)


def findings_payload(findings) -> dict:
    from gpustack_k3.core.findings import has_errors

    return {"ok": not has_errors(findings), "findings": [f.to_dict() for f in findings]}


output_option = click.option("--output", "-o", type=click.Choice(["text", "json", "yaml"]), default="text",
                             show_default=True, help="Output format.")
