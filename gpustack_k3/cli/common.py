"""Shared CLI plumbing: loading documents safely, printing findings, output formats, exit codes.

Exit codes: 0 no errors, 1 refused (error findings, or a ``--fail-on warning`` gate), 2 unusable input or an
operational failure (a server that cannot be reached or answers with an error).

Under ``-o json`` (or ``yaml``) every exit prints one object on stdout: the command's data on 0 (and on 1 when the
command's data carries the verdict, e.g. findings), else ``{"ok": false, "exit_code", "error": {"kind", "where",
"message", "fix"}}`` (exit 2) or ``{"ok": false, "exit_code": 1, "message", "findings"}`` (exit 1). The human
message always goes to stderr.

A command stops by raising (gpustack_k3/errors.py: each class carries its exit code) or by returning an exit code;
``gpustack_k3/cli/main.py`` is the one place that shows an error and exits.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import click

from gpustack_k3.api.v1alpha1.constants import EXIT_INPUT, EXIT_OK, EXIT_REFUSED, MIB  # noqa: F401 (the commands')
from gpustack_k3.errors import GpustackK3Error, InputError, OperationalError, Refused

MAX_INPUT_BYTES = MIB        # 1 MiB: a deployment document is a few KB


# what this invocation printed on stdout as data, and the findings it reported (the --fail-on gate reads them)
# (one invocation: the root click context it belongs to; a new root context starts a fresh state)
_STATE: dict[str, Any] = {"emitted": False, "findings": [], "root": None}


def reset_state() -> None:
    _STATE.update(emitted=False, findings=[], root=None)


def _state() -> dict[str, Any]:
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    if root is not None and root is not _STATE["root"]:
        _STATE.update(emitted=False, findings=[], root=root)
    return _STATE


def emitted() -> bool:
    return bool(_state()["emitted"])


def requested_output() -> str:
    """The ``--output`` of the running command (its own or a parent's), ``text`` outside a command."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        v = ctx.params.get("output")
        if isinstance(v, str):
            return v
        ctx = ctx.parent
    return "text"


def error_object(code: int, message: str, *, where: str | None = None, fix: str | None = None,
                 kind: str = "input") -> dict:
    return {"ok": False, "exit_code": code,
            "error": {"kind": kind, "where": where, "message": message, "fix": fix}}


def fail_input(err: InputError | str) -> NoReturn:
    """Unusable input (exit 2): raised, and shown by the one handler in cli/main.py (one line on stderr, the error
    object on stdout under -o json|yaml)."""
    raise err if isinstance(err, InputError) else InputError("", str(err))


def fail_operational(message: str) -> NoReturn:
    """A failure of something outside the input (a server unreachable or answering with an error, a runtime that
    is missing): exit 2, shown by cli/main.py."""
    raise OperationalError(message)


def exit_refused(findings, message: str) -> NoReturn:
    """Refused (exit 1): cli/main.py shows the error findings and ``message`` on stderr (the refusal object on
    stdout under -o json|yaml)."""
    raise Refused(findings, note=message)


@contextmanager
def outcome(what: str) -> Iterator[None]:
    """An error leaving this block says what the command did not do ("nothing was written")."""
    try:
        yield
    except GpustackK3Error as exc:
        if not exc.outcome:
            exc.outcome = what
        raise


def operational_message(exc: BaseException) -> str | None:
    """A one-line message for an exception that means "something outside could not be reached or answered with
    an error" (sockets, HTTP clients, the Kubernetes client), None for anything else."""
    import socket

    if isinstance(exc, (ConnectionError, TimeoutError, socket.gaierror)):
        return f"cannot reach the server: {exc}"
    for cls in type(exc).__mro__:
        mod = cls.__module__ or ""
        if mod.startswith(("urllib3", "httpx", "httpcore", "requests")) and cls.__name__ in (
                "HTTPError", "RequestError", "TransportError", "ConnectionError", "TimeoutException"):
            reason = getattr(exc, "reason", None) or exc
            return f"cannot reach the server: {str(reason).splitlines()[0] if str(reason) else type(exc).__name__}"
        if mod.startswith("kubernetes") and cls.__name__ == "ApiException":
            status, why = getattr(exc, "status", None), getattr(exc, "reason", None)
            return f"the Kubernetes API server answered {status} {why}".rstrip()
    return None


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


MAX_YAML_NODES = 100_000   # nodes aliases add when expanded: a deployment document has a few hundred in all
MAX_YAML_DEPTH = 100       # nesting: a deployment document has about ten levels


class _AliasError(ValueError):
    pass


def _check_depth(text: str, limit: int) -> None:
    """Refuse nesting deeper than ``limit`` from the parser's events, before anything is composed: libyaml's parser
    is a state machine (any depth), PyYAML's composer of its nodes recurses in C and overflows the stack (a
    segmentation fault) on ~30,000 levels, long before Python's recursion limit could catch it."""
    import yaml

    depth = 0
    for ev in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > limit:
                line = ev.start_mark.line + 1 if ev.start_mark else "?"
                raise _AliasError(f"nested more than {limit} levels deep (at line {line})")
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1


def _check_nodes(node: Any, limit: int) -> int:
    """One walk over the composed nodes, before anything is constructed: how many nodes aliases add once expanded,
    without expanding them (memoised per node; _AliasError on a recursive alias or past ``limit`` added nodes: a
    large document without aliases adds none), and every mapping checked for a key named twice (PyYAML keeps the
    last one silently). Before construction, because constructing merge keys (``<<``) rewrites mappings in place."""
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
        on_path.discard(nid)
        sizes[nid] = total
        return total

    expanded = size(node)
    if expanded - len(sizes) > limit:   # what the aliases add over the nodes written out
        raise _AliasError(f"aliases expand it to more than {limit} nodes")
    return expanded


def parse_yaml(text: str, where: str) -> Any:
    """One YAML document, safely: no tags beyond plain data, no duplicate keys, no alias bombs or
    recursive aliases, bounded nesting. Errors become InputError naming the place."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    docs = []
    try:
        _check_depth(text, MAX_YAML_DEPTH)
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
        raise InputError(where, f"YAML nested more than {MAX_YAML_DEPTH} levels deep", "simplify the document") from None
    except _AliasError as exc:
        hint = ("a deployment document needs about ten levels" if "nested" in str(exc)
                else "write the values out without anchors/aliases")
        raise InputError(where, f"unusable YAML: {exc}", hint) from None
    except ValueError as exc:   # an integer beyond Python's digit limit
        raise InputError(where, f"unusable YAML: {str(exc).split(';')[0]}", "use a realistic number") from None
    finally:
        loader.dispose()
    if len(docs) != 1:
        raise InputError(where, f"expected one YAML document, found {len(docs)}", "put one K3Deployment per file")
    return docs[0]


def document_from_data(data: Any, where: str, *, engine_argv: bool = False):
    """``data`` as a deployment document. ``engine_argv``: read from a command line the engine runs as it is
    (check-args, check-pd): the layout rules of documents we render (where the model volume is mounted) do not apply."""
    from pydantic import ValidationError

    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument

    if not isinstance(data, dict):
        raise InputError(where, f"expected a mapping (apiVersion, kind, metadata, spec), got {type(data).__name__}",
                         "start from `gpustack-k3 presets --show NAME`")
    try:
        return DeploymentDocument.model_validate(data, context={"engine_argv": True} if engine_argv else None)
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


def model_arch(model_config: str | None, model: Any):
    """The model's architecture figures (core.model_config.ModelArch) in the one order of cli/model_source.py:
    --model-config FILE, else the document's spec.model.configJSON / spec.model.config, else config.json in the model
    path when that is a local directory; None when none. ``model``: the document's spec.model, or a command line's
    model path. A named file that is not a usable config.json is unusable input (exit 2) naming where it was given."""
    from gpustack_k3.cli.model_source import arch_for

    return arch_for(model_config, model)


def draft_arch(r, model_path: str | None = None):
    """The draft checkpoint's architecture for Resolved.draft_arch, read once at this edge (cli/model_source.py
    draft_arch_for) from a resolved line: None when its draft is not a local directory holding config.json or is the
    target; an unreadable config.json there gives a ModelArch without ``raw`` naming the path (the rules warn, never
    exit 2). Set it after core.resolve.resolve: ``r.draft_arch = draft_arch(r)``."""
    from gpustack_k3.cli.model_source import draft_arch_for

    return draft_arch_for(r, model_path)


def build_launch_or_exit(path: str | None, preset: str | None, *, strict: bool = False, warnings: bool = True):
    """``build_launch`` for SPEC or --preset: an unusable document raises InputError (exit 2), a refused spec
    Refused (exit 1); ``warnings`` prints the warning findings to stderr. Returns (launch, findings, plan, doc)."""
    from gpustack_k3.core.launch import Refused as SpecRefused, build_launch   # the spec's findings

    doc = load_document(path, preset)
    arch = model_arch(None, doc.spec.model)   # the document's model config decides (cli/model_source.py)
    try:
        launch, findings, plan = build_launch(doc, strict=strict, arch=arch)
    except SpecRefused as exc:
        exit_refused(exc.findings, "refused: the spec has errors; nothing was started")
    warn = [f for f in findings if f.severity == "warning"]
    if warn and warnings:
        print_findings_text(warn, err=True)
    return launch, findings, plan, doc


SEV_COLOUR = {"error": "red", "warning": "yellow", "info": "cyan"}


def record_findings(findings) -> None:
    """Findings this run reported (what the ``--fail-on`` gate judges)."""
    _state()["findings"].extend(findings)


def print_findings_text(findings, *, err: bool = False) -> None:
    record_findings(findings)
    colour = (sys.stderr if err else sys.stdout).isatty()
    if not findings:
        click.echo("no findings", err=err)
    for f in findings:
        sev = click.style(f.severity.upper(), fg=SEV_COLOUR[f.severity], bold=True) if colour else f.severity.upper()
        click.echo(f"{sev} [{f.rule}] {f.field}: {f.message}", err=err)
        click.echo(f"    fix: {f.fix}", err=err)
        click.echo(f"    source: {f.source}", err=err)


def yaml_dump(obj: Any, **kw) -> str:
    """YAML without anchors or aliases (a value used twice is written out twice)."""
    import yaml

    class _NoAliases(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
        def ignore_aliases(self, data):
            return True

    return yaml.dump(obj, Dumper=_NoAliases, sort_keys=False, width=1000, allow_unicode=True, **kw)


def emit(obj: Any, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False, default=str))
    elif output == "yaml":
        click.echo(yaml_dump(json.loads(json.dumps(obj, default=str))).rstrip())
    else:
        raise ValueError(output)
    _state()["emitted"] = True


def note_emitted() -> None:
    """The command printed its data on stdout itself (the run's answer is given)."""
    _state()["emitted"] = True


def gate_or_exit(findings, what: str = "nothing was written") -> None:
    """Before a command acts: with ``--fail-on warning`` a warning refuses like an error (exit 1)."""
    if fail_on_level() == "warning":
        warned = gating_warnings(findings)
        if warned:
            raise Refused(warned, note=f"refused by --fail-on warning: {len(warned)} warning(s); {what}",
                          shown=True)   # the warnings were printed as they were found


def findings_payload(findings) -> dict:
    record_findings(findings)
    return {"ok": not gate_fails(findings), "findings": [f.to_dict() for f in findings]}


def output_option_of(*choices: str, default: str = "text"):
    return click.option("--output", "-o", type=click.Choice(list(choices)), default=default, show_default=True,
                        help="Output format (json/yaml: one object on stdout on every exit).")


output_option = output_option_of("text", "json", "yaml")


# ------------------------------------------------------------------ options that do not apply

def not_applicable(options: dict[str, str], why: str, fix: str = "drop it") -> None:
    """Refuse (exit 2, naming the option) every option of ``options`` (parameter name -> option as spelled) that
    the user gave on the command line although it does not apply (``why``): an option is never silently ignored."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = [opt for name, opt in options.items() if ctx.get_parameter_source(name) in (
        ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)]
    if given:
        raise InputError(given[0], f"does not apply {why}", fix)


# ------------------------------------------------------------------ --fail-on (a CI gate)

FAIL_ON = ("error", "warning")


def _meta(key: str, default: Any) -> Any:
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if key in ctx.meta:
            return ctx.meta[key]
        ctx = ctx.parent
    return default


def fail_on_level() -> str:
    return _meta("fail_on", "error")


def gating_warnings(findings) -> list:
    """The warnings that fail this run under ``--fail-on warning``: every one but the acknowledged rules'
    (``--ack RULE``); none under ``--fail-on error``."""
    if fail_on_level() != "warning":
        return []
    acked = _meta("ack", frozenset())
    return [f for f in findings if f.severity == "warning" and f.rule not in acked]


def gate_fails(findings) -> bool:
    """True when ``findings`` fail this run: an error, or with ``--fail-on warning`` an unacknowledged warning."""
    return any(f.severity == "error" for f in findings) or bool(gating_warnings(findings))


def fail_on_option(fn):
    """``--fail-on warning|error`` on a command that reports findings: with ``warning`` a run whose findings
    hold a warning exits 1 (the JSON/YAML payload says ``"ok": false``); errors always do. ``--ack RULE``
    (repeatable) accepts that rule's warnings under ``--fail-on warning`` (they are still shown)."""
    import functools

    def store(ctx, _param, value):
        ctx.meta["fail_on"] = value
        return value

    def store_ack(ctx, _param, value):
        if value:
            from gpustack_k3.core.rules import RULES

            unknown = [r for r in value if r not in RULES]
            if unknown:
                raise InputError("--ack", f"unknown rule {', '.join(map(repr, unknown))}",
                                 "give the id a finding prints in brackets (`gpustack-k3 explain` lists them)")
        ctx.meta["ack"] = frozenset(value)
        return value

    @functools.wraps(fn)
    def gated(*args, **kwargs):
        rv = fn(*args, **kwargs)
        if fail_on_level() == "warning" and not rv:
            warned = gating_warnings(_state()["findings"])
            if warned:
                ids = ", ".join(dict.fromkeys(f"{f.rule} ({f.field})" for f in warned))
                raise Refused(warned, note=f"refused by --fail-on warning: {len(warned)} warning(s): {ids}",
                              shown=True)
        return rv

    gated = click.option("--ack", multiple=True, metavar="RULE", expose_value=False, callback=store_ack,
                         help="With --fail-on warning: accept this rule's warnings (repeatable; still shown).")(gated)
    return click.option("--fail-on", type=click.Choice(list(FAIL_ON)), default="error", show_default=True,
                        expose_value=False, is_eager=True, callback=store,
                        help="Exit 1 on findings of this severity or worse (warning: a CI gate on warnings).")(gated)
