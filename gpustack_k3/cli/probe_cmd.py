"""``gpustack-k3 probe URL``: measure a live OpenAI-compatible endpoint (gpustack_k3/probe).

Exit codes: 0 the run met its SLOs and invariants, 1 an SLO or an invariant failed (or requests failed, or, with
--prefill/--decode, KV does not move from prefill to decode), 2 unusable input or an unusable endpoint (a stage
failed: /health, /v1/models, the first completion).
"""
from __future__ import annotations

import json
import os
import sys   # stderr.isatty

import click

from gpustack_k3.api.v1alpha1.constants import MIB
from gpustack_k3.cli._click import Command
from gpustack_k3.cli.common import EXIT_INPUT, fail_input, not_applicable
from gpustack_k3.errors import InputError

MAX_PROMPTS_BYTES = 64 * MIB


def _prompts(path: str) -> tuple[tuple[str, ...], str]:
    """A JSONL dataset: one JSON string or {"prompt": "..."} per line (blank lines skipped)."""
    from pathlib import Path

    p = Path(path)
    try:
        with p.open("rb") as fh:
            raw = fh.read(MAX_PROMPTS_BYTES + 1)
    except OSError as exc:
        raise InputError("--prompts", f"cannot read {path}: {exc.strerror or exc}", "check the path") from None
    if len(raw) > MAX_PROMPTS_BYTES:
        raise InputError("--prompts", f"{path} is larger than {MAX_PROMPTS_BYTES >> 20} MiB", "use a smaller sample")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("--prompts", f"{path} is not UTF-8 (byte {exc.start})", "save it as UTF-8") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            v = json.loads(line)
        except ValueError:
            raise InputError("--prompts", f"{path}:{n} is not JSON", 'one JSON string or {"prompt": "..."} per line') from None
        v = v.get("prompt") if isinstance(v, dict) else v
        if not isinstance(v, str) or not v:
            raise InputError("--prompts", f'{path}:{n} holds no non-empty "prompt" string',
                             'one JSON string or {"prompt": "..."} per line')
        out.append(v)
    return tuple(out), p.name


def _from_spec(spec: str | None, preset: str | None) -> tuple[str | None, int | None, object | None]:
    """(served model name, the spec's maxNumSeqs in effect, spec.startup.warmup) of a deployment document."""
    if spec is None and preset is None:
        return None, None, None
    from gpustack_k3.cli.common import load_document
    from gpustack_k3.core.resolve import resolve

    doc = load_document(spec, preset)
    try:
        seqs = resolve(doc).value("scheduling.maxNumSeqs")
    except (InputError, KeyError, ValueError):
        seqs = doc.spec.scheduling.maxNumSeqs
    warm = getattr(doc.spec.startup, "warmup", None)
    return doc.spec.model.servedModelName, seqs, warm     # None: the engine serves its model path


def api_key_from_env(var: str | None) -> str | None:
    """The key from the named environment variable (secrets by reference: never an option value)."""
    if var is None:
        return None
    key = os.environ.get(var, "").strip()
    if not key:
        raise InputError("--api-key-env", f"environment variable {var} is empty or unset", f"export {var}=...")
    return key


@click.command("probe", cls=Command)
@click.argument("url")
@click.option("--spec", "spec", default=None, metavar="FILE", help="Deployment document: served name, maxNumSeqs.")
@click.option("--preset", default=None, metavar="NAME", help="A catalog preset instead of --spec.")
@click.option("--model", default=None, metavar="NAME", help="Served model name (default: the spec's, else /v1/models').")
@click.option("--requests", "requests_", type=int, default=32, show_default=True, help="Streamed requests in the run.")
@click.option("--concurrency", type=int, default=8, show_default=True, help="Requests in flight at once.")
@click.option("--input-len", type=int, default=256, show_default=True, help="Prompt tokens per request (synthetic prompts).")
@click.option("--output-len", type=int, default=64, show_default=True, help="Completion tokens per request (ignore_eos).")
@click.option("--warmup", type=int, default=None, help="Warm-up requests before the run, reported apart [default: "
              "the spec's startup.warmup.requests, else 2].")
