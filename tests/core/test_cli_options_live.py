"""Issue 33 What 2, the commands that talk to a server or run a daemon (tests/core/test_cli_options.py holds the
offline ones): every option of ``probe``, ``gpustack apply``, ``gpustack status``, ``run status`` and ``operator
run`` changes the command's answer, or the command refuses it as not applicable (exit 2 naming the option).

The answer of a command that acts on a server includes what it sent: ``probe`` runs against the fake
OpenAI-compatible engine (tests/probe/fake_openai.py), its JSON report compared with every measured time blanked
(a float is a timing; counts, names and verdicts stay); ``gpustack apply|status`` against the in-memory GPUStack
of tests/gpustack (the write calls and their bodies are part of the answer); ``operator run`` is a daemon: its
answer is what the controller is started with (``operator.controller.run``'s arguments and the log level), which
the operator tier (tests/operator) runs against the Kubernetes emulator. ``run status`` has no option but the
output format. Options that select the output format are covered by the JSON contract tests."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gpustack_k3.cli.main import cli
from tests.core.test_cli_options import _commands
from tests.probe.fake_openai import Behaviour, FakeOpenAI

FORMAT = {"--output", "--help"}
SMALL = ["--requests", "4", "--concurrency", "2", "--input-len", "20", "--output-len", "4", "--warmup", "1"]


def options(cmd: str) -> list[str]:
    return sorted(p.opts[0] for p in _commands()[cmd].params if isinstance(p, click.Option) and p.opts[0] not in FORMAT)


def _blank(o, url: str):
    """The report without its timings (floats) and with the server's URL as URL."""
    if isinstance(o, float):
        return None
    if isinstance(o, dict):
        return {k: _blank(v, url) for k, v in o.items()}
    if isinstance(o, list):
        return [_blank(v, url) for v in o]
    return o.replace(url, "URL") if isinstance(o, str) else o


def _refused_naming(answer: tuple, opt: str) -> bool:
    code, out = answer[0], answer[1]
    return code == 2 and isinstance(out, dict) and out.get("error", {}).get("where") == opt


# ------------------------------------------------------------------------------------------------ probe

SLOW = {"prefill_s": 0.3}                       # a request slower than --timeout 0.1
LONG = {"token_s": 0.08}                        # a run longer than --metrics-interval 0.05 (base 1 s: no sample)


def _spec(tmp: Path) -> str:
    from gpustack_k3.catalog import load_catalog

    import yaml

    d = load_catalog().presets["vllm-fixed"].document
    d = json.loads(json.dumps(d))
    d["spec"]["scheduling"]["maxNumSeqs"] = 1            # below --concurrency 2: the probe says so
    p = tmp / "spec.yaml"
    p.write_text(yaml.safe_dump(d))
    return str(p)


def _prompts(tmp: Path) -> str:
    p = tmp / "prompts.jsonl"
    p.write_text('"a prompt of a few words"\n{"prompt": "another prompt"}\n')
    return str(p)


# option -> (tokens ({url}: the server's, {tmp}: a file made for it), server behaviour, base tokens)
PROBE: dict[str, tuple] = {
    "--spec": (["--spec", "{spec}"], {}, []),
    "--preset": (["--preset", "vllm-cpu-smollm2"], {}, []),
    "--model": (["--model", "other-model"], {}, []),
    "--requests": (["--requests", "6"], {}, []),
    "--concurrency": (["--concurrency", "1"], {}, []),
    "--input-len": (["--input-len", "30"], {}, []),
    "--output-len": (["--output-len", "5"], {}, []),
    "--warmup": (["--warmup", "2"], {}, []),
    "--slo": (["--slo", "ttft=60000"], {}, []),
    "--min-goodput": (["--min-goodput", "0"], {}, ["--slo", "ttft=1"]),        # goodput 0/4: 0 lets it pass
    "--api-key-env": (["--api-key-env", "K3_OPTIONS_KEY"], {"api_key": "sekret"}, []),
    "--api": (["--api", "completions"], {}, []),
    "--prompts": (["--prompts", "{prompts}"], {}, []),
    "--shared-prefix": (["--shared-prefix"], {}, []),
    "--timeout": (["--timeout", "0.1"], SLOW, []),
    "--metrics-interval": (["--metrics-interval", "0.05"], LONG, []),
    "--prefill": (["--prefill", "{url}", "--decode", "{url}"], {}, []),
    "--decode": (["--decode", "{url}", "--prefill", "{url}"], {}, []),
}


