"""SGLang prefill/decode and DP-attention starts read from SGLang's own log lines (coldstart/data/sglang.yaml).

Each excerpt is built from the release's exact message texts (the file:line@0.5.23 of each is in the marker's
``source``; the f-string/%-format arguments filled with plausible values), in the order a start prints them, under
the 0.5.23 log prefix ``[date time DPd TPn EPe]`` (srt/utils/common.py configure_logger)."""
from __future__ import annotations

from gpustack_k3.coldstart import ColdStartTracker

SERVER_ARGS = ("server_args={{'model_path': '/models/DeepSeek-V4.1-Flash', 'tp_size': 4, 'dp_size': 4, "
               "'ep_size': 4, 'enable_dp_attention': True, 'disaggregation_mode': '{mode}', "
               "'disaggregation_transfer_backend': 'nixl', 'disaggregation_bootstrap_port': 8998}}")

PREFILL = [
    ("05:00:00", "", SERVER_ARGS.format(mode="prefill")),
    ("05:00:01", "", "DP attention is enabled. chunked prefill size is adjusted from 16384 to 4096."),  # parallel_hook.py:333-336
    *[("05:00:02", "", f"Launch DP{r} starting at GPU #{r}.") for r in range(4)],        # data_parallel_controller.py:687
    ("05:00:03", "", "CommonKVBootstrapServer started successfully on 0.0.0.0:8998"),   # common/conn.py:3321-3323
    ("05:00:05", " DP0 TP0 EP0", "Init parallel begin."),
    ("05:00:09", " DP0 TP0 EP0", "Init parallel ends. elapsed=4.02 s"),
    ("05:00:10", " DP0 TP0 EP0", "Load weight begin. avail mem=180.00 GB"),
    ("05:02:10", " DP0 TP0 EP0", "Load weight end. elapsed=120.00 s, type=DeepseekV4ForCausalLM, avail mem=90.00 GB, "
                                "mem usage=90.00 GB."),
    ("05:02:12", " DP0 TP0 EP0", "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 500000, KV size: 10.00 GB"),
    ("05:02:13", " DP0 TP0 EP0", "NIXL KVManager initialized with backend: UCX"),           # nixl/conn.py:629
    ("05:02:20", "", "Start of pd disaggregation warmup ..."),                                # http_server.py:2505
    ("05:02:25", "", "Disaggregation warmup requests completed for all 4 DP ranks"),          # :2516-2519
    ("05:02:25", "", "End of disaggregation warmup"),                                         # :2520
    ("05:02:26", "", "The server is fired up and ready to roll!"),
]


def log(lines) -> bytes:
    return "".join(f"[2026-12-02 {t}{rank}] {msg}\n" for t, rank, msg in lines).encode()


def report(lines) -> dict:
    t = ColdStartTracker(year=2026)
    t.feed(log(lines))
    t.finish()
    return t.report().to_dict()


def test_a_dp_attention_prefill_start_shows_its_mode_ranks_bootstrap_and_transfer():
    d = report(PREFILL)
    assert (d["engine"], d["status"]) == ("sglang", "ready")
    ph = {p["name"]: p for p in d["phases"]}
    ps = ph["process_start"]["details"]
    assert (ps["disaggregation_mode"], ps["dp_attention"], ps["dp_size"], ps["ep_size"]) == ("prefill", "True", 4, 4)
    assert (ps["chunked_prefill_from"], ps["chunked_prefill_to"]) == (16384, 4096)
    assert (ps["bootstrap_host"], ps["bootstrap_port"]) == ("0.0.0.0", 8998)
    assert ps["dp_ranks"] == [0, 1, 2, 3]                   # one "Launch DP<n>" line per rank the node launches
    assert ph["kv_cache"]["details"]["nixl_backend"] == "UCX"
    assert ph["server_ready"]["details"]["dp_ranks"] == 4
    # server_ready follows the KV pool line (the NIXL manager is progress inside kv_cache, it ends nothing)
    assert (ph["server_ready"]["start"], ph["server_ready"]["end"]) == ("2026-12-02T05:02:12", "2026-12-02T05:02:26")
    assert d["total_seconds"] == 146.0


def test_a_decode_start_shows_its_mode_and_a_failed_warmup_fails_it():
    decode = [(t, r, m) for t, r, m in PREFILL if "Bootstrap" not in m and "completed" not in m
              and "End of" not in m and "fired up" not in m]
    decode[0] = ("05:00:00", "", SERVER_ARGS.format(mode="decode"))
    decode.insert(1, ("05:00:00", "", "Radix cache is disabled for decode server"))     # pd_disaggregation_hook.py:127
    ok = report([*decode, ("05:02:25", "", "End of disaggregation warmup"),
                 ("05:02:26", "", "The server is fired up and ready to roll!")])
    assert ok["status"] == "ready"
    ps = phases_of(ok)["process_start"]["details"]
    assert (ps["disaggregation_mode"], ps["decode_radix_cache"]) == ("decode", "Radix cache is disabled")
    assert "bootstrap_port" not in ps
    failed = report([*decode, ("05:02:25", "", "Disaggregation warmup failed (mode=decode), status codes: [503]"),
                     ("05:02:26", "", "The server is fired up and ready to roll!")])   # :2522-2526, then UnHealthy
    assert (failed["status"], failed["failed_phase"]) == ("failed", "server_ready")
    assert failed["reason"] == "Disaggregation warmup failed (mode=decode), status codes: [503]"


def test_a_prefill_that_cannot_register_with_its_bootstrap_server_fails_in_kv_cache():
    lines = [*PREFILL[:11],
             ("05:02:14", " DP0 TP0 EP0", "Prefill register attempt 1/5 failed: status 503"),   # common/conn.py:1643-1645
             ("05:02:20", " DP0 TP0 EP0",
              "Prefill instance failed to register to bootstrap server after 5 retries")]       # :1660-1662
    d = report(lines)
    assert (d["status"], d["failed_phase"]) == ("failed", "kv_cache")
    # the failure is declared by the last line; its reason is the first cause after the last progress: the retry
    # that names what the bootstrap server answered
    assert d["reason"] == "Prefill register attempt 1/5 failed: status 503"
    assert report(PREFILL[:11] + lines[12:])["reason"] == lines[12][2]
    # a retry the start gets past is a cause kept for a failure, not one itself
    assert report([*PREFILL[:11], lines[11], *PREFILL[11:]])["status"] == "ready"


def test_a_multi_node_prefill_rank_adopts_the_leaders_bootstrap_port():
    d = report([*PREFILL[:10], ("05:02:13", " DP4 TP4 EP4",
                                "Synced disaggregation bootstrap port from leader: local=8999 -> leader=8998 "
                                "(world_rank=4)")])                                            # common/conn.py:1555-1559
    kv = phases_of(d)["kv_cache"]["details"]
    assert (kv["local_port"], kv["leader_port"]) == (8999, 8998)


def phases_of(d: dict) -> dict:
    return {p["name"]: p for p in d["phases"]}