@click.option("--slo", default=None, metavar="ttft=MS,tpot=MS,e2el=MS", help="Goodput SLOs (any subset).")
@click.option("--min-goodput", type=float, default=1.0, show_default=True,
              help="Share of requests that must meet every SLO (else exit 1).")
@click.option("--api-key-env", default=None, metavar="VAR", help="Environment variable holding the API key.")
@click.option("--api", type=click.Choice(["chat", "completions"]), default="chat", show_default=True)
@click.option("--prompts", default=None, metavar="FILE", help='JSONL dataset ("..." or {"prompt": "..."} per line) '
              "instead of synthetic prompts (speculative acceptance needs real text).")
@click.option("--shared-prefix", is_flag=True, help="Send one prompt to all requests (prefix cache warm).")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds one request may take.")
@click.option("--metrics-interval", type=float, default=1.0, show_default=True,
              help="Read /metrics this often during the run (KV usage peak); 0: only before and after.")
@click.option("--prefill", "prefill", multiple=True, metavar="URL",
              help="P/D: a prefill engine behind the router URL (repeat per instance); with --decode, the probe "
                   "reads their /metrics around the run and tells whether KV moves (KVTransfer).")
@click.option("--decode", "decode", multiple=True, metavar="URL", help="P/D: a decode engine behind the router URL "
              "(repeat per instance).")
@click.option("--output", "-o", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True)
def probe(url, spec, preset, model, requests_, concurrency, input_len, output_len, warmup, slo, min_goodput,
          api_key_env, api, prompts, shared_prefix, timeout, metrics_interval, prefill, decode, output):
    """Probe a live OpenAI-compatible endpoint: stages, TTFT/TPOT/ITL/e2e percentiles, goodput, invariants,
    engine counters (README: gpustack-k3 probe). URL a P/D router with --prefill and --decode: also whether KV
    moves from prefill to decode (exit 1 when it does not)."""
    from gpustack_k3.probe.client import base_url, run_probe
    from gpustack_k3.probe.core import ProbeConfig, parse_slo

    if slo is None:
        not_applicable({"min_goodput": "--min-goodput"}, "without --slo (goodput counts the requests that meet it)",
                       "add --slo, or drop it")
    try:
        base = base_url(url)
        served, seqs, warm = _from_spec(spec, preset)
        data, dataset = (None, "synthetic") if prompts is None else _prompts(prompts)
        cfg = ProbeConfig(requests=requests_, concurrency=concurrency, input_len=input_len, output_len=output_len,
                          warmup=warmup if warmup is not None else (warm.requests if warm is not None else 2),
                          slo=parse_slo(slo), min_goodput=min_goodput, model=model or served, api=api,
                          shared_prefix=shared_prefix, prompts=data, dataset=dataset, planned_concurrency=seqs,
                          request_timeout_s=timeout, metrics_interval_s=metrics_interval).check()
        key = api_key_from_env(api_key_env)
        if bool(prefill) != bool(decode):
            given, other = ("--prefill", "--decode") if prefill else ("--decode", "--prefill")
            raise InputError(other, f"{given} was given without {other}",
                             f"give both the prefill and the decode engines behind the router ({other} URL)")
        sides = {"prefill": tuple(base_url(u, "--prefill") for u in prefill),
                 "decode": tuple(base_url(u, "--decode") for u in decode)}
    except InputError as exc:
        fail_input(exc)
    say = (lambda m: click.echo(f"  {m}", err=True)) if output == "text" and sys.stderr.isatty() else None
    rep = run_probe(base, cfg, api_key=key, on_progress=say, **sides)
    d = rep.to_dict()
    if output != "text":
        from gpustack_k3.cli.common import emit

        emit(d, output)
    else:
        click.echo(render_text(d))
    if rep.exit_code == EXIT_INPUT:
        click.echo(f"error: {d['reason']}", err=True)
    return rep.exit_code   # cli/main.py exits with it


def _row(label: str, dist: dict | None) -> str:
    if not dist or not dist.get("n"):
        return f"  {label:<14} {'-':>10} {'-':>10} {'-':>10} {'-':>10} {0:>6}"
    low = set(dist.get("unsupported") or ())
    cells = [f"{dist[k]:>9.1f}{'*' if k in low else ' '}" for k in ("p50", "p90", "p99")]
    return f"  {label:<14} {' '.join(cells)} {dist['max']:>10.1f} {dist['n']:>6}"