def _probe(tokens: list[str], behaviour: dict, tmp: Path) -> tuple:
    with FakeOpenAI(Behaviour(**behaviour)) as srv:
        args = [t.replace("{url}", srv.url) for t in tokens]
        args = [_spec(tmp) if t == "{spec}" else _prompts(tmp) if t == "{prompts}" else t for t in args]
        r = CliRunner().invoke(cli, ["probe", srv.url, *SMALL, *args, "-o", "json"])
        try:
            out = _blank(json.loads(r.stdout), srv.url)
        except ValueError:
            out = r.stdout
        return r.exit_code, out


def test_probe_table_names_every_option():
    assert sorted(PROBE) == options("probe")


@pytest.mark.parametrize("opt", sorted(PROBE))
def test_every_probe_option_changes_the_report_or_is_refused(opt, tmp_path, monkeypatch):
    monkeypatch.setenv("K3_OPTIONS_KEY", "sekret")
    tokens, behaviour, base = PROBE[opt]
    before = _probe(base, behaviour, tmp_path)
    assert before[0] in (0, 1, 2)
    after = _probe([*base, *tokens], behaviour, tmp_path)
    assert after != before or _refused_naming(after, opt), f"{opt}: the probe's answer is unchanged"


def test_probe_refuses_min_goodput_without_an_slo(tmp_path):
    code, out = _probe(["--min-goodput", "0.5"], {}, tmp_path)
    assert _refused_naming((code, out), "--min-goodput"), out


# ------------------------------------------------------------------------------------------------ gpustack

def _fake_gpustack(monkeypatch, host: str = "gpustack.test"):
    """The in-memory GPUStack of tests/gpustack, behind the real client built from --server and --api-key-env: a
    request to another host cannot connect."""
    import httpx

    import gpustack_k3.gpustack.client as client_mod
    from tests.gpustack.test_gpustack_client_apply import KEY, FakeGPUStack

    fake = FakeGPUStack()
    fake.models[100] = {"id": 100, "name": "kimi-k3-vllm", "cluster_id": 1, "state": "running", "replicas": 1,
                        "ready_replicas": 1, "backend": "kimi-k3-vllm-custom", "backend_version": "kimi-k3"}

    def route(req: httpx.Request) -> httpx.Response:
        if req.url.host != host:
            raise httpx.ConnectError(f"cannot connect to {req.url.host}", request=req)
        return fake(req)

    real = client_mod.GPUStackClient.__init__

    def init(self, base_url, api_key, **kw):
        real(self, base_url, api_key, **{**kw, "transport": httpx.MockTransport(route), "backoff": 0, "attempts": 1})

    monkeypatch.setattr(client_mod.GPUStackClient, "__init__", init)
    monkeypatch.setenv("GPUSTACK_API_KEY", KEY)
    monkeypatch.setenv("K3_OTHER_KEY", "not-the-key")
    return fake


def _gpustack(argv: list[str], monkeypatch) -> tuple:
    fake = _fake_gpustack(monkeypatch)
    r = CliRunner().invoke(cli, ["gpustack", *argv, "-o", "json"])
    try:
        out = json.loads(r.stdout)
    except ValueError:
        out = r.stdout
    state = json.dumps({"models": fake.models, "backends": fake.backends}, sort_keys=True, default=str)
    return r.exit_code, out, fake.writes(), state


