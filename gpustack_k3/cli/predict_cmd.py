"""`predict` (what a launch will do) and `advise` (which knobs), from the estimator behind gpustack_k3.predict.

With `-o json` or `-o yaml` every exit prints that format on stdout: the prediction, or the common error object
{"ok": false, "exit_code": 2, "error": {...}} (exit 2), or the refusal object with the findings (exit 1). Design: docs/design/003-predict.md.
"""
from __future__ import annotations

import json
from typing import NoReturn

import click

from gpustack_k3.api.v1alpha1.constants import ENGINES
from gpustack_k3.cli._click import Command
from gpustack_k3.cli.common import (EXIT_OK, EXIT_REFUSED, emit, exit_refused, fail_input, load_document,
                                    output_option, read_text)
from gpustack_k3.errors import InputError


PROGRESS_AFTER_S = 2.0      # a computation still running after this long shows its progress on stderr
PROGRESS_EVERY_S = 1.0


def _estimator():
    from gpustack_k3.predict.aic import AicEstimator

    return AicEstimator()


class _Progress:
    """``(what, done, total)`` reports of a long computation, shown on stderr once it runs past
    ``PROGRESS_AFTER_S`` (at most one line per ``PROGRESS_EVERY_S``); stdout stays the result."""

    def __init__(self, unit: str) -> None:
        import time

        self.clock = time.monotonic
        self.start = self.clock()
        self.last = None
        self.unit = unit

    def __call__(self, what: str, done: int, total: int) -> None:
        now = self.clock()
        if now - self.start < PROGRESS_AFTER_S or (self.last is not None and now - self.last < PROGRESS_EVERY_S):
            return
        self.last = now
        click.echo(f"{what}: {done:,} of {total:,} {self.unit} ({now - self.start:.0f} s)", err=True)


def _fail_environment(exc) -> NoReturn:
    """The [predict] extra is missing: an environment failure (kind operational, exit 2) with the way out."""
    from gpustack_k3.errors import OperationalError

    err = OperationalError(exc.message)
    err.where, err.hint = exc.where, exc.hint
    raise err from None   # cli/main.py shows it: one line, the operational error object, exit 2


@click.command(cls=Command, context_settings={"ignore_unknown_options": True})   # options after SPEC; ARGV after --
@click.argument("spec", required=False)
@click.option("--preset", help="Use a catalog preset instead of a SPEC file (see `presets`).")
@click.option("--engine", type=click.Choice(ENGINES), default=None,
              help="Predict an engine command line given after -- (its model: --model-config or a local directory).")
@click.option("--engine-version", default=None, help="With --engine: the catalog version (default: the catalog's).")
@click.option("--gpu-type", default=None, help="With --engine: the GPU type [default: b300].")
@click.option("--gpus", type=click.IntRange(1), default=None, help="With --engine: GPUs of the node [default: 8].")
@click.option("--input-len", type=click.IntRange(1), help="Prompt tokens per request.")
@click.option("--output-len", type=click.IntRange(1), help="Generated tokens per request.")
@click.option("--input-len-dist", metavar="DIST",
              help="Prompt lengths as a distribution instead of --input-len: LEN:WEIGHT pairs or observed lengths, "
                   "comma- or space-separated (1024:3,65536:1 or 812,1024,4000), or @FILE holding them.")
@click.option("--output-len-dist", metavar="DIST", help="Generated lengths as a distribution (as --input-len-dist).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of the per-request length sample drawn from a distribution.")
@click.option("--concurrency", type=click.IntRange(1), default=None, help="Closed-loop clients [default: 1].")
@click.option("--requests", type=click.IntRange(1), default=None,
              help="Requests in total (default: one per client; with a length distribution at least 64).")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Open loop: requests per second instead of closed-loop clients.")
@click.option("--acceptance-length", default=None, metavar="L|LOW-HIGH",
              help="Mean tokens committed per verify step (engine log/metrics), at the spec's draft count; a range "
                   "LOW-HIGH is predicted at its middle with TPOT and decode throughput over the range (the band).")
@click.option("--acceptance-rate", default=None, metavar="A|LOW-HIGH",
              help="Per-draft-token acceptance probability (0-1), or a range LOW-HIGH.")
