"""Core commands: validate, check-args, import, plan, explain, presets, dry-run, check-pd."""
from __future__ import annotations

import click

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.cli._click import Command
from gpustack_k3.cli.common import (
    emit,
    fail_input,
    draft_arch,
    fail_on_option,
    findings_payload,
    load_document,
    model_arch,
    not_applicable,
    outcome,
    output_option,
    print_findings_text,
)
from gpustack_k3.errors import InputError, Refused

spec_arg = click.argument("spec", required=False)
preset_opt = click.option("--preset", help="Use a catalog preset instead of a SPEC file (see `presets`).")
strict_opt = click.option("--strict", is_flag=True, help="Unknown flags refuse instead of warn.")


def _load(spec, preset):
    return load_document(spec, preset)


def _report(findings, output: str) -> None:
    """The findings (text, or the result object); refused (exit 1) when one is an error."""
    from gpustack_k3.core.findings import has_errors

    if output == "text":
        print_findings_text(findings)
    else:
        emit(findings_payload(findings), output)
    if has_errors(findings):
        raise Refused(findings, shown=True)


model_config_opt = click.option("--model-config", "model_config", metavar="FILE", default=None,
                                help="The model's config.json: its figures and limits decide the rules and the plan over a "
                                     "catalog entry of the same name (default: config.json in the model path when it "
                                     "is a local directory).")


engine_verdict_opt = click.option(
    "--engine-verdict", "engine_verdict", is_flag=True, default=False,
    help="Also run the pinned release's own validation code (the engine oracle; prepared once by "
         "`gpustack-k3 oracle setup` under $GPUSTACK_K3_CACHE, default ~/.cache/gpustack-k3) and show its verdict "
         "beside the findings, a disagreement marked; an engine refusal exits 1.")


def document_options(f):
    """The arguments of a command that checks one deployment document (validate, dry-run): the document or a
    preset, --strict, --model-config, the output format and --fail-on."""
    for option in (fail_on_option, output_option, model_config_opt, strict_opt, preset_opt, spec_arg):
        f = option(f)
    return f


@click.command(cls=Command)
@document_options
@engine_verdict_opt
def validate(spec, preset, strict, model_config, output, engine_verdict=False):
    """Check a deployment document (or preset) against the rule catalog."""
    from gpustack_k3.core.rules import validate as run

    doc = _load(spec, preset)
    arch = model_arch(model_config, doc.spec.model)
    findings = run(doc, strict=strict, arch=arch)
    if engine_verdict:   # each line the document starts, judged by its release (gpustack_k3/oracle/document.py)
        from gpustack_k3.oracle.document import document_verdict

        _with_engine_verdict(findings, output, document_verdict(doc, arch=arch))
        return
    _report(findings, output)


# ------------------------------------------------------------------ argv -> document

def _argv_options(fn):
    fn = click.option("--engine", type=click.Choice([ENGINE_VLLM, ENGINE_SGLANG]), required=True, help="Engine of the command line.")(fn)
    fn = click.option("--engine-version", default=None, help="Catalog version (default: the catalog default).")(fn)
    fn = click.option("--model", "model_name", default=None,
                      help="Catalog model key (default: the catalog model whose path or hub id the command line's "
                           "model names; none: no memory plan, never another model's figures).")(fn)
    fn = click.option("--gpu-type", default="b300", show_default=True)(fn)
    fn = click.option("--gpus", type=int, default=8, show_default=True)(fn)
    fn = click.option("--env", "env", multiple=True, metavar="K=V", help="Environment of the engine (repeatable).")(fn)
    fn = click.option("--name", default="imported", show_default=True, help="metadata.name of the document.")(fn)
    fn = click.argument("argv", nargs=-1, type=click.UNPROCESSED)(fn)
    return fn


def read_config_file(path: str) -> str:
    """A ``--config FILE`` of the command line, read where gpustack-k3 runs (bounded; a YAML alias bomb or a
    recursive alias is unusable input, checked before the engine's own safe_load reads it)."""
    from gpustack_k3.cli.common import parse_yaml, read_text

    try:
        text = read_text(path, "config file")
    except InputError as exc:
        raise InputError(f"argv --config {path}", exc.message,
                         "run this where the file is, or write its options on the command line") from None
    parse_yaml(text, f"argv --config {path}")
    return text


def argv_to_data(engine, engine_version, model_name, gpu_type, gpus, env, name, argv):
    """core.argv.roles.argv_to_data reading ``--config FILE`` from the disk."""
    from gpustack_k3.core.argv.roles import argv_to_data as from_argv

    return from_argv(engine, engine_version, model_name, gpu_type, gpus, env, name, argv, read_file=read_config_file)