SERVER = ["--server", "http://gpustack.test"]
APPLY_BASE = ["apply", "--preset", "vllm-seed", *SERVER]
STATUS_BASE = ["status", "kimi-k3-vllm", *SERVER]
GPUSTACK: dict[tuple[str, str], tuple[list[str], list[str]]] = {
    # (command, option) -> (tokens, base)
    ("gpustack apply", "--server"): (["--server", "http://other.test"], APPLY_BASE),
    ("gpustack apply", "--api-key-env"): (["--api-key-env", "K3_OTHER_KEY"], APPLY_BASE),
    ("gpustack apply", "--cluster"): (["--cluster", "c2"], APPLY_BASE),
    ("gpustack apply", "--worker"): (["--worker", "node-7"], APPLY_BASE),
    ("gpustack apply", "--hub"): (["--hub", "model_scope"], APPLY_BASE),
    ("gpustack apply", "--dry-run"): (["--dry-run"], APPLY_BASE),
    ("gpustack status", "--server"): (["--server", "http://other.test"], STATUS_BASE),
    ("gpustack status", "--api-key-env"): (["--api-key-env", "K3_OTHER_KEY"], STATUS_BASE),
    ("gpustack status", "--cluster"): (["--cluster", "c2"], STATUS_BASE),
    ("gpustack status", "--watch"): (["--watch", "--timeout", "5"], STATUS_BASE),
    ("gpustack status", "--timeout"): (["--timeout", "5"], STATUS_BASE),
    ("gpustack status", "--probe"): (["--probe"], STATUS_BASE),
    ("gpustack status", "--probe-requests"): (["--probe-requests", "2"], STATUS_BASE),
    ("gpustack status", "--probe-concurrency"): (["--probe-concurrency", "2"], STATUS_BASE),
    ("gpustack status", "--probe-input-len"): (["--probe-input-len", "2"], STATUS_BASE),
    ("gpustack status", "--probe-output-len"): (["--probe-output-len", "2"], STATUS_BASE),
    ("gpustack status", "--slo"): (["--slo", "ttft=100"], STATUS_BASE),
}


def test_gpustack_table_names_every_option():
    for cmd in ("gpustack apply", "gpustack status"):
        assert sorted(o for c, o in GPUSTACK if c == cmd) == sorted(set(options(cmd)) - {"--preset"}), cmd


@pytest.mark.parametrize("cmd,opt", sorted(GPUSTACK))
def test_every_gpustack_option_changes_the_answer_or_is_refused(cmd, opt, monkeypatch):
    tokens, base = GPUSTACK[(cmd, opt)]
    before = _gpustack(base, monkeypatch)
    assert before[0] == 0, before
    after = _gpustack([*base, *tokens], monkeypatch)
    assert after != before or _refused_naming(after, opt), f"{cmd} {opt}: the answer is unchanged"


@pytest.mark.parametrize("tokens,where", [(["--probe-requests", "2"], "--probe-requests"), (["--slo", "ttft=1"], "--slo"),
                                          (["--timeout", "5"], "--timeout")])
def test_gpustack_status_refuses_what_applies_only_to_probe_or_watch(tokens, where, monkeypatch):
    code, out, _, _ = _gpustack([*STATUS_BASE, *tokens], monkeypatch)
    assert _refused_naming((code, out), where), out


# ------------------------------------------------------------------------------------------------ run status

def test_run_status_has_no_option_but_the_output_format():
    assert options("run status") == []


# ------------------------------------------------------------------------------------------------ operator run

OPERATOR = {
    "--namespace": ["--namespace", "llm"], "--metrics-port": ["--metrics-port", "0"],
    "--metrics-host": ["--metrics-host", "127.0.0.1"], "--resync": ["--resync", "30"],
    "--leader-elect": ["--leader-elect"], "--kubeconfig": ["--kubeconfig", "/tmp/k3-options-kubeconfig"],
    "--workers": ["--workers", "2"], "--log-level": ["--log-level", "debug"],
}


def _operator(tokens: list[str], monkeypatch) -> tuple:
    import gpustack_k3.operator.controller as controller

    seen: list = []
    monkeypatch.setattr(controller, "run", lambda *a, **kw: seen.append((a, sorted(kw.items()))) or 0)
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    root.handlers.clear()                                    # basicConfig acts only on a root without handlers
    try:
        r = CliRunner().invoke(cli, ["operator", "run", *tokens])
        got = root.level
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    return r.exit_code, seen, got


def test_operator_table_names_every_option():
    assert sorted(OPERATOR) == options("operator run")


@pytest.mark.parametrize("opt", sorted(OPERATOR))
def test_every_operator_option_reaches_the_controller(opt, monkeypatch):
    before = _operator([], monkeypatch)
    assert before[0] == 0 and before[1], before
    after = _operator(OPERATOR[opt], monkeypatch)
    assert after[0] == 0 and after != before, f"{opt}: the operator starts as without it"
