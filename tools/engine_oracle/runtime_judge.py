"""The runtime-only rules' own judge (issue 31 item 2, the differential's runtime-only class).

A rule the registry marks runtime-only refuses what the engine checks after config time (process-group set-up, the
DP controller's GPU ids, the KV pool sizing): the oracle's config-time verdict is "accepted" on such a line whatever
the truth. Here each such check is worked out from the command line as the release's own code computes it, written
independently of the product's rule (it reads the argv with the release's flag spellings and defaults, not the
product's resolved spec), each with the release's file:line it follows.

``judge(rule, release, line)`` -> ``("refuses" | "accepts", how)`` or ``(None, why not)`` where no worked
computation exists (the check needs what only the run has: the checkpoint's tensor sizes, the profiled activation
peak). ``judge_line(release, line)`` runs every judge of the release: a line the product passes and a judge refuses is
a runtime-only miss.
"""
from __future__ import annotations

from typing import Callable

from tools.engine_oracle.corpus import _find


def _value(argv: list[str], flags: tuple[str, ...], default=None):
    """The last value given to one of ``flags`` (``--f v`` or ``--f=v``); a bare flag -> True."""
    out = default
    for i, t in enumerate(argv):
        for f in flags:
            if t == f:
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                out = True if nxt is None or nxt.startswith("--") else nxt
            elif t.startswith(f + "="):
                out = t.split("=", 1)[1]
    return out


def _int(argv, flags, default):
    v = _value(argv, flags, None)
    try:
        return int(v) if v is not None and v is not True else default
    except ValueError:
        return None


SG_TP = ("--tp-size", "--tensor-parallel-size", "--tp")
SG_DCP = ("--dcp-size", "--decode-context-parallel-size")
SG_DP = ("--dp-size", "--data-parallel-size", "--dp")
SG_PP = ("--pp-size", "--pipeline-parallel-size", "--pp")


def _sglang_dcp_divides_tp(release, line):
    tp, dcp = _int(line["argv"], SG_TP, 1), _int(line["argv"], SG_DCP, 1)
    if tp is None or dcp is None:
        return None, "a TP/DCP value that is not an integer (the parser refuses it)"
    how = (f"tp {tp} % dcp {dcp} = {tp % dcp if dcp else 'n/a'} (sglang distributed/parallel_state.py:2665-2669@0.5.23, "
           "2660-2664@0.5.22: initialize_model_parallel raises unless tensor_model_parallel_size % "
           "decode_context_parallel_size == 0)")
    return ("refuses" if dcp > 1 and tp % dcp else "accepts"), how


