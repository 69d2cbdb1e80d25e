"""The runtime judge of parallel-fits-node-at-launch on a release that checks the world size at config time only
while it picks the executor (vLLM 0.33.0): with --distributed-executor-backend mp on one node the computation
refuses ranks past the GPUs; ray may span nodes (no computation); 0.11.0 as before. Pure: no engine runs."""
from __future__ import annotations

from tools.engine_oracle.runtime_judge import judge, judge_line

TP8PP2 = ["/models/shape-gqa-dense", "-tp", "8", "-pp", "2"]


def test_mp_on_one_node_past_the_gpus_refuses_on_0_33():
    line = {"argv": [*TP8PP2, "--distributed-executor-backend", "mp", "--nnodes", "1"], "gpus": 8}
    verdict, how = judge("parallel-fits-node-at-launch", "vllm-0.33.0", line)
    assert verdict == "refuses" and "16 ranks, 8 GPUs" in how and "multiproc_executor.py" in how
    assert judge_line("vllm-0.33.0", line)["parallel-fits-node-at-launch"][0] == "refuses"
    assert judge("parallel-fits-node-at-launch", "vllm-0.33.0", dict(line, gpus=16))[0] == "accepts"


def test_ray_or_no_backend_has_no_computation_on_0_33():
    ray = {"argv": [*TP8PP2, "--distributed-executor-backend", "ray"], "gpus": 8}
    assert judge("parallel-fits-node-at-launch", "vllm-0.33.0", ray)[0] is None
    assert "parallel-fits-node-at-launch" not in judge_line("vllm-0.33.0", {"argv": TP8PP2, "gpus": 8})


def test_0_11_judges_every_line_as_before():
    assert judge("parallel-fits-node-at-launch", "vllm-0.11.0", {"argv": TP8PP2, "gpus": 8})[0] == "refuses"
