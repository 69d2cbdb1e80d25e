"""`gpustack-k3 probe` and `gpustack-k3 gpustack status --probe` as a user runs them: JSON shape, text,
exit codes 0/1/2, options checked at the door, the spec's served name and maxNumSeqs, the key by reference."""
from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner
from fake_openai import Behaviour, FakeOpenAI

from gpustack_k3.cli.main import run as cli_run
from tests.support.ports import free_port

SHAPE = {"endpoint", "engine", "model", "requests", "concurrency", "ttft_ms", "ttft_content_ms", "tpot_ms", "itl_ms",
         "e2el_ms", "output_tokens_per_s", "goodput", "errors", "spec_acceptance", "warmup", "findings"}
SMALL = ["--requests", "4", "--concurrency", "2", "--input-len", "20", "--output-len", "4", "--warmup", "1"]


def cli(*args):
    from gpustack_k3.cli.main import cli as group
    return CliRunner().invoke(group, list(args))


def test_json_has_the_documented_shape():
    with FakeOpenAI(Behaviour()) as srv:
        r = cli("probe", srv.url, *SMALL, "--slo", "ttft=60000,tpot=60000", "-o", "json")   # met on a loaded box too
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert SHAPE <= set(d)
    for k in ("ttft_ms", "ttft_content_ms", "tpot_ms", "itl_ms", "e2el_ms"):
        assert {"p50", "p90", "p99", "max", "n"} <= set(d[k])
    assert d["goodput"]["good"] == 4 and d["warmup"]["requests"] == 1 and d["exit_code"] == 0


def test_text_report_and_exit_1_on_a_missed_slo():
    with FakeOpenAI(Behaviour(prefill_s=0.1)) as srv:
        r = cli("probe", srv.url, *SMALL, "--slo", "ttft=10")
    assert r.exit_code == 1
    out = r.stdout
    assert "TTFT" in out and "TTFT content" in out and "goodput: 0/4" in out and "ERROR [probe.slo]" in out
    assert "invariant requested_bound: ok" in out and "*" in out    # 4 samples: p90/p99 labelled


def test_unusable_endpoint_is_exit_2_with_one_error_line():
    r = cli("probe", f"http://127.0.0.1:{free_port()}", *SMALL)
    assert r.exit_code == 2 and r.stderr.count("error:") == 1 and "stage health" in r.stderr
    assert "Traceback" not in r.output


@pytest.mark.parametrize("args, needle", [
    (["--slo", "ttft"], "--slo"), (["--requests", "0"], "--requests"), (["--concurrency", "-1"], "--concurrency"),
    (["--min-goodput", "2"], "--min-goodput"), (["--api-key-env", "GPUSTACK_K3_NO_SUCH_VAR"], "GPUSTACK_K3_NO_SUCH_VAR"),
    (["--prompts", "/nonexistent.jsonl"], "--prompts"), (["--preset", "nope"], "unknown preset"),
])
def test_bad_options_are_exit_2_naming_them(args, needle):
    code = cli_run(["probe", "http://127.0.0.1:1", *args])
    assert code == 2
    r = cli("probe", "http://127.0.0.1:1", *args)
    assert needle in r.stderr and "Traceback" not in r.output


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "ftp://h", "http://h:99999"])
def test_bad_url_is_exit_2(url):
    r = cli("probe", url)
    assert r.exit_code == 2 and "URL" in r.stderr


def test_api_key_read_from_the_named_variable(monkeypatch):
    monkeypatch.setenv("PROBE_TEST_KEY", "s3cret")
    with FakeOpenAI(Behaviour(api_key="s3cret")) as srv:
        r = cli("probe", srv.url, *SMALL, "--api-key-env", "PROBE_TEST_KEY", "-o", "json")
        denied = cli("probe", srv.url, *SMALL)
    assert r.exit_code == 0 and "s3cret" not in r.output
    assert denied.exit_code == 2 and "--api-key-env" in denied.stderr


