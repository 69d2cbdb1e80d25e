"""The real check of the SGLang topologies (tier engine_oracle): both SGLang presets are rendered for Kubernetes and
every role's engine argv, as each pod of the LWS runs it (the container's argv plus the per-pod flags the pod's
shell computes, for the leader and a worker), is judged by the pinned release's own validation code
(tools/engine_oracle: ``prepare_server_args`` + ``resolve_once()`` of the wheel, on CPU with the doubles listed in
gpustack_k3/oracle/engine_side/doubles.py). Each must be ``accepted``, or ``not_decidable`` for a reason listed below."""
from __future__ import annotations

import copy
import shlex

import pytest

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.launch import build_topology_launch
from gpustack_k3.render.lws import SHELL, lws_objects, pod_templates, render_topology

pytestmark = pytest.mark.engine_oracle

PRESETS = ("kimi-k3-b300-1p1d-sglang", "dsv41-flash-gb300-8p1d-sglang")
# Every rendered line must be decided and accepted: the Kimi-K3 DCP path's FlashInfer signature probe is answered
# from the pinned FlashInfer wheel's source (gpustack_k3/oracle/engine_side/doubles.py PROBED_SIGNATURES), and the oracle's
# DeepSeek-V4.1-Flash stand-in carries the fields SGLang's DeepseekV4 branch reads (gpustack_k3/oracle/models.py).
ENV = {api.LWS_ENV_LEADER_ADDRESS: "x-decode-0.x-decode.llm", api.LWS_ENV_GROUP_SIZE: "8"}


def pod_argv(container: dict, worker_index: int) -> list[str]:
    """The engine argv a pod runs, without the command: the container's argv, plus what its /bin/sh entrypoint
    appends, evaluated by the real shell (``printf`` in place of the engine)."""
    import subprocess

    if container["command"][:2] != [SHELL, "-c"]:
        argv = [*container["command"], *container["args"]]
    else:
        script = container["command"][2].replace('exec "$0" "$@"', 'printf "%s\\n" "$0" "$@"', 1)
        out = subprocess.run([SHELL, "-c", script, *container["args"]], capture_output=True, text=True, check=True,
                             env={**ENV, api.LWS_ENV_WORKER_INDEX: str(worker_index), "PATH": "/usr/bin:/bin"})
        argv = out.stdout.split("\n")[:-1]
    i = argv.index("sglang.launch_server")            # python3 -m sglang.launch_server ARGS
    return argv[i + 1:]


def lines(preset: str) -> list[tuple[str, str, list[str], int]]:
    doc = DeploymentDocument.model_validate(copy.deepcopy(load_catalog().presets[preset].document))
    topo = build_topology_launch(doc)[0]
    out = []
    for role, spec in lws_objects(render_topology(topo, doc, namespace="llm")):
        r = topo.role(role)
        for which, tpl in pod_templates(spec):
            c = tpl["spec"]["containers"][0]
            index = 1 if which == "workerTemplate" and r.pods_per_instance > 1 else 0
            out.append((role, which, pod_argv(c, index), r.gpus_per_pod))
    return out


@pytest.fixture(scope="module")
def oracle(oracles):
    return oracles("sglang-0.5.23")   # the session's worker for the release (tests/engine_oracle/conftest.py)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_rendered_sglang_role_is_accepted_by_the_release(oracle, preset):
    doc = load_catalog().presets[preset].document
    hardware = doc["spec"]["hardware"]["gpuType"]
    judged = []
    for role, which, argv, gpus in lines(preset):
        ans = oracle.judge_line(argv, {}, hardware, gpus)
        judged.append((role, which, ans["verdict"], ans.get("reason")))
        assert ans["verdict"] == "accepted", f"{preset} {role} {which}: {ans}\n{shlex.join(argv)}"
    assert {r for r, *_ in judged} == {"prefill", "decode"}
