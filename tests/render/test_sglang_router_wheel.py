"""The SGLang router's own parser reads the arguments we render (tier engine_wheels): the pinned sglang-router
wheel (catalog/data/routing.yaml ``sglang_router``; .ci/setup_engine_wheels.sh downloads it, nothing is installed)
is unpacked and its ``RouterArgs`` parses the rendered router container's args exactly as
``sglang_router.launch_router.parse_router_args`` does (launch_router.py:98-100@0.3.2:
``RouterArgs.add_cli_args(parser, use_router_prefix=False)`` then ``RouterArgs.from_cli_args``), in a child
process. The wheel's Rust extension loads on x86-64 Linux; nothing else of the router is imported (its launcher
imports aiohttp/fastapi/setproctitle, which the router image has and this tier need not)."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
import zipfile

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.launch import build_topology_launch
from gpustack_k3.render.lws import render_document
from gpustack_k3.render.router import bootstrap_port, sglang_router_pin
from tests.render.test_sglang_router import PRESETS, _router
from tests.support import tiers

pytestmark = pytest.mark.engine_wheels

PARSE = """
import argparse, json, sys
from sglang_router.router_args import RouterArgs
parser = argparse.ArgumentParser()
RouterArgs.add_cli_args(parser, use_router_prefix=False)
ra = RouterArgs.from_cli_args(parser.parse_args(json.loads(sys.argv[1])), use_router_prefix=False)
print(json.dumps({"pd": ra.pd_disaggregation, "prefill": ra.prefill_urls, "decode": ra.decode_urls,
                  "policies": [ra.prefill_policy, ra.decode_policy], "port": ra.port}))
"""


@pytest.fixture(scope="module")
def router_pkg(tmp_path_factory):
    wheel = tiers.engine_wheel("sglang_router", sglang_router_pin().version)
    dest = tmp_path_factory.mktemp("sglang-router")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(dest)
    return dest


def parse(pkg, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PARSE, json.dumps(args)], env={"PYTHONPATH": str(pkg)},
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("preset", PRESETS)
def test_the_routers_own_parser_reads_the_rendered_arguments(router_pkg, preset):
    doc = DeploymentDocument.model_validate(copy.deepcopy(load_catalog().presets[preset].document))
    topo = build_topology_launch(doc)[0]
    _dep, c = _router(render_document(doc, namespace="llm", topo=topo))
    out = parse(router_pkg, c["args"])
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    prefill, decode = topo.role("prefill"), topo.role("decode")
    assert got["pd"] is True and got["port"] == 8000
    assert got["prefill"] == [[f"http://{doc.metadata.name}-prefill-{g}.llm.svc:{prefill.leader.port}",
                               bootstrap_port(prefill)] for g in range(prefill.instances)]
    assert got["decode"] == [f"http://{doc.metadata.name}-decode-{g}.llm.svc:{decode.leader.port}"
                             for g in range(decode.instances)]
    # left out: power_of_two only where there are two decode instances to choose from (Routing.decode_policy_for)
    assert got["policies"] == ["cache_aware", "power_of_two" if decode.instances >= 2 else "round_robin"]


def test_the_routers_parser_refuses_what_the_renderer_refuses(router_pkg):
    """The policies the renderer refuses are the ones the parser's ``choices`` lack (the pin lists them)."""
    base = ["--pd-disaggregation", "--prefill", "http://p:8000", "8998", "--decode", "http://d:8000"]
    assert parse(router_pkg, [*base, "--prefill-policy", "consistent_hash"]).returncode == 2
    assert parse(router_pkg, [*base, "--decode-policy", "bucket"]).returncode == 2
    assert parse(router_pkg, [*base, "--prefill-policy", "bucket"]).returncode == 0
    assert "Invalid bootstrap port" in parse(router_pkg, [*base[:3], "x", *base[4:]]).stderr
