"""`gpustack-k3 run`: start the engine of a valid spec on Docker or as a local process and follow its
cold start live; `run status|logs|stop NAME` for a detached Docker run.

Once Ready it prints the plan check (the planner's KV figures next to the engine's own, drift in percent).

Exit codes: 0 Ready (or, attached, a clean stop), 1 refused spec or a failed start (the failed phase and
root cause are printed), 2 unusable input or runtime unavailable, 130 interrupted.

A document is started exactly as ``render --target docker`` renders it (render/targets.py ``channel_launch``): a
topology the target cannot run (P/D roles, a role spanning pods, several roles) is refused naming the field, before
anything starts; one single-pod role runs as that role's engine.
"""
from __future__ import annotations

import sys   # stdout.buffer (run logs)
import time

import click

from gpustack_k3.api.v1alpha1.constants import EXIT_INTERRUPTED
from gpustack_k3.cli._click import Group
from gpustack_k3.cli.common import (
    EXIT_REFUSED,
    emit,
    exit_refused,
    load_document,
    not_applicable,
    outcome,
    output_option_of,
    print_findings_text,
)

SUBCOMMANDS = ("status", "logs", "stop")


class _RunGroup(Group):
    """`run SPEC ...` starts; `run status|logs|stop NAME` manage a detached run."""

    def parse_args(self, ctx, args):
        if not args or args[0] not in (*SUBCOMMANDS, "start") and args[0] not in ("-h", "--help"):
            args = ["start", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_RunGroup)
def run():
    """Start the engine on Docker or locally and follow its cold start (see `run start --help`)."""


def _build(spec, preset, strict, runtime: str = "docker"):
    """(launch, plan, doc) of what ``runtime`` would start; refusals exit 1 naming the field, unusable input 2."""
    from gpustack_k3.cli.common import model_arch
    from gpustack_k3.core.launch import Refused
    from gpustack_k3.render.targets import channel_launch

    doc = load_document(spec, preset)
    arch = model_arch(None, doc.spec.model)   # the document's model config decides (cli/model_source.py)
    try:
        with outcome("nothing was started"):
            launch, findings, plan = channel_launch(doc, runtime, strict=strict, arch=arch)
    except Refused as exc:
        exit_refused(exc.findings, "refused: the spec has errors; nothing was started")
    warn = [f for f in findings if f.severity == "warning"]
    if warn:
        print_findings_text(warn, err=True)
    return launch, plan, doc


@run.command("start")
@click.argument("spec", required=False)
@click.option("--preset")
@click.option("--runtime", type=click.Choice(["docker", "local"]), default="docker", show_default=True)
@click.option("--detach", is_flag=True, help="Docker: return once Ready and leave the container running.")
@click.option("--dry-run", is_flag=True, help="Print what would be started (docker params or argv) and exit.")
@click.option("--host-gpus/--no-host-gpus", default=True, show_default=True,
              help="Docker: request the spec's GPUs from the daemon (off on hosts without GPUs).")
@click.option("--clamp-ulimits", is_flag=True, help="Docker: lower ulimits to what this host allows.")
@click.option("--exit-when-ready", is_flag=True, help="Local: stop the engine and exit 0 once Ready.")
@click.option("--strict", is_flag=True)
@click.option("--output", "-o", type=click.Choice(["text", "json", "yaml"]), default=None,
              help="--dry-run: json (default), yaml, or text (the command line); a start: the final cold-start "
                   "report as json/yaml on stdout (text: progress and outcome on stderr only).")