def _sglang_parallel_fits_node(release, line):
    argv = line["argv"]
    tp, pp, dp = _int(argv, SG_TP, 1), _int(argv, SG_PP, 1), _int(argv, SG_DP, 1)
    nnodes = _int(argv, ("--nnodes",), 1)
    if None in (tp, pp, dp, nnodes) or nnodes < 1:
        return None, "a parallel size that is not an integer"
    dp_attention = _find(argv, ("--enable-dp-attention",)) is not None
    # data_parallel_controller.py:421-449,692-752@0.5.23: each DP replica's scheduler processes take GPU ids
    # base_gpu_id + tp_rank (+ pp offset); a replica is TP x PP GPUs, DP attention puts the DP ranks inside the TP
    # group; --nnodes splits the ranks over nodes
    ranks = tp * pp * (1 if dp_attention else dp)
    per_node = -(-ranks // nnodes)
    gpus = line.get("gpus") or 8
    how = (f"{ranks} ranks over {nnodes} node(s) = {per_node} GPU ids per node, {gpus} GPUs (sglang "
           "managers/data_parallel_controller.py:421-449,692-752@0.5.23)")
    return ("refuses" if per_node > gpus else "accepts"), how


def _sglang_mem_fraction_above_one(release, line):
    v = _value(line["argv"], ("--mem-fraction-static",), None)
    if v is None or v is True:
        return "accepts", "--mem-fraction-static not given: the release derives a value below 1"
    try:
        f = float(v)
    except ValueError:
        return None, "not a number (the parser refuses it)"
    how = (f"headroom = pre_model_load_memory x (1 - {f}) {'< 0' if f > 1 else '>= 0'} (sglang "
           "model_executor/model_runner_components/kv_pool_runtime.py:75-77@0.5.23)")
    return ("refuses" if f > 1 else "accepts"), how


V_TP = ("--tensor-parallel-size", "-tp")
V_PP = ("--pipeline-parallel-size", "-pp")
V_DP = ("--data-parallel-size", "-dp")


def _vllm_parallel_fits_node_at_launch(release, line):
    argv = line["argv"]
    tp, pp, dp = _int(argv, V_TP, 1), _int(argv, V_PP, 1), _int(argv, V_DP, 1)
    local = _int(argv, ("--data-parallel-size-local", "-dpl"), None)
    if None in (tp, pp, dp):
        return None, "a parallel size that is not an integer"
    external = _find(argv, ("--data-parallel-rank", "-dpr", "--data-parallel-external-lb")) is not None
    dp_local = 1 if external else (local if local is not None else dp)
    ranks = tp * pp * dp_local
    gpus = line.get("gpus") or 8
    if _trait(release, "world_size_check") != "launch":
        # a release that checks the world size at config time only while it picks the executor itself
        # (config/parallel.py:1053-1076@0.33.0): with --distributed-executor-backend mp on one node the
        # multiprocessing executor starts every local rank there, one device each (v1/executor/
        # multiproc_executor.py:305-357@0.33.0); ray / external_launcher may span nodes: no computation
        backend = _value(argv, ("--distributed-executor-backend",), None)
        nnodes = _int(argv, ("--nnodes", "-n"), 1)
        if backend != "mp" or nnodes is None or nnodes > 1:
            return None, f"--distributed-executor-backend {backend} --nnodes {nnodes}: the world may span nodes"
        return ("refuses" if ranks > gpus else "accepts"), (
            f"tp {tp} x pp {pp} x local dp {dp_local} = {ranks} ranks, {gpus} GPUs (--distributed-executor-backend mp: "
            "no config-time check, config/parallel.py:1053-1076@0.33.0; the mp executor starts one worker per local "
            "rank, v1/executor/multiproc_executor.py:305-357@0.33.0)")
    how = (f"tp {tp} x pp {pp} x local dp {dp_local} = {ranks} ranks, {gpus} GPUs (vllm config/parallel.py:447-463@0.11.0: "
           "the Ray executor is chosen when cuda_device_count_stateless() < world_size; its placement group never "
           "gets the GPUs)")
    return ("refuses" if ranks > gpus else "accepts"), how


JUDGES: dict[str, Callable] = {
    "sglang-dcp-divides-tp": _sglang_dcp_divides_tp,
    "sglang-parallel-fits-node": _sglang_parallel_fits_node,
    "sglang-mem-fraction-above-one": _sglang_mem_fraction_above_one,
    "parallel-fits-node-at-launch": _vllm_parallel_fits_node_at_launch,
}
# the runtime-only error rules without a worked computation here, and why (the differential counts their refusals
# as "runtime-only-unjudged", listed, never as agreement)
UNJUDGED = {
    "fixed-memory-exceeds-budget": "needs the checkpoint's weight bytes per rank and the profiled activation peak",
    "vllm-max-model-len-exceeds-kv": "needs the KV pool the memory-profiling run leaves",
    "vllm-dcp-with-spec": "the model runner's check per worker reads the attention backend picked at model build",
    "vllm-dspark-dcp-backend": "the MLA layer's DSpark DCP support check runs at model construction",
    "vllm-dspark-dcp-backend-extra": "the MLA layer's DSpark DCP support check runs at model construction",
    "vllm-kimi-k3-specialized-decode": "the specialized decode runtime's unsupported() check runs at model init",
    "sglang-eagle-draft-missing": "the draft worker's ModelConfig is built at start-up",
}


def judge(rule: str, release: str, line: dict):
    fn = JUDGES.get(rule)
    if fn is None or (rule.startswith("sglang-") and not release.startswith("sglang")):
        return None, UNJUDGED.get(rule, "no worked computation for this rule")
    return fn(release, line)


def _trait(release: str, key: str):
    """A trait of the release in the catalog (catalog/data/engines/<engine>.yaml versions.<v>.traits)."""
    from tools.engine_oracle.corpus import _catalog
    from gpustack_k3.oracle.judge import RELEASES

    engine, version, _wheel = RELEASES[release]
    v = _catalog().engines[engine].versions.get(version)
    traits = getattr(v, "traits", None) or {}
    return traits.get(key) if isinstance(traits, dict) else getattr(traits, key, None)


def judge_line(release: str, line: dict) -> dict[str, tuple]:
    """Every judge that applies to the release on ``line``: rule -> (verdict, how). parallel-fits-node-at-launch
    applies where the release checks no device count at config time (catalog trait world_size_check: launch, as
    the rule's own ``when``)."""
    sglang = release.startswith("sglang")
    mp = _value(line["argv"], ("--distributed-executor-backend",), None) == "mp"
    return {r: fn(release, line) for r, fn in JUDGES.items() if r.startswith("sglang-") == sglang
            and (r != "parallel-fits-node-at-launch" or _trait(release, "world_size_check") == "launch" or mp)}
