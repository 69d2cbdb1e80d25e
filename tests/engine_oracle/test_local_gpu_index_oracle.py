"""Every CUDA worker of vLLM 0.33.0/0.34.0 maps its local rank with the release's ``get_local_gpu_index``
(v1/worker/gpu_worker.py init_device: 454@0.33.0, 456@0.34.0), which reads ``nnodes_within_dp``: a --nnodes that the
data-parallel node groups (data_parallel_size / data_parallel_size_local) do not divide raises there
(config/parallel.py:811-835@0.33.0, 903-927@0.34.0), with one local DP engine as with several. The oracle evaluated
that property only through the device ranges of more than one local DP engine, so a DP 64 / dpLocal 1 / --nnodes 2
line was "accepted" and rule dp-node-groups-divide-nnodes counted as a false refusal (h-cov7's corpora). The product
must say what the release does, both ways."""
from __future__ import annotations

import pytest

from tests.support import tiers
from tests.core.test_vllm_checks import product

pytestmark = pytest.mark.engine_oracle

CASES = [
    # release, data_parallel_size_local, refused
    ("vllm-0.34.0", "1", True), ("vllm-0.34.0", "2", False),
    ("vllm-0.33.0", "1", True), ("vllm-0.33.0", "2", False),
]


@pytest.mark.parametrize("release, local, refused", CASES, ids=[f"{r}-local{n}" for r, n, _ in CASES])
def test_nnodes_against_the_dp_node_groups(oracles, release, local, refused):
    version = release.split("-", 1)[1]
    tiers.engine_wheel("vllm", version)
    argv = ["/models/shape-gqa-dense", "--data-parallel-size", "4", "--data-parallel-size-local", local,
            "--nnodes", "2"]
    v = oracles(release).judge_line(argv, {})
    assert (v["verdict"] == "refused") is refused, v
    if refused:
        assert "must be divisible by the number of data parallel node groups" in v["message"], v
        assert v["where"].startswith("vllm/config/parallel.py:"), v
    pv = product(version, argv, {}, "shape-gqa-dense")   # check-args in process, given the shape's config.json
    assert ("dp-node-groups-divide-nnodes" in pv["rules"]) is refused, pv
    assert (pv["verdict"] == "refuse") is refused, pv