def _doc_from_argv(engine, engine_version, model_name, gpu_type, gpus, env, name, argv):
    """(data, document, the parser's refusals: rule argv-refused)."""
    from gpustack_k3.cli.common import document_from_data

    try:
        data, refusals = argv_to_data(engine, engine_version, model_name, gpu_type, gpus, env, name, argv)
        return data, document_from_data(data, "argv"), refusals
    except InputError as exc:
        from gpustack_k3.core.argv.roles import flag_for

        exc.where += flag_for(engine, exc.where)
        raise


def _with_engine_verdict(findings, output: str, verdict: dict) -> None:
    """_report with the engine's verdict beside the findings (gpustack_k3/oracle: compare, text_lines)."""
    from gpustack_k3.core.findings import has_errors
    from gpustack_k3.oracle import compare, text_lines

    cmp = compare(has_errors(findings), verdict)
    if output == "text":
        print_findings_text(findings)
        for line in text_lines(verdict, cmp):
            click.echo(line)
    else:
        emit({**findings_payload(findings), "engine_verdict": verdict, "engine_comparison": cmp}, output)
    if has_errors(findings):
        raise Refused(findings, shown=True)
    if cmp["engine_exit"]:
        raise Refused("the engine's own validation code refuses the line", shown=True,
                      note="refused: the engine's own validation code refuses the line")


