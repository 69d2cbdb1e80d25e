"""The two false refusals the held-out differential of seed 31337 found on the merged code of 2026-12-04
(`python3 bench/oracle_differential.py --releases vllm-0.34.0 vllm-0.33.0 vllm-0.11.0 sglang-0.5.23 --lines 120
--pairs 20 --seed 31337 --explore 0.5`): each release accepted the line at config time, check-args refused it.

- vLLM 0.34.0: with --nnodes above 1 and no executor backend the release picks mp without comparing the world size
  with the node's GPUs (config/parallel.py:1157@0.34.0); 32 ranks per node on 8 GPUs then fail at launch, so only
  the runtime-only parallel-fits-node-at-launch may say so.
- SGLang 0.5.23: --dp-size N --enable-dp-attention is read as --attn-dp-size N with dp_size 1
  (arg_groups/parallel_hook.py:39-61@0.5.23), so the multi-node DP-replicas check does not apply."""
from __future__ import annotations

import json

from click.testing import CliRunner

from gpustack_k3.cli.main import cli

K3_LINE = ["/models/Kimi-K3", "--trust-remote-code", "--tensor-parallel-size", "8", "--max-model-len", "262144",
           "--prefill-context-parallel-size", "16", "--nnodes", "4", "--node-rank", "0"]


def _check(engine: str, version: str, argv: list[str]) -> tuple[int, dict]:
    res = CliRunner().invoke(cli, ["check-args", "--engine", engine, "--engine-version", version, "-o", "json", "--",
                                   *argv], catch_exceptions=False)
    return res.exit_code, json.loads(res.output)


def _errors(out: dict) -> set[str]:
    return {f["rule"] for f in out["findings"] if f["severity"] == "error"}


def test_vllm_multi_node_world_without_a_backend_is_no_config_time_refusal():
    code, out = _check("vllm", "0.34.0", K3_LINE)
    assert "parallel-fits-node" not in _errors(out)
    # the launch still fails: 128 ranks over 4 nodes are 32 workers on a node of 8 GPUs (runtime-only rule)
    assert "parallel-fits-node-at-launch" in _errors(out) and code == 1


def test_vllm_multi_node_world_that_fits_passes():
    line = [a if a != "16" else "1" for a in K3_LINE]   # PCP 1: 8 ranks over 4 nodes
    code, out = _check("vllm", "0.34.0", line)
    assert not {"parallel-fits-node", "parallel-fits-node-at-launch"} & _errors(out)


def test_vllm_one_node_world_above_the_gpus_stays_a_config_time_refusal():
    line = [a for a in K3_LINE if a not in ("--nnodes", "4", "--node-rank", "0")]
    code, out = _check("vllm", "0.34.0", line)
    assert "parallel-fits-node" in _errors(out) and code == 1


SGLANG = ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "8", "--dp-size", "4", "--nnodes", "2"]


def test_sglang_dp_attention_across_nodes_is_not_dp_replicas():
    code, out = _check("sglang", "0.5.23", SGLANG + ["--enable-dp-attention"])
    assert "sglang-dp-replicas-multi-node" not in _errors(out)


def test_sglang_dp_replicas_across_nodes_stay_refused():
    code, out = _check("sglang", "0.5.23", SGLANG)
    assert "sglang-dp-replicas-multi-node" in _errors(out) and code == 1
    # with both spellings the replicas stay replicas: dp_size is kept when --attn-dp-size is given
    code, out = _check("sglang", "0.5.23", SGLANG + ["--enable-dp-attention", "--attn-dp-size", "2"])
    assert "sglang-dp-replicas-multi-node" in _errors(out)
