"""CLI: ``coldstart LOG|- [--spec FILE | --preset N]`` (phase timeline, engine memory figures, plan check)
and ``doctor LOG|-`` (known problems in a log).

Exit codes: 0 ok; 1 status failed (coldstart), an error finding (doctor) or a refused spec; 2 unusable input
(no such log, a binary or empty one, a log without a line of either engine: both commands alike).
"""
from __future__ import annotations

import sys   # stdin.buffer
from typing import BinaryIO

import click

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM, EXIT_REFUSED, MIB
from gpustack_k3.cli._click import Command
from gpustack_k3.errors import InputError, Refused

CHUNK = MIB


def _open(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise _bad(f"LOG: no such file {path!r}; give a log file path or '-' for stdin")
    except IsADirectoryError:
        raise _bad(f"LOG: {path!r} is a directory; give a log file path or '-' for stdin")
    except PermissionError:
        raise _bad(f"LOG: cannot read {path!r} (permission denied)")
    except OSError as exc:
        raise _bad(f"LOG: cannot read {path!r}: {exc.strerror or exc}")


def _bad(msg: str) -> InputError:
    """Unusable input (exit 2): ``WHERE: message`` when the message starts with a one-word place."""
    where, sep, rest = msg.partition(": ")
    return InputError(where, rest) if sep and " " not in where else InputError("", msg)


def _track(path: str, engine: str | None, year: int | None):
    from gpustack_k3.coldstart import ColdStartTracker  # lazy: keep CLI start-up fast

    tracker = ColdStartTracker(engine=None if engine in (None, "auto") else engine, year=year)
    f = _open(path)
    head = b""
    try:
        while True:
            try:
                chunk = f.read(CHUNK)
            except OSError as exc:
                raise _bad(f"LOG: read failed for {path!r}: {exc.strerror or exc}")
            if not chunk:
                break
            tracker.feed(chunk)
            if len(head) < 65536:
                head += chunk[:65536 - len(head)]
                if len(head) >= 65536:
                    _refuse_binary(path, head, tracker)   # early: /dev/zero or a disk image never ends
    finally:
        if f is not sys.stdin.buffer:
            f.close()
    tracker.finish()
    if tracker.bytes_seen == 0:
        raise _bad(f"LOG: {'stdin' if path == '-' else repr(path)} is empty; nothing to read")
    _refuse_binary(path, head, tracker)
    return tracker


def _refuse_binary(path: str, head: bytes, tracker) -> None:
    if b"\x00" in head and not tracker.report().last.phases:
        raise _bad(f"LOG: {'stdin' if path == '-' else repr(path)} is not a text log (NUL bytes: binary, or "
                      "UTF-16? engines write UTF-8); give the container's log as `kubectl logs` prints it")


_engine_opt = click.option("--engine", type=click.Choice(["auto", ENGINE_VLLM, ENGINE_SGLANG]), default="auto",
                           show_default=True, help="Engine that wrote the log (auto-detected by default).")
_output_opt = click.option("--output", "-o", type=click.Choice(["text", "json", "yaml"]), default="text",
                           show_default=True, help="Timeline for people, or JSON/YAML for programs.")
_year_opt = click.option("--year", type=click.IntRange(1970, 9999), default=None,
                         help="Year for vLLM timestamps, which print none (default: this year).")


def _planned(spec: str | None, preset: str | None) -> dict | None:
    """The planner's figures for SPEC or --preset (None when neither is given)."""
    if spec is None and preset is None:
        return None
    from gpustack_k3.cli.common import build_launch_or_exit
    from gpustack_k3.coldstart.plancheck import planned_figures

    launch, _findings, plan, _doc = build_launch_or_exit(spec, preset, warnings=False)
    if plan is None:
        return {"engine": launch.engine, "figures": {}, "note": "the planner has no figures for this "
                "engine, model and GPU (plan unavailable); nothing to compare"}
    return {"engine": plan.engine, "figures": planned_figures(plan), "note": None}


@click.command("coldstart", cls=Command)
@click.argument("log", metavar="LOG|-")
@_engine_opt
@_output_opt
@_year_opt
@click.option("--spec", "spec", metavar="FILE", default=None,
              help="Deployment spec the log was started from: adds plan_check (planned vs engine figures).")
@click.option("--preset", default=None, help="A preset instead of --spec (see `gpustack-k3 presets`).")
def coldstart(log: str, engine: str, output: str, year: int | None, spec: str | None, preset: str | None) -> None:
    """Read an engine log (file or '-') and show cold-start phases with timings."""
    if spec is not None and preset is not None:
        raise _bad("--spec and --preset: give one of them, not both")
    planned = _planned(spec, preset)   # refuse a bad spec before reading a long log
    tracker = _track(log, engine, year)
    warnings = _engine_warnings(tracker, engine)
    _refuse_no_engine(tracker, log, engine, warnings)
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    rep = tracker.report()
    d = rep.to_dict()
    if warnings:
        d["warnings"] = warnings
    if planned is not None:
        from gpustack_k3.coldstart.plancheck import plan_check

        check = plan_check(planned["figures"], d["memory"])
        if planned["note"]:
            check["note"] = planned["note"]
        elif rep.engine and rep.engine != planned["engine"]:
            check["note"] = f"the log is {rep.engine}'s but the spec plans {planned['engine']}"
        d["plan_check"] = check
    if output != "text":
        from gpustack_k3.cli.common import emit

        emit(d, output)
    else:
        from gpustack_k3.coldstart.render import render_plan_check, render_report
        click.echo(render_report(rep))
        if "plan_check" in d:
            click.echo(render_plan_check(d["plan_check"]))
    return EXIT_REFUSED if rep.status == "failed" else 0   # the report is shown: only the exit code is left


def _refuse_no_engine(tracker, log: str, engine: str | None, warnings: list[str]) -> None:
    """A log without one line of the engine (or of either engine) is not an engine log: unusable input for
    ``coldstart`` and ``doctor`` alike."""
    if tracker.state.engine_lines == 0:
        what = f"no line of {engine}" if engine not in (None, "auto") else "no line of a vLLM or SGLang engine"
        hint = (" (" + warnings[0] + ")") if warnings else \
            "; give the engine container's log as `kubectl logs`/`docker logs` prints it"
        raise _bad(f"LOG: {what} in {'stdin' if log == '-' else repr(log)}{hint}")


def _engine_warnings(tracker, engine: str | None) -> list[str]:
    """--engine that the log contradicts: lines that identify another engine."""
    other = tracker.state.other_engine_lines
    if engine in (None, "auto") or not other:
        return []
    return [f"--engine {engine} but the log has {n} line(s) of {e}; read it with --engine auto (or --engine {e})"
            for e, n in sorted(other.items())]


@click.command("doctor", cls=Command)
@click.argument("log", metavar="LOG|-")
@_engine_opt
@_output_opt
def doctor(log: str, engine: str, output: str) -> None:
    """Find known problems (docs/sources.md, kernels and the log's warnings) in an engine log."""
    from gpustack_k3.core.findings import has_errors

    # no --year: the findings carry no time, so the year of vLLM's year-less stamps never shows (coldstart has it)
    tracker = _track(log, engine, None)
    _refuse_no_engine(tracker, log, engine, _engine_warnings(tracker, engine))
    findings = tracker.findings()
    if output != "text":
        from gpustack_k3.cli.common import emit, findings_payload

        emit(findings_payload(findings), output)   # one result object: {"ok", "findings"}
    else:
        from gpustack_k3.coldstart.render import render_findings
        click.echo(render_findings(findings))
    if has_errors(findings):
        raise Refused(findings, shown=True)