@click.option("--measured", "measured", default=None, metavar="PROBE_JSON",
              help="A `probe -o json` report: predict its run and show measured beside predicted (drift %).")
@click.option("--model-config", "model_config", metavar="FILE", default=None,
              help="The model's config.json: its op graph and figures for a model the catalog lacks (any family "
                   "aiconfigurator-core models; default: config.json in spec.model.path when it is a local "
                   "directory).")
@output_option
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def predict(spec, preset, engine, engine_version, gpu_type, gpus, input_len, output_len, input_len_dist,
            output_len_dist, seed, concurrency, requests, rate, acceptance_length, acceptance_rate, measured,
            model_config, output, argv):
    """Predict a launch: decode step and its breakdown, TPOT/ITL, prefill chunks, TTFT and end-to-end time of a
    closed-loop benchmark, per role. Needs the [predict] extra (aiconfigurator-core).

    The benchmark simulates at most 100,000 requests and 10,000,000 request-steps (requests x output tokens /
    tokens per step; its time is linear in them, ~1-2 million a second); beyond that the command exits 2 naming
    --requests or --concurrency. Progress shows on stderr past 2 s."""
    from gpustack_k3.predict.types import EstimatorMissing, Workload

    try:
        report = None
        if measured is not None:
            from gpustack_k3.predict.actual import workload_fields

            try:
                report = json.loads(read_text(measured, "probe report"))
            except json.JSONDecodeError as exc:
                raise InputError(measured, f"not JSON: {exc.msg} at line {exc.lineno}",
                                 "give the output of `gpustack-k3 probe -o json`") from None
            got = workload_fields(report)
            input_len = input_len or (None if input_len_dist else got.get("input_len"))
            output_len = output_len or (None if output_len_dist else got.get("output_len"))
            concurrency = concurrency or got.get("concurrency")
            requests = requests or got.get("requests")
        inp = _lengths("--input-len", input_len, input_len_dist)
        out = _lengths("--output-len", output_len, output_len_dist)
        if acceptance_length is not None and acceptance_rate is not None:
            raise InputError("--acceptance-length", "give an acceptance length or a rate, not both", "drop one")
        length, span = _acceptance("--acceptance-length", acceptance_length)
        arate, span = _acceptance("--acceptance-rate", acceptance_rate) if acceptance_rate is not None else \
            (None, span)
        w = Workload(inp, out, concurrency or 1, requests, rate, length, arate, seed, acceptance_range=span)
        doc = _document(spec, preset, engine, engine_version, gpu_type, gpus, argv)
        from gpustack_k3.cli.common import model_arch
        from gpustack_k3.core.findings import has_errors
        from gpustack_k3.core.rules import validate

        arch = model_arch(model_config, doc.spec.model)
        findings = validate(doc, arch=arch)
        if has_errors(findings):
            exit_refused(findings, "refused: the document's error findings above (gpustack-k3 explain RULE)")
        from gpustack_k3.predict.model import predict_document

        est = _estimator()
        result = predict_document(doc, w, est, progress=_Progress("requests done (simulated)"), arch=arch)
        result = {"ok": True, "estimator": {"name": est.name, "version": est.version},
                  "spec": spec or f"preset:{preset}", **result}
        if report is not None:
            from gpustack_k3.predict.actual import drift

            serve = next((r for r in result["roles"] if r["role"] == "serve"), result["roles"][0])
            result["plan_vs_actual"] = drift(serve, report)
    except EstimatorMissing as exc:
        _fail_environment(exc)
    except InputError as exc:       # PredictError included
        fail_input(exc)
    return _finish(result, output, _text, EXIT_OK)