@click.command("check-args", cls=Command, context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@_argv_options
@strict_opt
@model_config_opt
@output_option
@fail_on_option
@engine_verdict_opt
def check_args(engine, engine_version, model_name, gpu_type, gpus, env, name, argv, strict, model_config, output,
               engine_verdict=False):
    """Check an existing engine command line: gpustack-k3 check-args --engine vllm -- ARGV..."""
    from gpustack_k3.core.findings import sort_findings
    from gpustack_k3.core.rules import Ctx, validate_resolved, validate_topology
    from gpustack_k3.core.rules.runner import CATALOG_RULE
    from gpustack_k3.core.topology import Topology

    from gpustack_k3.core.argv.roles import line_role

    not_applicable({"name": "--name"}, "to check-args (it names the document `import` writes)")
    not_applicable({"strict": "--strict"}, "to a command line (a flag its release does not know is the engine "
                   "parser's refusal, argv-refused, already an error)")
    # the line is one role (prefill/decode by its kv_role or P/D mode, else serve): topology rules run on it too
    _, role, refusals = line_role(None, None, engine, engine_version, model_name, gpu_type, list(argv), env,
                                  None, None, gpus, name=name, **_argv_io(model_config))
    r = role.resolved
    findings = validate_resolved(r, strict=strict, ctx=Ctx(r, argv_refusals=refusals))
    if not any(f.rule == CATALOG_RULE for f in findings):
        findings += validate_topology(Topology([role], None, "argv"), strict=strict)
    if engine_verdict:
        from gpustack_k3.core.argv.read import strip_command
        from gpustack_k3.oracle import engine_verdict as judge

        # the judge takes the engine's own arguments: a leading `vllm serve` / `python3 -m MODULE` is the program
        v = judge(engine, r.version.key if r.version else r.spec.engine.version,
                  strip_command(r.engine, r.version, list(argv)), env, gpu_type, gpus)
        _with_engine_verdict(sort_findings(findings), output, v)
        return
    _report(sort_findings(findings), output)


@click.command("import", cls=Command, context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@_argv_options
@click.option("--output", "-o", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True,
              help="The document as YAML (text: the same YAML, and nothing on stdout when refused) or JSON.")
def import_(engine, engine_version, model_name, gpu_type, gpus, env, name, argv, output):
    """Convert an engine command line into a deployment document (YAML on stdout)."""
    from gpustack_k3.cli.common import exit_refused
    from gpustack_k3.core.rules.args import argv_findings

    _, doc, refusals = _doc_from_argv(engine, engine_version, model_name, gpu_type, gpus, env, name, argv)
    if refusals:   # the document would not be this command line: no document on stdout
        exit_refused(argv_findings(refusals),
                     f"refused: the engine's parser refuses {len(refusals)} token(s); nothing imported")
    data = doc.model_dump(mode="json", exclude_defaults=True)
    data = {"apiVersion": doc.apiVersion, "kind": doc.kind, **data}
    emit(data, "json" if output == "json" else "yaml")


# ------------------------------------------------------------------ plan

class _PlanCommand(Command):
    """``plan``: what follows ``--`` is the engine command line (ARGV), kept apart from SPEC before it."""

    def parse_args(self, ctx, args):
        if "--" in args:
            cut = args.index("--")
            ctx.meta["plan_argv"] = tuple(args[cut + 1:])
            args = args[:cut]
        return super().parse_args(ctx, args)


@click.command("plan", cls=_PlanCommand, context_settings={"ignore_unknown_options": True})   # options after SPEC too; ARGV after --
@click.argument("spec", required=False)
@preset_opt
@click.option("--engine", type=click.Choice([ENGINE_VLLM, ENGINE_SGLANG]), help="Plan an engine command line given after --.")
@click.option("--engine-version", default=None)
@click.option("--gpu-type", default="b300", show_default=True)
@click.option("--gpus", type=int, default=8, show_default=True)
@model_config_opt
@click.option("--output", "-o", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def plan_cmd(spec, preset, engine, engine_version, gpu_type, gpus, model_config, output, argv):
    """Memory / KV plan: budget, allocation, over-commit, capacity, concurrency."""
    from gpustack_k3.core.plan import PlanUnavailable, plan
    from gpustack_k3.core.resolve import resolve

    after = click.get_current_context().meta.get("plan_argv")
    if after is not None and (spec is not None or preset is not None):
        given = f"SPEC {spec}" if spec is not None else f"--preset {preset}"
        fail_input(InputError("plan", f"both {given} and an engine command line (ARGV after --) were given",
                              "plan one: SPEC or --preset NAME, or --engine E -- ARGV"))
    if after is not None:
        argv = (*argv, *after)
    if not engine:
        not_applicable({"engine_version": "--engine-version", "gpu_type": "--gpu-type", "gpus": "--gpus"},
                       "to a SPEC or --preset (the document says them)", "set them in the document, or plan a "
                       "command line: --engine E -- ARGV")
    if engine:
        if spec is not None:
            argv = (spec, *argv)
        # the line's model decides (its catalog entry, else its config.json): never a default model's figures
        _, doc, refusals = _doc_from_argv(engine, engine_version, None, gpu_type, gpus, (), "argv", argv)
    else:
        refusals = None   # a document, not a command line: Ctx.from_argv stays false (core/rules/runner.py)
        if argv:
            fail_input(InputError("plan", f"unexpected arguments {' '.join(argv)!r}", "give --engine E -- ARGV to plan a command line"))
        doc = _load(spec, preset)
    try:   # the model's config.json decides where there is one (--model-config, a local model directory)
        arch = model_arch(model_config, doc.spec.model)
    except InputError as exc:
        fail_input(exc)
    if doc.spec.roles:
        _plan_roles(doc, output, arch)
        return
    r = resolve(doc, arch=arch)
    try:
        p = plan(r)
    except PlanUnavailable as exc:
        raise InputError("plan", str(exc), "use catalog engine versions, models and GPU types") from None
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise InputError("plan", f"cannot plan this spec: {exc}", "run `validate` first") from None
    from gpustack_k3.core.rules import Ctx, validate_resolved

    # the arithmetic is shown, but a spec with errors would not start: say so and exit as refused
    findings = validate_resolved(r, ctx=Ctx(r, plan=p, argv_refusals=refusals))
    d = p.to_dict()
    if output != "text":
        emit(_plan_result(findings, d), output)
    else:
        _plan_text(d)
    _plan_refused(findings)


def _plan_result(findings, plan: dict) -> dict:
    """plan's one result object: ``ok`` and the error findings that refuse the spec, then the plan."""
    errors = [f for f in findings if f.severity == "error"]
    return {"ok": not errors, "findings": [f.to_dict() for f in errors], **plan}


def _plan_refused(findings) -> None:
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        ids = ", ".join(dict.fromkeys(f"{f.rule} ({f.field})" for f in errors))
        raise Refused(errors, note=f"refused: {len(errors)} error(s): {ids}; `validate` explains them", shown=True)


def _plan_lines(d: dict) -> list[str]:
    def gib(v) -> str:
        return "unknown" if v is None else f"{v:.2f} GiB"

    rows = [
        ("basis", "derived from the model's config.json" if d.get("basis") == "config.json" else
         "catalog figures calibrated from an engine log"),
        ("engine", f"{d['engine']} {d['engine_version']} on {d['gpu_type']} ({d['visible_gib']} GiB visible)"),
        ("memory fraction", f"{d['memory_fraction']} -> {d['requested_gib']:.2f} GiB requested per GPU"),
        ("weights", f"{d['weights_gib']:.2f} GiB per GPU"),
        ("KV budget (engine's own)", f"{d['kv_cache_budget_gib']:.2f} GiB"),
        ("KV allocated", f"{d['kv_cache_allocated_gib']:.2f} GiB"),
        ("over-commit", f"{d['overcommit_gib']:.2f} GiB"),
        ("KV capacity", f"{d['kv_cache_tokens']:,} tokens ({d['kv_cache_dtype']})"),
        ("max model len", f"{d['max_model_len']:,}"),
        ("full-length concurrency", f"{d['max_concurrency']:.2f}"),
        ("headroom", f"{d['headroom_gib']:.2f} GiB per GPU"),
    ]
    if d["engine"] == ENGINE_SGLANG and d.get("basis") != "config.json":
        rows += [("full-attention pool", f"{d['full_attention_tokens']:,} tokens ({d['full_attention_gib']:.2f} GiB)"),
                 ("draft pool", f"{d['draft_tokens']:,} tokens ({d['draft_kv_gib']:.2f} GiB)"),
                 ("Mamba/KDA state", f"{d['mamba_state_gib']:.2f} GiB"),
                 ("max running requests", f"{d['max_running_requests']}")]
    else:
        rows += [("activations", gib(d.get("activation_gib"))), ("CUDA graphs", gib(d.get("cudagraph_gib")))]
    w = max(len(k) for k, _ in rows)
    return ([f"{k:<{w}}  {v}" for k, v in rows] + [f"note: {n}" for n in d["notes"]]
            + [f"unknown: {u}" for u in d.get("unknown") or []]
            + [f"not accounted for: {u}" for u in d.get("unaccounted") or []])


def _plan_text(d: dict) -> None:
    for line in _plan_lines(d):
        click.echo(line)


def _num(v, unit: str = "") -> str:
    """A plan figure, or ``unknown`` (a figure the catalog does not have)."""
    if v is None:
        return "unknown"
    if isinstance(v, float):
        v = int(v) if v.is_integer() else round(v, 2)
    return f"{v:,}{unit}"


def _topology_plan_text(d: dict) -> None:
    """``plan`` / ``dry-run`` of a document with roles: the totals, then each role and its DP rank's memory plan."""
    racks = f"; {d['racks']} rack(s) of {d['gpus_per_rack']} GPUs ({d['nodes_per_rack']} nodes), " \
            f"{d['gpus_free_in_racks']} GPU(s) free" if d["racks"] is not None else ""
    click.echo(f"{d['name']}: {len(d['roles'])} role(s) on {d['gpu_type']}: {d['gpus']} GPUs in {d['pods']} pods on "
               f"{_num(d['nodes'])} node(s) of {d['gpus_per_pod_max']} GPUs{racks}")
    for n in d["notes"]:
        click.echo(f"note: {n}")
    for r in d["roles"]:
        click.echo(f"\n-- role {r['role']} ({r['kind']}, {r['field_prefix']}): {r['instances']} instance(s) x "
                   f"{r['pods_per_instance']} pod(s) x {r['gpus_per_pod']} GPU(s) = {r['gpus']} GPUs, {r['pods']} pods")
        experts = "" if r["routed_experts_per_rank"] is None and r["ep"] == 1 else (
            f"{_num(r['routed_experts_per_rank'])} (draft {_num(r['draft_routed_experts_per_rank'])})")
        rows = [("layout", f"TP {r['tp']} x PP {r['pp']} x DP {r['dp']} ({r['dp_local']} per pod), EP {r['ep']}"),
                *([("routed experts per EP rank", experts)] if experts else []),
                ("weights per GPU", _num(r["weights_per_gpu_gib"], " GiB")),
                ("KV per DP rank", _num(r["kv_tokens_per_rank"], " tokens")),
                ("max-num-seqs per DP rank", _num(r["max_num_seqs_per_rank"])),
                ("concurrency", f"{_num(r['concurrency_per_rank'])} per rank, {_num(r['concurrency_per_instance'])} "
                                f"per instance, {_num(r['concurrency_per_role'])} per role")]
        w = max(len(k) for k, _ in rows)
        for k, v in rows:
            click.echo(f"{k:<{w}}  {v}")
        if r["unknown"]:
            click.echo(f"unknown: {', '.join(r['unknown'])} (not in the catalog; never estimated)")
        for n in r["notes"]:
            click.echo(f"note: {n}")
        moe = r.get("rank_memory")
        if moe:
            click.echo(f"memory per GPU of one DP rank (TP {moe['tp']}, EP {moe['ep']}; core/plan_moe.py):")
            for t in moe["terms"]:
                click.echo(f"  {t['term']:<34} {_num(t['gib'], ' GiB')}  [{t['source']}]")
            click.echo(f"  {'KV bytes per token':<34} {_num(moe['kv_bytes_per_token'])}  [{moe['kv_bytes_source']}]")
            click.echo(f"  {'budget (visible x fraction)':<34} {_num(moe['budget_gib'], ' GiB')}; KV pool "
                       f"{_num(moe['kv_pool_gib'], ' GiB')}, {_num(moe['kv_tokens'], ' tokens')}")
            for n in moe["notes"]:
                click.echo(f"  note: {n}")
            for u in moe["unknown"]:
                click.echo(f"  unknown: {u}")
        if r["memory"]:
            click.echo("memory of one DP rank:")
            for line in _plan_lines(r["memory"]):
                click.echo(f"  {line}")


def _plan_roles(doc, output, arch=None) -> None:
    """``plan`` of a document with roles; exit 1 when the topology would be refused (the plan is still shown)."""
    from gpustack_k3.core.launch import Refused as SpecRefused, build_topology_launch
    from gpustack_k3.core.plan_topology import plan_topology

    d = plan_topology(doc, arch).to_dict()
    try:
        build_topology_launch(doc, arch=arch)
        findings = []
    except SpecRefused as exc:
        findings = exc.findings
    if output != "text":
        emit(_plan_result(findings, d), output)
    else:
        _topology_plan_text(d)
    _plan_refused(findings)


# ------------------------------------------------------------------ explain / presets

@click.command(cls=Command)
@click.argument("rule_id", required=False)
@output_option
def explain(rule_id, output):
    """Why a rule exists, how to fix it, where it comes from per engine version (no RULE: list all)."""
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.core.rules import RULES
    from gpustack_k3.core.rules.registry import FAMILIES, of_family

    if rule_id is None:
        items = [{"rule": r.id, "family": r.family, "severity": r.severity, "title": r.title}
                 for r in of_family(*FAMILIES)]
        items += [{"rule": t.rule, "family": "probe", "severity": t.severity, "title": _probe_title(t)}
                  for t in _probe_findings().values()]
        if output == "text":
            for i in items:
                click.echo(f"{i['rule']:<40} {i['family']:<7} {i['severity']:<8} {i['title']}")
        else:
            emit(items, output)
        return
    r = RULES.get(rule_id)
    if r is None and rule_id in _probe_findings():
        _explain_probe(_probe_findings()[rule_id], output)
        return
    if r is None:
        import difflib

        close = difflib.get_close_matches(rule_id, [*RULES, *_probe_findings()], n=3)
        raise InputError("RULE", f"unknown rule {rule_id!r}", f"did you mean {', '.join(close)}?" if close
                         else "`gpustack-k3 explain` lists all rules")
    d = _explain_data(r, load_catalog())
    from gpustack_k3.catalog.rule_oracle import (  # lazily: only explain RULE reads the record
        NOT_IN_RECORD, coverage, run_text, summary)

    cov = coverage(r.id, applies=None if r.family == "log" else r.versions(load_catalog()))
    d["oracle_coverage"] = cov   # None: the rule is not in the committed record (tools/engine_oracle/coverage.py)
    if r.family != "log":   # per release: oracle-checked, runtime-only (and how judged), no release code, product
        from gpustack_k3.catalog.rule_oracle import per_release

        d["per_release"] = per_release(r.checked_by, r.fails_at, r.versions(load_catalog()), load_catalog())
    if output != "text":
        emit(d, output)
        return
    click.echo(f"{r.id} ({r.severity}{', --strict: ' + r.strict_severity if r.strict_severity else ''}): {r.title}")
    click.echo(f"family:     {r.family}")
    click.echo(f"field:      {r.field}")
    click.echo(f"applies to: {', '.join(d['applies_to']) or '(no catalog version has its traits)'}")
    click.echo(f"checked by: {_checked_by_text(d)}")
    for row in d.get("per_release") or []:
        click.echo(f"  {row['engine']} {row['version']}: {row['checked']} - {row['how']}")
    if d.get("log_evidence"):
        click.echo(f"logs:       also read from {', '.join(d['log_evidence'])} logs (coldstart, doctor)")
    click.echo(f"why:        {r.why}")
    click.echo(f"fix:        {r.fix}")
    click.echo(f"source:     {r.source}")
    for s in d["sources"]:
        if s["source"] != r.source:
            click.echo(f"  {s['engine']} {s['version']}: {s['source']}")
    if "cel" in d:
        click.echo(f"CRD (CEL):  {d['cel']}")
    if cov is None:
        click.echo(f"oracle:     {NOT_IN_RECORD}")
    else:
        f = cov["from"]
        click.echo(f"oracle:     what each release's own code said where this rule refused ({run_text(f)}):")
        for rel, e in cov["releases"].items():
            click.echo(f"  {rel}: {summary(e)}")


def _probe_findings() -> dict:
    """The findings `probe` prints (probe/data/findings.yaml): explained beside the rule catalog's."""
    from gpustack_k3.probe.catalog import load_findings

    return load_findings()


def _probe_title(t) -> str:
    return t.message.split(":")[0].split("{")[0].strip().rstrip(",;") or t.rule


def _explain_probe(t, output: str) -> None:
    d = {"rule": t.rule, "family": "probe", "severity": t.severity, "title": _probe_title(t), "field": t.field,
         "message": t.message, "fix": t.fix, "source": t.source,
         "applies_to": ["any engine (measured by `gpustack-k3 probe` on a live endpoint)"]}
    if output != "text":
        emit(d, output)
        return
    click.echo(f"{t.rule} ({t.severity}): {d['title']}")
    click.echo("family:     probe (measured on a live endpoint by `gpustack-k3 probe`)")
    click.echo(f"field:      {t.field}")
    click.echo(f"message:    {t.message}")
    click.echo(f"fix:        {t.fix}")
    click.echo(f"source:     {t.source}")


def _oracle_release(version) -> bool:
    """A release the engine oracle can run: a public wheel or an installed build (not a build known only by its
    nearest release, such as kimi-k3)."""
    p = getattr(version, "parser", None)
    return p is not None and not p.nearest and bool(p.wheel or p.made_by)


def _checked_by_text(d: dict) -> str:
    if d["checked_by"] == "oracle":
        rel = ", ".join(d.get("oracle_releases") or []) or "none of the pinned releases has a public build"
        how = ("the release's own NIXL handshake comparison evaluated on the two configs; the engine itself fails at "
               f"{d['fails_at']}" if d.get("fails_at") else "the release's own config-time validation")
        return f"the engine oracle ({how}): {rel}"
    if d["checked_by"] == "runtime-only":
        return f"runtime only: the engine fails later than config time, at {d['fails_at']} (source above)"
    return "this product (a catalog, platform or target constraint; no engine verdict to compare)"


def _explain_data(r, cat) -> dict:
    """explain's answer: the metadata, the engine versions the rule applies to and the source per version."""
    if r.family == "log":
        applies = [f"{e} (any release: read from its log)" for e in r.engines]
        sources = [{"engine": e, "version": None, "source": r.source_for(e, None)} for e in r.engines]
    else:
        versions = r.versions(cat)
        applies = [f"{e} {v}" for e, v in versions]
        sources = [{"engine": e, "version": v, "source": r.source_for(e, v)} for e, v in versions]
    d = {"rule": r.id, "family": r.family, "severity": r.severity, "title": r.title, "field": r.field, "why": r.why,
         "fix": r.fix, "source": r.source, "applies_to": applies, "sources": sources}
    d["checked_by"] = r.checked_by
    if r.checked_by == "oracle":   # the releases whose own validation code the engine oracle runs (public builds)
        d["oracle_releases"] = [f"{e} {v}" for e, v in (r.versions(cat) if r.family != "log" else [])
                                if _oracle_release(cat.engines[e].versions[v])]
    if r.fails_at:
        d["fails_at"] = r.fails_at
    if r.checked_by == "runtime-only":   # the key the engine-oracle differential reads (bench/oracle_differential.py)
        d["runtime_only"] = f"{r.fails_at} ({r.source})"
    if r.strict_severity:
        d["strict_severity"] = r.strict_severity
    if r.log is not None:
        d["log_evidence"] = list(r.engines)
    if r.hard:
        d["cel"] = f"not expressed: {r.no_cel}" if r.no_cel else "expressed as x-kubernetes-validations (gpustack-k3 crd --rules)"
    return d


@click.command(cls=Command)
@click.option("--show", metavar="NAME", help="Print the preset's document (YAML).")
@output_option
def presets(show, output):
    """List the catalog presets (or print one)."""
    from gpustack_k3.catalog import load_catalog

    cat = load_catalog()
    if show is not None:
        if show not in cat.presets:
            raise InputError("--show", f"unknown preset {show!r}", f"known: {', '.join(cat.presets)}")
        emit(cat.presets[show].document, "json" if output == "json" else "yaml")
        return
    items = [{"name": p.name, "default": p.name == cat.default_preset, "engine": p.document["spec"]["engine"]["name"],
              "description": p.description} for p in cat.presets.values()]
    if output != "text":
        emit(items, output)
        return
    for i in items:
        mark = "*" if i["default"] else " "
        click.echo(f"{mark} {i['name']:<18} {i['engine']:<7} {i['description']}")


@click.command("dry-run", cls=Command)
@document_options
def dry_run(spec, preset, strict, model_config, output):
    """The main job, without launching: validate + plan + render summary (default: the default preset)."""
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.core.launch import Refused as SpecRefused, build_launch

    if spec is None and preset is None:
        preset = load_catalog().default_preset
    doc = _load(spec, preset)
    arch = model_arch(model_config, doc.spec.model)   # the model's config.json decides, as for validate/plan
    if doc.spec.roles:
        _dry_run_roles(doc, strict, output, arch)
        return
    from gpustack_k3.core.findings import has_errors
    from gpustack_k3.render.targets import with_render_findings

    try:
        launch, findings, p = build_launch(doc, strict=strict, arch=arch)
        findings = with_render_findings(launch, findings)   # what the targets themselves refuse
        if has_errors(findings):
            raise SpecRefused(findings)
    except SpecRefused as exc:
        _dry_run_refused(exc.findings, output)
    with outcome("nothing was rendered"):
        targets = _render_summary(launch, doc)
    summary = {
        "name": doc.metadata.name, "ok": True, "findings": [f.to_dict() for f in findings],
        "plan": p.to_dict() if p else None,
        "launch": {"image": launch.image, "argv": launch.argv, "env": launch.env,
                   "startup_budget_s": launch.startup_budget_s},
        "targets": targets,
    }
    if _dry_run_summary(summary, findings, output):
        return
    if p:
        _plan_text(p.to_dict())
    click.echo(f"\n== launch ({launch.engine} {launch.engine_version})")
    import shlex

    click.echo(f"image: {launch.image}")
    click.echo("argv:  " + shlex.join(launch.argv))
    for k, v in launch.env.items():
        click.echo(f"env:   {k}={shlex.quote(v)}")
    click.echo(f"startup budget: {launch.startup_budget_s} s")
    click.echo("\n== render")
    for t, desc in targets.items():
        click.echo(f"{t:<11} {desc}")


def _dry_run_summary(summary, findings, output) -> bool:
    """Emit the summary as JSON/YAML (True: done) or start the text: the findings and the plan heading."""
    from gpustack_k3.cli.common import gate_fails, record_findings

    record_findings(findings)
    summary["ok"] = not gate_fails(findings)
    if output != "text":
        emit(summary, output)
        return True
    click.echo(f"== {summary['name']}: validate")
    print_findings_text(findings)
    click.echo("\n== plan")
    return False


def _dry_run_refused(findings, output) -> None:
    if output == "text":
        print_findings_text(findings)
    else:
        emit({"ok": False, **findings_payload(findings)}, output)
    raise Refused(findings, shown=True)


def _dry_run_roles(doc, strict, output, arch=None) -> None:
    """dry-run of a document with roles: findings, the plan per role, each role's leader/worker command line and
    what each target makes of it (rendered in memory, nothing written)."""
    import shlex

    from gpustack_k3.core.launch import Refused as SpecRefused, build_topology_launch
    from gpustack_k3.core.plan_topology import plan_topology
    from gpustack_k3.render.argv import per_pod_tokens
    from gpustack_k3.render.targets import TARGETS, render_topology_targets

    try:
        with outcome("nothing was rendered"):
            tl = build_topology_launch(doc, strict=strict, arch=arch)[0]
            files, refused, findings = render_topology_targets(doc, TARGETS, namespace=doc.metadata.namespace,
                                                               strict=strict, arch=arch)
    except SpecRefused as exc:
        _dry_run_refused(exc.findings, output)
    targets = {t: f"refused: {refused[t].line()}" if t in refused else ", ".join(sorted(files[t])) for t in TARGETS}
    roles = []
    for r in tl.roles:
        pods = {"leader": (r.leader, False), **({"worker": (r.worker, True)} if r.worker else {})}
        roles.append({"role": r.role, "kind": r.kind, "instances": r.instances, "pods_per_instance": r.pods_per_instance,
                      "image": r.leader.image, "startup_budget_s": r.leader.startup_budget_s,
                      "env_from_pod": dict(r.env_from_pod),
                      **{k: {"argv": spec.argv, "per_pod_args": per_pod_tokens(r, worker=w), "env": spec.env}
                         for k, (spec, w) in pods.items()}})
    summary = {"name": doc.metadata.name, "ok": True, "findings": [f.to_dict() for f in findings],
               "plan": plan_topology(doc, arch).to_dict(), "roles": roles, "targets": targets}
    if _dry_run_summary(summary, findings, output):
        return
    _topology_plan_text(summary["plan"])
    for r in roles:
        click.echo(f"\n== launch: role {r['role']} ({r['kind']}), {r['instances']} instance(s) x "
                   f"{r['pods_per_instance']} pod(s)")
        click.echo(f"image: {r['image']}")
        for k in ("leader", "worker"):
            if k in r:
                per_pod = " ".join(f'{a} "{b}"' for a, b in zip(r[k]["per_pod_args"][::2], r[k]["per_pod_args"][1::2]))
                click.echo(f"{k + ':':<7} " + shlex.join(r[k]["argv"]) + (f" {per_pod}" if per_pod else ""))
        for k, v in r["env_from_pod"].items():
            click.echo(f"env:    {k} from the pod's {v}")
        click.echo(f"startup budget: {r['startup_budget_s']} s")
    click.echo("\n== render")
    for t, desc in targets.items():
        click.echo(f"{t:<11} {desc}")


def _render_summary(launch, doc) -> dict[str, str]:
    """Render every target in memory (nothing is written) and summarise what each produced; a target that cannot
    express the document reads ``refused: <field>: <why>`` and the others still render (as for a topology)."""
    from gpustack_k3.render.targets import summarise_targets

    return summarise_targets(launch, doc)


# ------------------------------------------------------------------ check-pd

def _argv_io(model_config):
    """What core.argv.roles needs from the edges: the disk (--config FILE, the model's config.json) and the
    document check with its input-error messages."""
    from functools import partial

    from gpustack_k3.cli.common import document_from_data

    # check-args and check-pd judge the command line the engine runs: no layout rule of rendered documents applies
    return {"document_of": partial(document_from_data, engine_argv=True), "read_file": read_config_file,
            "model_arch": lambda model_path: model_arch(model_config, model_path), "draft_arch": draft_arch}


@click.command("check-pd", cls=Command)
@click.option("--engine", type=click.Choice([ENGINE_VLLM, ENGINE_SGLANG]), required=True, help="Engine of both command lines.")
@click.option("--engine-version", default=None, help="Catalog version (default: the catalog default).")
@click.option("--model", "model_name", default=None,
              help="Catalog model key (default: the catalog model the command lines' model names; none: no memory plan).")
@click.option("--gpu-type", default="b300", show_default=True)
@click.option("--prefill-engine-version", default=None,
              help="Catalog version of the prefill engine (default: --engine-version).")
@click.option("--decode-engine-version", default=None,
              help="Catalog version of the decode engine (default: --engine-version).")
@click.option("--prefill", "prefill", required=True, metavar="'ARGV'", help="The prefill command line, shell-quoted.")
@click.option("--decode", "decode", required=True, metavar="'ARGV'", help="The decode command line, shell-quoted.")
@click.option("--prefill-env", multiple=True, metavar="K=V", help="Environment of the prefill engine (repeatable).")
@click.option("--decode-env", multiple=True, metavar="K=V", help="Environment of the decode engine (repeatable).")
@click.option("--prefill-pods", type=click.IntRange(1, 256), default=1, show_default=True, help="Pods of one prefill instance.")
@click.option("--decode-pods", type=click.IntRange(1, 256), default=1, show_default=True, help="Pods of one decode instance.")
@click.option("--gpus-per-pod", type=click.IntRange(1, 64), default=None, help="GPUs per pod of both sides (checks dpLocal x TP).")
@click.option("--prefill-gpus-per-pod", type=click.IntRange(1, 64), default=None,
              help="GPUs per prefill pod (overrides --gpus-per-pod for the prefill side).")
@click.option("--decode-gpus-per-pod", type=click.IntRange(1, 64), default=None,
              help="GPUs per decode pod (overrides --gpus-per-pod for the decode side).")
@strict_opt
@model_config_opt
@output_option
@fail_on_option
@engine_verdict_opt
def check_pd(engine, engine_version, prefill_engine_version, decode_engine_version, model_name, gpu_type, prefill,
             decode, prefill_env, decode_env, prefill_pods, decode_pods, gpus_per_pod, prefill_gpus_per_pod,
             decode_gpus_per_pod, strict, model_config, output, engine_verdict=False):
    """Check a prefill and a decode command line against each other before spending a rack on them."""
    not_applicable({"strict": "--strict"}, "to command lines (a flag their release does not know is the engine "
                   "parser's refusal, argv-refused, already an error)")
    from gpustack_k3.core.argv.roles import side_role
    from gpustack_k3.core.findings import sort_findings
    from gpustack_k3.core.rules import Ctx, in_role, validate_resolved, validate_topology
    from gpustack_k3.core.topology import Topology

    roles, findings = [], []
    for side, version, text, env, pods, side_gpus in (
            ("prefill", prefill_engine_version, prefill, prefill_env, prefill_pods, prefill_gpus_per_pod),
            ("decode", decode_engine_version, decode, decode_env, decode_pods, decode_gpus_per_pod)):
        # each side may run its own release (a rollout): the pair rules compare them (pd-compat-hash,
        # pd-pair-identity); the topology rules apply by the prefill's release
        doc, role, refusals = side_role(side, engine, version or engine_version, model_name, gpu_type, text, env,
                                        pods, side_gpus or gpus_per_pod, **_argv_io(model_config))
        roles.append(role)
        ctx = Ctx(role.resolved, argv_refusals=refusals)
        findings += [in_role(f, side) for f in validate_resolved(role.resolved, strict=strict, ctx=ctx)]
    if not any(f.rule == "unknown-catalog-entry" for f in findings):
        findings += validate_topology(Topology(roles, None, "argv"), strict=strict)
    if engine_verdict:
        import shlex

        from gpustack_k3.oracle import engine_verdict_pair

        keys = [ro.resolved.version.key if ro.resolved.version else ro.resolved.spec.engine.version for ro in roles]
        sides = [{"argv": shlex.split(t), "env": e, "gpus": g or gpus_per_pod}
                 for t, e, g in ((prefill, prefill_env, prefill_gpus_per_pod), (decode, decode_env, decode_gpus_per_pod))]
        v = engine_verdict_pair(engine, keys[0], *sides, hardware=gpu_type, decode_version=keys[1])
        _with_engine_verdict(sort_findings(findings), output, v)
        return
    _report(sort_findings(findings), output)
