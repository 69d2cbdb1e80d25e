"""``gpustack-k3 operator run``: the click command group the main CLI registers.

Same entry point and flags in the chart's Deployment and on a laptop with a kubeconfig."""
from __future__ import annotations

import click

from gpustack_k3.cli._click import Group


@click.group("operator", cls=Group)
def operator() -> None:
    """Run the K3Deployment operator."""


@operator.command("run")
@click.option("--namespace", "namespaces", multiple=True, metavar="NS",
              help="Watch this namespace (repeatable); default: all namespaces.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port of /metrics, /healthz and /readyz (0: any free port).")
@click.option("--metrics-host", default="0.0.0.0", show_default=True, help="Address the metrics port binds to.")
@click.option("--resync", "resync_s", type=click.FloatRange(min=1.0), default=300.0, show_default=True,
              help="Seconds between full resyncs (they write nothing when the cluster matches).")
@click.option("--leader-elect/--no-leader-elect", default=False, show_default=True,
              help="Take a coordination.k8s.io Lease so that only one replica acts.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="Kubeconfig file; default: in-cluster service account, else ~/.kube/config.")
@click.option("--workers", type=click.IntRange(1, 64), default=4, show_default=True, help="Concurrent reconciles.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True)
def run_cmd(namespaces: tuple[str, ...], metrics_port: int, metrics_host: str, resync_s: float, leader_elect: bool,
            kubeconfig: str | None, workers: int, log_level: str) -> None:
    """Reconcile K3Deployment resources into running workloads."""
    import logging

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from gpustack_k3.operator.controller import run

    from gpustack_k3.errors import InputError

    try:
        return run(list(namespaces), metrics_port, resync_s, leader_elect, kubeconfig,
                   metrics_host=metrics_host, workers=workers)   # its exit code: cli/main.py exits with it
    except RuntimeError as e:  # missing hooks, unusable kubeconfig: say so, no traceback
        raise InputError("operator run", str(e)) from None
    except Exception as e:
        from kubernetes.config import ConfigException
        if isinstance(e, (ConfigException, UnicodeError)) or type(e).__module__.startswith("yaml"):
            raise InputError("--kubeconfig", f"no usable cluster configuration: {e}",
                             "pass --kubeconfig FILE or run in a pod with a service account") from None
        raise