def _document(spec, preset, engine, engine_version, gpu_type, gpus, argv):
    """The deployment document to predict: SPEC / --preset, or (--engine) the command line after --."""
    if engine is None:
        for opt, v in (("--engine-version", engine_version), ("--gpu-type", gpu_type), ("--gpus", gpus)):
            if v is not None:
                raise InputError(opt, "not applicable: it describes a command line (--engine E -- ARGV)",
                                 f"add --engine and the command line, or drop {opt}")
        if spec is not None and spec.startswith("-") and spec != "-":    # an unknown option, kept for a command line
            argv = (spec, *argv)
        if argv:
            raise InputError("predict", f"unexpected arguments {' '.join(argv)[:200]!r}",
                             "give SPEC or --preset, or --engine E -- ARGV to predict a command line")
        return load_document(spec, preset)
    if preset is not None:
        raise InputError("--preset", "give a preset or a command line (--engine), not both", "drop one")
    from gpustack_k3.cli.common import document_from_data
    from gpustack_k3.cli.core_cmds import argv_to_data

    argv = (spec, *argv) if spec is not None else argv
    if not argv:
        raise InputError("--engine", "no command line after --", "e.g. --engine vllm -- vllm serve /models/m -tp 8")
    data, _refusals = argv_to_data(engine, engine_version, None, gpu_type or "b300", gpus or 8, (), "argv", argv)
    return document_from_data(data, "argv")


def _finish(result: dict, output: str, text, code: int) -> int:
    """The result in the asked format (``text(result)`` for text); the exit code, for the command to return
    (cli/main.py exits with it)."""
    if output != "text":
        emit(result, output)
    else:
        text(result)
    return code


def _acceptance(option: str, text: str | None) -> tuple[float | None, tuple[float, float] | None]:
    """An acceptance figure ``X`` or a range ``LOW-HIGH`` (its middle is the point figure)."""
    import math

    if text is None:
        return None, None
    low, sep, high = text.strip().partition("-")
    try:
        lo = float(low)
        hi = float(high) if sep else lo
    except ValueError:
        raise InputError(option, f"{text[:40]!r} is not a number or a range LOW-HIGH",
                         "e.g. 2.39, or 2.27-2.51 for the spread of a measured range") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise InputError(option, f"{text[:40]!r}: a range runs from LOW to a HIGH not below it",
                         "e.g. 2.27-2.51")
    return (lo + hi) / 2, ((lo, hi) if sep else None)


def _lengths(option: str, fixed: int | None, dist: str | None):
    """A fixed length or a LengthDist from ``--X-len`` / ``--X-len-dist`` (exactly one); ``@FILE`` reads the items."""
    from gpustack_k3.predict.types import LengthDist

    if fixed is not None and dist is not None:
        raise InputError(f"{option}-dist", f"give {option} or {option}-dist, not both", "drop one")
    if dist is None:
        if fixed is None:
            raise InputError("--input-len/--output-len", "the workload needs both lengths (or their distributions)",
                             "e.g. --input-len 65536 --output-len 3000 --concurrency 10")
        return fixed
    where = f"{option}-dist"
    text = dist
    if dist.startswith("@"):
        try:
            text = read_text(dist[1:], "length file")
        except InputError as exc:
            raise InputError(where, f"{exc.where}: {exc.message}", exc.hint) from None
    return LengthDist.parse(text, where)


def _ms(x: float) -> str:
    return f"{x / 1000:.1f} s" if x >= 10000 else f"{x:.1f} ms"


