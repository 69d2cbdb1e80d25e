"""The per-rank weight plan of a layout with MoE layers but no routed-expert count (a config.json whose
n_routed_experts is absent or no count, read as not given by core/model_config.py): unknown, named, no traceback."""
from __future__ import annotations

from gpustack_k3.core.model_config import arch_from_config
from gpustack_k3.core.plan_moe import param_parts
from tests.core.test_false_refusals_fr4 import NEMOTRON_H


def test_moe_layers_without_an_expert_count_are_unknown_not_a_traceback():
    for value in (-1, "auto"):
        parts, unknown, _ = param_parts(arch_from_config({**NEMOTRON_H, "n_routed_experts": value}, "t"))
        assert parts == {} and any("n_routed_experts" in u for u in unknown)
    whole = {**NEMOTRON_H, "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8,
             "conv_kernel": 4, "expand": 2}
    parts, unknown, _ = param_parts(arch_from_config(whole, "t"))
    assert not unknown and parts["routed_experts"] > 0
