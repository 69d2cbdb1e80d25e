"""The corrections with the estimator's own tables (tier `predict`: aiconfigurator-core installed)."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.predict import corrections as C
from gpustack_k3.predict.estimator import PlannedOp
from gpustack_k3.predict.types import NoData
from tests.support import tiers

from .doubles import cfg

pytestmark = pytest.mark.predict


@pytest.fixture(scope="module")
def est():
    tiers.aiconfigurator()
    from gpustack_k3.predict.aic import AicEstimator

    return AicEstimator()


def _one(est, c, spec, batch, s, table=None):
    return est.price(c, [PlannedOp(spec, "generation", batch, s, table or c.engine)])[0]


def test_graph_is_the_estimators_kimi_k3_graph(est):
    c = cfg(engine="vllm", drafts=7)
    g = est.graph(c, "generation")
    names = {next(iter(o.values()))["name"] for o in g}
    assert {"generation_moe", "generation_mla_block", "draft_attention", "generation_kda_verify"} <= names


def test_verify_kv_once_equals_the_estimators_own_row_at_batch(est):
    c = cfg(engine="sglang", drafts=7, dcp=1)
    g = est.graph(c, "generation")
    ops, _ = C.corrected_decode(g, c, 10, 65536)
    att = next(o for o in ops if o.name == "generation_attention")
    assert att.batch == 10
    mine = est.price(c, [att])[0]
    direct = _one(est, c, att.spec, 10, 65536)
    assert mine.ms == pytest.approx(direct.ms) and mine.source == "silicon"
    widened = _one(est, c, att.spec, 80, 65536)
    assert widened.ms > 4 * mine.ms      # the estimator's convention re-reads the KV per verify row


def test_moe_kernel_rows_exist_and_are_measured(est):
    c = cfg(engine="vllm", drafts=7)
    ops, _ = C.corrected_decode(est.graph(c, "generation"), c, 10, 65536)
    moe = next(o for o in est.price(c, ops) if o.name == "generation_moe")
    assert moe.table == "sglang" and moe.source == "silicon" and moe.ms > 0


def test_dcp_collectives_are_priced_from_nccl_tables(est):
    c = cfg(engine="sglang", dcp=8, drafts=7, custom=False, comm="ag_rs")
    spec = {"Nccl": {"name": "x", "scale_factor": 24.0, "hidden_size": 96.0 * 576, "num_gpus": 8, "dtype": "half",
                     "operation": "all_gather", "seq_split": 1}}
    one = _one(est, c, json.loads(json.dumps(spec)), 80, 1)
    spec["Nccl"]["scale_factor"] = 1.0
    single = _one(est, c, spec, 80, 1)
    assert one.source == "silicon" and one.ms == pytest.approx(24 * single.ms)


def test_no_data_is_said_not_substituted(est):
    c = cfg()
    c.gpu = "h200"
    with pytest.raises(NoData) as e:
        est.price(c, [PlannedOp({"Nccl": {"name": "x", "scale_factor": 1.0, "hidden_size": 1.0, "num_gpus": 8,
                                          "dtype": "half", "operation": "all_gather", "seq_split": 1}},
                                "generation", 1, 1, "vllm")])
    assert "h200" in e.value.message
    c = cfg()
    c.model = "deepseek-v4.1-flash"       # a catalog model without a config the estimator has, none given
    with pytest.raises(NoData) as e:
        est.model_path(c)
    assert "--model-config" in e.value.message