def _text(res: dict) -> None:
    w = res["workload"]

    def length(key: str) -> str:
        d = w.get(f"{key}_dist")
        return f"{w[key]:,}" if d is None else f"{d['mean']:,.0f} mean (p50 {d['p50']:,}, p90 {d['p90']:,}, max {d['max']:,})"

    click.echo(f"workload: {length('input_len')} in / {length('output_len')} out, "
               + (f"{w['rate']} req/s" if w["rate"] else f"{w['concurrency']} clients") +
               f", {w['requests']} requests" + (f" (length sample seed {w['seed']})" if "seed" in w else "") +
               f"   estimator: {res['estimator']['name']} {res['estimator']['version'] or ''}")
    for r in res["roles"]:
        e, d, p = r["engine"], r["decode"], r["prefill"]
        click.echo(f"\nrole {r['role']} (x{r['instances']}): {e['engine']} {e['version']} TP{e['tp']} DCP{e['dcp']} "
                   f"EP{e['ep']} drafts {e['drafts']} KV {e['kv_dtype']} on {e['gpu']}; model {r['model']['name']} "
                   f"(family {r['model']['family']}, from {r['model']['config']})")
        parts = " + ".join(f"{k} {v:.1f}" for k, v in d["breakdown_ms"].items() if v > 0.05)
        bd = r["band"]
        click.echo(f"  decode step ({d['batch']} requests at {d['context']:,} tokens): {d['step_ms']:.1f} ms = {parts}"
                   f"  [{bd['decode_step_measured_share']:.0%} from measured rows]")
        spread = bd["acceptance"]["spread"]
        click.echo(f"  tokens/step {d['tokens_per_step']:.2f} -> TPOT {d['tpot_ms']:.1f} ms"
                   + (f" [{spread['tpot_ms'][0]:.1f}-{spread['tpot_ms'][1]:.1f} over the acceptance range]"
                      if spread else "") +
                   f", ITL {d['itl_ms']:.1f} ms, {d['per_request_tok_s']:.1f} tok/s per request, "
                   f"{d['decode_tok_s']:.0f} tok/s decode"
                   + (f" [{spread['decode_tok_s'][0]:.0f}-{spread['decode_tok_s'][1]:.0f}]" if spread else ""))
        series = " -> ".join(f"{c['tok_s']:,.0f}" for c in p["chunks"][:8])
        click.echo(f"  prefill chunks of {p['chunk_budget']:,}: {series} tok/s; one request {_ms(p['request_prefill_ms'])}"
                   f"  [{bd['prefill_measured_share']:.0%} from measured rows]")
        b = r.get("benchmark")
        if b:
            tp = b["tpot_ms"]
            click.echo(f"  benchmark: TTFT mean {_ms(b['ttft_ms']['mean'])} (p50 {_ms(b['ttft_ms']['p50'])}, "
                       f"p90 {_ms(b['ttft_ms']['p90'])}), TPOT mean {tp['mean']:.1f} ms"
                       + (f" (p50 {tp['p50']:.1f}, p90 {tp['p90']:.1f})" if "sample" in b else "") +
                       f", latency mean {_ms(b['latency_ms']['mean'])}, end-to-end {b['e2e_s']:.1f} s")
        bn = r["bottleneck"]
        click.echo(f"  bottleneck: {bn['decode_step']} ({bn['share']:.0%} of the decode step)"
                   + (f"; requests are {bn['request']}-bound (TTFT {bn['ttft_share_of_latency']:.0%} of latency)"
                      if "request" in bn else ""))
        if d["not_measured"]:
            click.echo(f"  not from measured rows: {len(d['not_measured'])} ops, "
                       f"{d['not_measured_share']:.1%} of the step (AIC empirical/SOL: "
                       f"{', '.join(sorted({x['op'] for x in d['not_measured']})[:6])}...)")
        click.echo("  assumptions: " + ", ".join(r["assumptions"]))
    if res.get("pd"):
        pd = res["pd"]
        click.echo(f"\nP/D: prefill carries {pd['prefill_req_s']} req/s, decode {pd['decode_req_s']} req/s: "
                   f"limited by {pd['limited_by']}")
    for row in res.get("plan_vs_actual", []):
        click.echo(f"plan vs actual {row['figure']}: predicted {row['predicted']}, measured {row['measured']}, "
                   f"drift {row['drift_pct']:+.1f}%")


@click.command(cls=Command)
@click.argument("spec", required=False)
@click.option("--model-config", "model_config", metavar="FILE", default=None,
              help="With SPEC: the model's config.json (default: config.json in spec.model.path when it is a local "
                   "directory).")
@click.option("--context", type=click.IntRange(1), required=True, help="Input context length in tokens.")
@click.option("--concurrency", type=click.IntRange(1), required=True, help="Concurrent requests at that length.")
@click.option("--priority", type=click.Choice(["throughput", "latency"]), default=None,
              help="Measured basis: what to favour (kept for the lookup; predictions use --objective).")
@click.option("--objective", type=click.Choice(["throughput", "tpot", "ttft", "goodput"]), default=None,
              help="Rank predicted candidates by decode throughput, TPOT, TTFT, or goodput under the SLOs.")