def _engine_lines(d: dict) -> list[str]:
    """The engine counters over the run, one line (none without counters)."""
    m = d.get("metrics")
    if not m:
        return []
    kv = m.get("kv_usage") or {}
    parts = [f"preemptions {m['preemptions']:g}" if m.get("preemptions") is not None else None,
             f"KV usage peak {kv['peak']:.0%}" if kv.get("peak") is not None else None,
             f"KV transfer failures {m['kv_transfer_failures']:g}" if m.get("kv_transfer_failures") is not None else None]
    acc = d.get("spec_acceptance")
    if acc:
        parts.append(f"spec acceptance length {acc['length']:.2f} on {acc['dataset']}")
    return ["engine counters over the run: " + ", ".join(p for p in parts if p)]


def render_text(d: dict) -> str:
    """The report for a terminal: the same figures as the JSON, fewer details."""
    out = [f"probe {d['endpoint']}: engine {d.get('engine') or 'unknown'}, model {d.get('model') or '?'}"]
    out.append("stages: " + ", ".join(f"{s['name']} {'ok' if s['ok'] else 'FAILED'}" for s in d["stages"]))
    if not d.get("usable"):
        out.append(f"unusable: {d.get('reason')}")
        return "\n".join(out)
    inp = d.get("input_tokens") or {}
    out.append(f"run: {d['requests']} requests at concurrency {d['concurrency']}, dataset {d['dataset']}, "
               f"input {inp.get('mean', '?')} tokens (asked {d.get('input_len') or 'dataset'}), output {d['output_len']} tokens")
    w = d.get("warmup")
    if w:
        first = "-" if w["first_ttft_ms"] is None else f"{w['first_ttft_ms']:.1f} ms"
        out.append(f"warm-up (not in the figures below): {w['completed']}/{w['requests']} requests in "
                   f"{w['seconds']:.2f} s, first TTFT {first}")
    out.append(f"  {'ms':<14} {'p50':>10} {'p90':>10} {'p99':>10} {'max':>10} {'n':>6}")
    for label, key in (("TTFT", "ttft_ms"), ("TTFT content", "ttft_content_ms"), ("TPOT", "tpot_ms"),
                       ("ITL", "itl_ms"), ("e2e latency", "e2el_ms")):
        out.append(_row(label, d.get(key)))
    if any((d.get(k) or {}).get("unsupported") for k in ("ttft_ms", "tpot_ms", "e2el_ms")):
        out.append("  * the sample count cannot support this percentile (it is at or near the maximum)")
    tput = d.get("output_tokens_per_s")
    out.append(f"output: {d['output_tokens']} tokens in {d['wall_s']:.2f} s = "
               f"{'-' if tput is None else f'{tput:.1f}'} tok/s; {d['completed']} completed, {d['errors']} failed")
    g = d.get("goodput")
    if g:
        slo = ", ".join(f"{k} <= {v:g}" for k, v in g["slo"].items())
        out.append(f"goodput: {g['good']}/{g['requests']} ({g['ratio']:.1%}) met {slo} (required {g['min_ratio']:.0%})")
    for inv in d.get("invariants") or []:
        extra = (f" {inv['output_tokens_per_s']:.1f} <= {inv['bound_tokens_per_s']:.1f} tok/s" if "bound_tokens_per_s" in inv
                 else f" client {inv['client_tokens']} <= engine {inv['engine_tokens']:g} tokens")
        out.append(f"invariant {inv['name']}: {'ok' if inv['ok'] else 'FAILED'}{extra}")
    out += _engine_lines(d)
    if d.get("kv_transfer"):
        from gpustack_k3.probe.kvtransfer import render_text as kv_text

        out += kv_text(d["kv_transfer"])
    for f in d.get("findings") or []:
        out.append(f"{f['severity'].upper()} [{f['rule']}] {f['message']}")
        out.append(f"    fix: {f['fix']}")
    return "\n".join(out)
