"""Our corrections against hand-computed op costs (a stand-in pricer whose costs can be done by hand)."""
from __future__ import annotations

import pytest

from gpustack_k3.predict import corrections as C
from gpustack_k3.predict.estimator import fields
from gpustack_k3.predict.types import StepBreakdown

from .doubles import US, FakeEstimator, cfg, graph


def _by(ops):
    return {o.name: o for o in ops}


def test_baseline_prices_every_op_at_the_widened_batch():
    ops = _by(C.baseline_decode(graph(), cfg(drafts=7), batch=10, s=65536))
    assert {o.batch for o in ops.values()} == {80}
    assert ops["generation_attention"].s == 65536


def test_verify_reads_kv_once_per_request():
    c = cfg(drafts=7)
    ops = _by(C.verify_kv_once(C.baseline_decode(graph(), c, 10, 65536), c, 10))
    # target attention: 10 requests, not 80 rows; the absorb GEMM (per query token) and the rest stay at 80
    assert ops["generation_attention"].batch == 10 and ops["generation_attention"].corrections == ["verify-kv-once"]
    assert ops["generation_bmm_pre"].batch == 80 and ops["generation_moe"].batch == 80
    assert ops["draft_attention"].batch == 80           # the draft is corrected by its own rule
    # hand-computed: 24 layers x 10 requests x 65536 tokens x 12 heads / 1000 x 1 us = 188.74368 ms (x8 before)
    est = FakeEstimator()
    cost = _by(est.price(c, [ops["generation_attention"]]))["generation_attention"].ms
    assert cost == pytest.approx(24 * 10 * 65536 * 12 / 1000 * US)
    base = C.baseline_decode(graph(), c, 10, 65536)
    base_cost = _by(est.price(c, base))["generation_attention"].ms
    assert base_cost == pytest.approx(8 * cost)


def test_no_drafts_no_verify_correction():
    c = cfg(drafts=0)
    ops = C.verify_kv_once(C.baseline_decode(graph(), c, 10, 1000), c, 10)
    assert all(o.batch == 10 and not o.corrections for o in ops)


def test_draft_block_forward_runs_each_draft_layer_once():
    c = cfg(drafts=7)
    ops = _by(C.draft_block_forward(C.baseline_decode(graph(), c, 10, 1000), c, 10))
    d = ops["draft_attention"]
    # the estimator's count 5 layers x 7/8 = 4.375 at 80 rows becomes 5 layers at 10 requests
    assert fields(d.spec)["scale_factor"] == pytest.approx(5.0) and d.batch == 10
    est = FakeEstimator()
    assert _by(est.price(c, [d]))["draft_attention"].ms == pytest.approx(5 * 10 * 1000 * 8 / 1000 * US)


def test_moe_kernel_moves_moe_to_the_flashinfer_rows():
    c = cfg(engine="vllm")
    ops = _by(C.moe_kernel(C.baseline_decode(graph(), c, 10, 1000), c))
    moe = ops["generation_moe"]
    assert moe.table == "sglang" and fields(moe.spec)["quant_mode"] == "w4a8_mxfp4_mxfp8"
    assert fields(ops["generation_moe_pre_dispatch"].spec)["moe_quant"] == "w4a8_mxfp4_mxfp8"
    assert ops["generation_moe_pre_dispatch"].table == "vllm"   # communication stays on the engine's own table
    assert "moe-kernel" in moe.corrections


@pytest.mark.parametrize("d", [2, 4, 8])
def test_dcp_ag_rs_all_heads_over_a_kv_shard_plus_collectives(d):
    c = cfg(engine="vllm", dcp=d, drafts=0, comm="ag_rs")
    ops = _by(C.dcp(C.baseline_decode(graph(), c, 10, 200000), c, 10))
    att = ops["generation_attention"]
    assert fields(att.spec)["num_heads"] == 96 and att.s == -(-200000 // d)
    ag, rs = ops["dcp_q_all_gather"], ops["dcp_out_reduce_scatter"]
    assert fields(ag.spec) == {"name": "dcp_q_all_gather", "scale_factor": 24.0, "hidden_size": 96.0 * (512 + 64),
                                    "num_gpus": d, "dtype": "half", "operation": "all_gather", "seq_split": 1}
    assert fields(rs.spec)["hidden_size"] == 96.0 * 514 and fields(rs.spec)["operation"] == "reduce_scatter"
    assert "dcp_out_all_to_all" not in ops
    # hand-computed attention cost: 24 x 10 x ceil(200000/d) x 96 heads / 1000 x 1 us; KV read per rank shrinks d x
    # while heads per rank grow 8 x (96 instead of 12)
    est = FakeEstimator()
    priced = _by(est.price(c, list(ops.values())))
    assert priced["generation_attention"].ms == pytest.approx(24 * 10 * -(-200000 // d) * 96 / 1000 * US)
    assert priced["dcp_q_all_gather"].ms == pytest.approx(24 * 10 * 96 * 576 * 1e-6 * US)


def test_dcp_a2a_replicates_q_projection_and_exchanges_outputs():
    c = cfg(engine="sglang", dcp=8, drafts=7, comm="a2a")
    ops = _by(C.dcp(C.baseline_decode(graph(), c, 10, 204800), c, 10))
    assert fields(ops["generation_mla_q_b_gemm"].spec)["n"] == 96 * 192
    assert fields(ops["generation_bmm_pre"].spec)["num_heads"] == 96
    a2a = ops["dcp_out_all_to_all"]
    assert fields(a2a.spec)["operation"] == "alltoall" and a2a.batch == 80   # every verify row's partial output
    assert "dcp_q_all_gather" not in ops
    assert fields(ops["draft_attention"].spec)["n"] == 8 and ops["draft_attention"].s == 204800   # draft KV not sharded


def test_dcp_one_is_untouched():
    c = cfg(dcp=1)
    base = C.baseline_decode(graph(), c, 10, 1000)
    assert C.dcp(base, c, 10) == base


def test_allreduce_becomes_nccl_when_custom_allreduce_is_off():
    c = cfg(engine="sglang", custom=False)
    ops = _by(C.allreduce_nccl(C.baseline_decode(graph(), c, 10, 1000), c))
    ar = ops["generation_mla_ar"]
    assert ar.spec == {"Nccl": {"name": "generation_mla_ar", "scale_factor": 24.0, "hidden_size": 7168.0,
                                "num_gpus": 8, "dtype": "half", "operation": "all_reduce", "seq_split": 1}}
    c2 = cfg(engine="sglang", custom=True)
    assert "CustomAllReduce" in C.allreduce_nccl(C.baseline_decode(graph(), c2, 10, 1000), c2)[3].spec


def test_corrected_decode_names_what_it_applied_and_the_step_sums():
    c = cfg(engine="sglang", dcp=8, drafts=7, custom=False, comm="a2a")
    ops, names = C.corrected_decode(graph(), c, 10, 204800)
    assert names == ["verify-kv-once", "dcp", "draft-block-forward", "moe-kernel", "allreduce-nccl"] or \
        set(names) == {"verify-kv-once", "dcp", "draft-block-forward", "moe-kernel", "allreduce-nccl"}
    assert all(n in C.ASSUMPTIONS for n in names)
    step = StepBreakdown(FakeEstimator().price(c, ops), names)
    assert step.ms == pytest.approx(sum(o.ms for o in step.ops))
    assert set(step.by_category()) >= {"attention_kv", "communication", "draft", "moe_weights"}
    _, pre_names = C.corrected_prefill(graph(), c, 32768, 0)
    assert "prefill-no-dcp" in pre_names