@click.option("--output-len", type=click.IntRange(1), default=3000, show_default=True, help="Generated tokens per request.")
@click.option("--slo-tpot-ms", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option("--slo-ttft-ms", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option("--acceptance-rate", type=click.FloatRange(0, 1), default=None,
              help="Per-draft-token acceptance of your traffic (default: the write-up's measured random-dataset one).")
@click.option("--engine", type=click.Choice(ENGINES), default=None, help="Only this engine.")
@click.option("--top", type=click.IntRange(1, 50), default=5, show_default=True)
@click.option("--topology", default=None, metavar="PRESET",
              help="A prefill/decode preset: search the P:D ratio within --gpu-budget instead.")
@click.option("--gpu-budget", type=click.IntRange(1), default=None,
              help="GPUs for the P:D search (with --topology). The search is linear: one judged split per decode-"
                   "instance count up to min(budget / decode GPUs, concurrency), at most 1,024 (exit 2 beyond).")
@click.option("--basis", type=click.Choice(["auto", "predicted", "measured"]), default="auto", show_default=True,
              help="predicted needs the [predict] extra; auto uses it when installed, else the measured lookup.")
@output_option
def advise(spec, model_config, context, concurrency, priority, objective, output_len, slo_tpot_ms, slo_ttft_ms,
           acceptance_rate, engine, top, topology, gpu_budget, basis, output):
    """Recommend a launch: enumerate candidates, drop what the rules refuse, rank by predicted figures.

    Without SPEC the candidates vary the catalog's Kimi-K3 presets; with SPEC (a document whose model is any
    config aiconfigurator-core models: --model-config or a local model directory) they vary that document's
    release, DCP (MLA models only), drafts (when it speculates), memory fraction and max-model-len.

    An option the chosen search does not use is refused (exit 2, naming it): the measured lookup reads only
    --context, --concurrency and --priority; the P:D search (--topology) no --objective, SLO, --engine or
    --priority. Nothing recommended (no candidate, or none meeting the SLO) exits 1 with one result object
    (ok false, findings: the rules' refusals behind it)."""
    from gpustack_k3.predict import aic
    from gpustack_k3.predict.types import EstimatorMissing

    try:
        if topology is None and gpu_budget is not None:
            raise InputError("--gpu-budget", "not applicable: the GPU budget sizes the P:D search of --topology",
                             "add --topology PRESET (a prefill/decode preset) or drop --gpu-budget")
        if spec is not None and (topology is not None or basis == "measured"):
            raise InputError("SPEC", "not applicable: a document's candidates are predicted on one node "
                             "(not with --topology or --basis measured)", "drop SPEC or those options")
        if model_config is not None and spec is None:
            raise InputError("--model-config", "not applicable without SPEC (the catalog's presets are Kimi-K3)",
                             "give the document SPEC whose model the config.json describes")
        if topology is not None and basis == "measured":
            raise InputError("--basis", "not applicable: the P:D search (--topology) is predicted only",
                             "drop --basis measured")
        use_pred = basis == "predicted" or (basis == "auto" and aic.available()) or topology is not None
        _not_applicable(_MEASURED_ONLY if not use_pred else _PD_ONLY if topology is not None else
                        {"--priority": "give --priority or --objective, not both"} if objective else {})
        if not use_pred:
            from gpustack_k3.core.advise import advise as lookup

            a = lookup(context, concurrency, priority or "throughput")
            res = {**a.to_dict(), "basis": "measured",
                   "note": "from the write-up's two measured points; install the [predict] extra for predictions"}
            return _finish_advice(res, output, _measured_text)
        from gpustack_k3.predict.advise import AdviseRequest, advise as run

        obj = objective or ("ttft" if priority == "latency" else "throughput")
        req = AdviseRequest(context, concurrency, output_len, obj, slo_tpot_ms, slo_ttft_ms, acceptance_rate, engine,
                            top)
        if spec is not None:
            from gpustack_k3.cli.common import model_arch

            if engine is not None:
                raise InputError("--engine", "not applicable with SPEC: the document names its engine", "drop it")
            doc = load_document(spec, None)
            req.base = doc.model_dump(mode="json", exclude_none=True, by_alias=True)
            req.arch = model_arch(model_config, doc.spec.model)
        if topology is not None:
            from gpustack_k3.predict.advise import advise_pd

            if gpu_budget is None:
                raise InputError("--gpu-budget", "the P:D search needs a GPU budget", "e.g. --gpu-budget 32")
            res, text = advise_pd(req, topology, gpu_budget, _estimator(), _Progress("decode-instance counts")), \
                _pd_text
        else:
            res, text = run(req, _estimator()), _advise_text
    except EstimatorMissing as exc:
        _fail_environment(exc)
    except InputError as exc:       # PredictError included
        fail_input(exc)
    return _finish_advice(res, output, text)


# options each search does not read, with the way out (the measured lookup reads --context, --concurrency,
# --priority; the P:D search neither the ranking options nor --engine)
_MEASURED_ONLY = {o: "install the [predict] extra (pip install 'gpustack-k3[predict]') for predicted advice, or "
                     f"drop {o}" for o in ("--objective", "--output-len", "--slo-tpot-ms", "--slo-ttft-ms",
                                           "--acceptance-rate", "--engine", "--top")}
_PD_ONLY = {o: f"the P:D search ranks by requests/s for the preset's engine: drop {o}"
            for o in ("--objective", "--slo-tpot-ms", "--slo-ttft-ms", "--engine", "--priority")}


def _not_applicable(options: dict[str, str]) -> None:
    """Refuse (exit 2) the first of ``options`` the user gave: the search at hand does not read it."""
    ctx = click.get_current_context()
    for param in ctx.command.params:
        name = f"--{param.name.replace('_', '-')}"
        if name in options and ctx.get_parameter_source(param.name) is click.core.ParameterSource.COMMANDLINE:
            raise InputError(name, "not applicable to this advice (it would be ignored)", options[name])


def _finish_advice(res: dict, output: str, text) -> int:
    """One result object: ``ok`` and ``findings`` always; a refusal (nothing recommended) exits 1 with
    ``exit_code`` and ``message`` too."""
    ok = bool(res.get("preset"))
    res = {"ok": ok, **res, "findings": res.get("findings", [])}
    if not ok:
        res.update(exit_code=EXIT_REFUSED, message=res["reason"])
        if output != "text":        # the human message on stderr (text prints it with the result)
            click.echo(f"refused: {res['reason']}", err=True)
    return _finish(res, output, text, EXIT_OK if ok else EXIT_REFUSED)


def _measured_text(d: dict) -> None:
    click.echo(f"preset: {d['preset'] or '(none)'}")
    click.echo(f"reason: {d['reason']}")
    click.echo(f"source: {d['source']} (basis: measured)")


def _pd_text(res: dict) -> None:
    click.echo(f"topology: {res['topology']} within {res['gpu_budget']} GPUs\nreason: {res['reason']}")
    for c in res.get("top", []):
        click.echo(f"  {c['prefill_instances']}P:{c['decode_instances']}D {c['gpus']:>3} GPUs  "
                   f"{c['req_s']:.3f} req/s  (prefill {c['prefill_req_s']:.3f}, decode "
                   f"{c['decode_req_s']:.3f}; {c['limited_by']}-bound)")


def _advise_text(res: dict) -> None:
    if not res.get("preset"):
        click.echo(f"preset: (none)\nreason: {res['reason']}")
        return
    click.echo(f"preset: {res['preset']} ({res['engine']}), with: {res['winner']['knobs']}")
    click.echo(f"reason: {res['reason']}")
    click.echo(f"objective: {res['objective']}; {res['candidates']['total']} candidates, "
               f"{res['candidates']['refused']} refused by the rules, {res['candidates']['no_room']} without KV room")
    for i, c in enumerate(res["top"], 1):
        f = c["figures"]
        k = c["knobs"]
        click.echo(f"  {i}. {c['engine']} DCP {k['dcp']} drafts {k['drafts']:<2} decode {f['decode_tok_s']:>6.0f} tok/s  "
                   f"TPOT {f['tpot_ms']:6.1f} ms  unloaded TTFT {f['ttft_ms'] / 1000:5.1f} s  "
                   f"(releases: {', '.join(c['releases'])})")
    if res.get("crossover"):
        click.echo(f"crossover: {res['crossover']['text']}")