def start(spec, preset, runtime, detach, dry_run, host_gpus, clamp_ulimits, exit_when_ready, strict, output):
    """Start SPEC (or --preset NAME) and follow its cold start to Ready (then warm, with spec.startup.warmup)."""
    if dry_run:
        not_applicable({"detach": "--detach", "clamp_ulimits": "--clamp-ulimits", "exit_when_ready": "--exit-when-ready"},
                       "with --dry-run (nothing is started)")
    not_applicable({"detach": "--detach", "clamp_ulimits": "--clamp-ulimits", "host_gpus": "--host-gpus/--no-host-gpus"}
                   if runtime == "local" else {"exit_when_ready": "--exit-when-ready"}, f"to --runtime {runtime}")
    launch, plan, doc = _build(spec, preset, strict, runtime)
    # the warm-up asks for the spec's served name; without one the engine serves its model path (probe: first listed)
    warmup = (doc.spec.startup.warmup, doc.spec.model.servedModelName) if doc.spec.startup.warmup else None
    if dry_run:
        if runtime == "docker":
            from gpustack_k3.render.docker import docker_run_line, docker_run_params

            obj = {"params": docker_run_params(launch, gpus=host_gpus, doc=doc),
                   "docker_run": docker_run_line(launch, gpus=host_gpus, doc=doc)}
        else:
            obj = {"argv": launch.argv, "env": launch.env, "host": launch.host, "port": launch.port}
        if output == "text":
            import shlex

            click.echo(obj["docker_run"] if runtime == "docker" else " ".join(
                ["env", *(shlex.quote(f"{k}={v}") for k, v in launch.env.items()), shlex.join(launch.argv)]))
        else:
            emit(obj, output or "json")
        return
    _OUT["format"] = output or "text"
    try:
        return _docker(launch, plan, detach, host_gpus, clamp_ulimits, warmup, doc) if runtime == "docker" else \
            _local(launch, plan, exit_when_ready, warmup)
    except KeyboardInterrupt:
        click.echo("interrupted: engine stopped", err=True)
        return EXIT_INTERRUPTED


_OUT = {"format": "text"}


def _emit_report(launch, code: int, report: dict) -> None:
    """-o json|yaml of a start: the final cold-start report on stdout."""
    if _OUT["format"] in ("json", "yaml"):
        emit({"ok": code == 0, "exit_code": code, "name": launch.name, "coldstart": report}, _OUT["format"])


def _print_outcome(report: dict) -> None:
    if report.get("status") == "failed":
        f = report.get("failure") or {}
        who = " ".join(x for x in (f.get("rank") and f"[{f['rank']}]", f.get("error")) if x)
        click.echo(f"FAILED in phase {report.get('failed_phase')}: {who + ': ' if who else ''}{report.get('reason')}",
                   err=True)
        for line in f.get("context") or []:
            click.echo(f"  after: {line}", err=True)


def _print_plan_check(report: dict, plan) -> None:
    """The planner's figures next to the engine's own, once the engine printed them."""
    from gpustack_k3.coldstart.plancheck import plan_check, planned_figures
    from gpustack_k3.coldstart.render import render_plan_check

    if plan is None or not report.get("memory"):
        return
    check = plan_check(planned_figures(plan), report["memory"])
    if check["figures"]:
        click.echo(render_plan_check(check), err=True)


def _docker(launch, plan, detach, host_gpus, clamp_ulimits, warmup=None, doc=None) -> int:
    from gpustack_k3.render.docker import docker_run_params
    from gpustack_k3.runtime.docker import run_launch

    # the Docker target's params, the document's labels included (render --target docker renders the same)
    code, result, report = run_launch(launch, detach=detach, host_has_gpus=host_gpus, clamp_ulimits=clamp_ulimits,
                                      warmup=warmup, params=docker_run_params(launch, doc=doc))
    # DockerRuntimeError: an OperationalError (exit 2)
    d = report.to_dict()
    if not result.ready:
        _print_outcome(d)
        if getattr(result, "exit_code", None) is not None:
            click.echo(f"container exited with code {result.exit_code}", err=True)
        for line in (getattr(result, "last_lines", None) or [])[-10:]:
            click.echo(f"  | {line}", err=True)
    else:
        click.echo(f"{launch.name}: Ready ({d.get('total_seconds')} s)", err=True)
        _print_plan_check(d, plan)
        if result.warm is not None and not result.warm.get("ok") and detach:
            code = EXIT_REFUSED     # detached: the caller is told that the deployment is not warm
    _emit_report(launch, code, d)
    return code


