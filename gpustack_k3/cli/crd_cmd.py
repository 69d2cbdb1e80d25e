"""``gpustack-k3 crd``: print the K3Deployment CustomResourceDefinition (generated, with CEL rules)."""
from __future__ import annotations

import click

from gpustack_k3.cli._click import Command


@click.command("crd", cls=Command)
@click.option("--output", "-o", type=click.Choice(["text", "yaml", "json"]), default=None,
              help="Output format (default: yaml for the CRD, text for --rules; text of the CRD is its YAML).")
@click.option("--rules", "list_rules", is_flag=True,
              help="List the CEL rules (catalog rule id, field, message) and the hard errors left to the operator.")
def crd(output: str | None, list_rules: bool) -> None:
    """Print the K3Deployment CRD: schema from the deployment model, CEL rules from the rule catalog.

    Apply it with `gpustack-k3 crd | kubectl apply -f -` (the chart and manifests/install.yaml carry
    the same file)."""
    from gpustack_k3.crd.manifest import crd_manifest, crd_yaml

    if list_rules:
        from gpustack_k3.crd.cel import NOT_IN_CEL

        schema = crd_manifest()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        rules = [("root", v) for v in schema.get("x-kubernetes-validations", [])]
        rules += [("spec", v) for v in schema["properties"]["spec"].get("x-kubernetes-validations", [])]
        if output in ("json", "yaml"):
            from gpustack_k3.cli.common import emit

            emit({"cel": [{"on": on, **v} for on, v in rules],
                  "not_in_cel": [{"rule": rid, "why": why} for rid, why in NOT_IN_CEL.items()]}, output)
            return
        for _, v in rules:
            click.echo(v["message"])
        click.echo("")
        click.echo("hard errors not expressed in CEL (enforced by the operator's validation):")
        for rid, why in NOT_IN_CEL.items():
            click.echo(f"  {rid}: {why}")
        return
    if output == "json":
        import json

        click.echo(json.dumps(crd_manifest(), indent=2))
    else:
        click.echo(crd_yaml(), nl=False)