def test_prompts_dataset_is_named_and_sent(tmp_path):
    f = tmp_path / "real.jsonl"
    f.write_text('"What is the capital of France?"\n\n{"prompt": "Summarise the KV cache."}\n')
    with FakeOpenAI(Behaviour(spec=(1, 10))) as srv:
        r = cli("probe", srv.url, *SMALL, "--prompts", str(f), "-o", "json")
        sent = [b["messages"][0]["content"] for b in srv.bodies if b.get("stream")]
    d = json.loads(r.stdout)
    assert d["dataset"] == "real.jsonl" and d["input_len"] is None
    assert set(sent) == {"What is the capital of France?", "Summarise the KV cache."}
    low = next(x for x in d["findings"] if x["rule"] == "probe.acceptance-low")
    assert "'real.jsonl'" in low["message"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('"ok"\n{"text": 1}\n')
    r = cli("probe", srv.url, "--prompts", str(bad))
    assert r.exit_code == 2 and "bad.jsonl:2" in r.stderr


def test_spec_gives_the_served_name_and_the_planned_concurrency(tmp_path):
    with FakeOpenAI(Behaviour(served="smollm2")) as srv:
        r = cli("probe", srv.url, *SMALL, "--preset", "vllm-cpu-smollm2", "-o", "json")
    d = json.loads(r.stdout)
    assert r.exit_code == 0 and d["model"] == "smollm2"
    bound = next(i for i in d["invariants"] if i["name"] == "throughput_bound")
    assert bound["concurrency"] == 2       # min(--concurrency 2, 4 requests, the preset's max_num_seqs)


# ------------------------------------------------------------------ gpustack status --probe
def _gpustack(instances):
    def handler(req: httpx.Request) -> httpx.Response:
        page = lambda items: httpx.Response(200, json={"items": items, "pagination": {"page": 1, "perPage": 100,
                                                                                       "total": len(items), "totalPage": 1}})
        if req.url.path == "/v2/models":
            return page([{"id": 7, "name": "kimi", "state": "running", "ready_replicas": 1, "replicas": 2,
                          "cluster_id": 1}])
        if req.url.path == "/v2/model-instances":
            return page(instances)
        return httpx.Response(404, json={"message": "no route"})
    return handler


def test_gpustack_status_probe_measures_each_running_instance(monkeypatch):
    import gpustack_k3.cli.gpustack_cmd as gcli
    from gpustack_k3.gpustack.client import GPUStackClient

    with FakeOpenAI(Behaviour(served="kimi")) as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        inst = [{"id": 1, "name": "kimi-a", "state": "running", "worker_name": "w1", "worker_ip": "127.0.0.1",
                 "port": port, "gpu_indexes": [0]},
                {"id": 2, "name": "kimi-b", "state": "starting", "worker_name": "w1", "worker_ip": "127.0.0.1",
                 "port": None, "gpu_indexes": [1]}]
        monkeypatch.setattr(gcli, "_client", lambda s, k: GPUStackClient(
            "http://gpustack.test", "k", transport=httpx.MockTransport(_gpustack(inst)), backoff=0))
        r = CliRunner().invoke(gcli.gpustack, ["status", "kimi", "--server", "http://gpustack.test", "--probe",
                                               "--probe-requests", "3", "--probe-concurrency", "3",
                                               "--probe-output-len", "4", "-o", "json"])
        sent = [b["model"] for b in srv.bodies if b.get("stream")]
    d = json.loads(r.stdout)
    a, b = d["probe"]["kimi-a"], d["probe"]["kimi-b"]
    assert a["exit_code"] == 0 and a["completed"] == 3 and a["endpoint"] == f"http://127.0.0.1:{port}"
    assert set(sent) == {"kimi"} and d["instances"][0]["worker_ip"] == "127.0.0.1"
    assert b["usable"] is False and "state starting" in b["reason"]
    assert r.exit_code == 2           # the worst instance: one was not probed
    monkeypatch.setattr(gcli, "_client", lambda s, k: GPUStackClient(
        "http://gpustack.test", "k", transport=httpx.MockTransport(_gpustack(inst[:1])), backoff=0))
    with FakeOpenAI(Behaviour(served="kimi"), port=port):
        r = CliRunner().invoke(gcli.gpustack, ["status", "kimi", "--server", "http://gpustack.test", "--probe",
                                               "--probe-requests", "2", "--probe-output-len", "4"])
    assert r.exit_code == 0 and "--- probe of kimi-a" in r.stdout and "TTFT" in r.stdout
    with FakeOpenAI(Behaviour(served="kimi"), port=port):                 # --watch: follow, then probe
        r = CliRunner().invoke(gcli.gpustack, ["status", "kimi", "--server", "http://gpustack.test", "--watch",
                                               "--probe", "--probe-requests", "2", "--probe-output-len", "4",
                                               "-o", "json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["probe"]["kimi-a"]["completed"] == 2, r.output
    r = CliRunner().invoke(gcli.gpustack, ["status", "kimi", "--server", "http://x", "--probe", "--slo", "x=1"])
    assert r.exit_code == 2 and "--slo" in r.stderr