def _local(launch, plan, exit_when_ready: bool, warmup=None) -> int:
    from gpustack_k3.coldstart import ColdStartTracker
    from gpustack_k3.runtime.docker import LineTail, tracker_phase
    from gpustack_k3.errors import OperationalError
    from gpustack_k3.runtime.local import LocalProcess
    from gpustack_k3.runtime.progress import ProgressView

    tracker = ColdStartTracker(engine=launch.engine)
    view = ProgressView(label=launch.name)
    tail = LineTail()
    try:
        proc = LocalProcess(launch.argv, host=launch.host, port=launch.port, env=launch.env, on_output=tail.feed,
                            health_path="/health", tracker=tracker)
        proc.start()
    except OSError as exc:   # LocalRuntimeError is an OperationalError already (exit 2)
        raise OperationalError(f"cannot start {launch.argv[0]}: {exc.strerror or exc}") from None
    t0 = time.monotonic()
    follower = proc.follower
    try:
        deadline = t0 + launch.startup_budget_s
        while True:
            out = proc.wait_ready(min(2.0, max(0.1, deadline - time.monotonic())), interval_s=0.5)
            stalled = follower.check_stall()
            with follower.lock:
                view.update(time.monotonic() - t0, tracker_phase(tracker), tail.lines[-1] if tail.lines else None)
            if out.ready:
                view.finish(f"{launch.name}: Ready after {time.monotonic() - t0:.1f} s on {proc.base_url}")
                follower.wait_quiet()
                with follower.lock:
                    _print_plan_check(tracker.report().to_dict(), plan)
                break
            if out.exit_code is not None or stalled or time.monotonic() >= deadline:
                if out.exit_code is not None:
                    follower.join(5)   # the pipe ends with the process: read what it printed last
                with follower.lock:
                    if out.exit_code is not None:
                        tracker.process_exited(out.exit_code)
                    rep = tracker.finish().to_dict()
                why = (out.reason if out.exit_code is not None else rep.get("reason") if stalled
                       else f"not Ready within the {launch.startup_budget_s} s budget")
                view.finish(f"{launch.name}: start failed ({why})")
                _print_outcome(rep)
                _emit_report(launch, EXIT_REFUSED, rep)
                return EXIT_REFUSED
        warm_ok = True
        if warmup is not None:
            warm_ok = _warm(launch, proc.base_url, tracker, warmup, follower.lock)
        if exit_when_ready:
            code = 0 if warm_ok else EXIT_REFUSED
            with follower.lock:
                _emit_report(launch, code, tracker.report().to_dict())
            return code
        while proc.poll() is None:
            time.sleep(1.0)
        return 0 if proc.poll() == 0 else EXIT_REFUSED
    finally:
        proc.stop()


def _warm(launch, url: str, tracker, warmup, lock) -> bool:
    """spec.startup.warmup after Ready: the probe's requests, a ``warm`` phase in the tracker (under the log
    follower's ``lock``: it feeds the same tracker), one line."""
    from gpustack_k3.probe.warmup import describe, warm_up

    spec_warmup, served = warmup

    def on_phase(s, e, det) -> None:
        with lock:
            tracker.platform_event("warm", s, e, det)

    res = warm_up(url, spec_warmup, model=served, on_phase=on_phase)
    with lock:
        click.echo(f"{launch.name}: {describe(res, tracker)}", err=True)
    return bool(res.get("ok"))


@run.command("status")
@click.argument("name")
@output_option_of("text", "json", "yaml")
def status(name, output):
    """Status of a detached Docker run: container state, health, cold-start phase."""
    from gpustack_k3.runtime.docker import DockerRunner

    st = DockerRunner().status(name, tracker_factory=_tracker_factory)   # DockerRuntimeError: exit 2
    d = st.to_dict()
    if output != "text":
        emit(d, output)
    else:
        for k, v in d.items():
            click.echo(f"{k}: {v}")


def _tracker_factory():
    from gpustack_k3.coldstart import ColdStartTracker

    return ColdStartTracker()


@run.command("logs")
@click.argument("name")
@click.option("--follow", "-f", is_flag=True)
def logs(name, follow):
    """Print the engine log of a detached Docker run."""
    from gpustack_k3.runtime.docker import DockerRunner

    for chunk in DockerRunner().logs(name, follow=follow):   # DockerRuntimeError: exit 2
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()


@run.command("stop")
@click.argument("name")
@output_option_of("text", "json", "yaml")
def stop(name, output):
    """Stop and remove a detached Docker run."""
    from gpustack_k3.runtime.docker import DockerRunner

    st = DockerRunner().stop(name)   # DockerRuntimeError: exit 2
    if output != "text":
        emit(st.to_dict(), output)
    else:
        click.echo(f"{name}: {st.to_dict().get('state', 'stopped')}")
