"""core/argv/roles.py: one engine command line -> its document and its topology role, read by the release's parser
(the reader check-args uses), for vLLM and SGLang lines."""
from __future__ import annotations

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.core.argv.roles import argv_to_data, line_role, parse_env, side_role, take_per_pod_ints
from gpustack_k3.errors import InputError

IO = {"document_of": lambda data, where: DeploymentDocument.model_validate(data)}
SGL = ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "16", "--attn-dp-size", "16",
       "--ep-size", "16", "--enable-dp-lm-head"]


def test_an_sglang_decode_line_is_a_decode_role_with_the_release_defaults():
    _, role, refusals = line_role(None, None, "sglang", "0.5.23", None, "b300",
                                  SGL + ["--disaggregation-mode", "decode", "--nnodes", "2"], (), None, None, None, **IO)
    assert refusals == []
    assert (role.kind, role.pd_mode, role.transfer_backend, role.bootstrap_port) == ("decode", "decode", "mooncake", 8998)
    assert (role.nnodes, role.pods) == (2, 2)
    # one pod's GPUs: TP 16 over --nnodes 2 (DP attention adds none): data_parallel_controller.py:694-703@0.5.23
    assert role.resolved.spec.hardware.gpuCount == 8
    assert role.resolved.value("sglang.attnDpSize") == 16 and role.resolved.value("parallel.ep") == 16


def test_the_node_rank_may_be_a_per_pod_expression():
    argv = SGL + ["--nnodes", "2", "--node-rank", "$LWS_WORKER_INDEX", "--dist-init-addr", "$LWS_LEADER_ADDRESS:20000"]
    rest, seen = take_per_pod_ints("sglang", "0.5.23", argv)
    assert seen == {"node_rank_flag"} and "--node-rank" not in rest and "--dist-init-addr" in rest
    _, role, refusals = line_role(None, None, "sglang", "0.5.23", None, "b300", argv, (), None, None, None, **IO)
    assert refusals == [] and role.nnodes == 2
    _, role, refusals = line_role(None, None, "sglang", "0.5.23", None, "b300", SGL + ["--node-rank", "1"], (), None,
                                  None, None, **IO)
    assert refusals == []


def test_a_vllm_line_plays_the_role_its_kv_role_says():
    argv = ["vllm", "serve", "/models/Kimi-K3", "--kv-transfer-config",
            '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}']
    _, role, _ = line_role(None, None, "vllm", "0.33.0", None, "b300", argv, (), None, None, 8, **IO)
    assert role.kind == "prefill" and role.pd_mode is None and role.kv_transfer["kv_role"] == "kv_producer"


def test_side_role_splits_a_pasted_line_and_names_its_side():
    _, role, refusals = side_role("decode", "sglang", "0.5.23", "kimi-k3", "b300",
                                  "python3 -m sglang.launch_server --model-path /models/Kimi-K3 --tp-size x", (), 1,
                                  None, **IO)
    assert role.prefix == "decode" and refusals and refusals[0].where.startswith("--decode ")
    with pytest.raises(InputError) as exc:
        side_role("prefill", "sglang", "0.5.23", None, "b300", "'unclosed", (), 1, None, **IO)
    assert exc.value.where == "--prefill"


def test_bad_input_names_its_place():
    with pytest.raises(InputError) as exc:
        parse_env(["NOEQUALS"])
    assert "NOEQUALS" in exc.value.where
    with pytest.raises(InputError) as exc:
        argv_to_data("sglang", "9.9.9", None, "b300", 8, (), "x", SGL)
    assert exc.value.where == "--engine-version"
