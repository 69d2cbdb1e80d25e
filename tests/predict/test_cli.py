"""`predict` and `advise` as a user runs them (in process: the estimator's tables load once per module)."""
from __future__ import annotations

import json
import sys

import pytest
import yaml

from gpustack_k3.cli.main import run
from tests.support import tiers


def _cli(capsys, *args):
    rc = run(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


def _load(out: str, fmt: str):
    return json.loads(out) if fmt == "json" else yaml.safe_load(out)


# ---------------------------------------------------------------- without the estimator


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_every_exit_is_structured_on_stdout(capsys, monkeypatch, tmp_path, fmt):
    from gpustack_k3.cli import predict_cmd

    from .doubles import FakeEstimator

    monkeypatch.setattr(predict_cmd, "_estimator", FakeEstimator)
    work = ("--input-len", "2000", "--output-len", "20", "--acceptance-length", "1.5")
    # 0: the prediction
    rc, out, _ = _cli(capsys, "predict", "--preset", "sglang-no-dcp", *work, "-o", fmt)
    d = _load(out, fmt)
    assert rc == 0 and d["ok"] is True and d["roles"][0]["benchmark"]["requests"] == 1
    # 2: a usage error click finds (both spellings of the option), an input error of ours
    for o in (["-o", fmt], [f"--output={fmt}"], [f"-o{fmt}"]):
        rc, out, _ = _cli(capsys, "predict", "--preset", "sglang-no-dcp", "--input-len", "x", *o)
        assert rc == 2 and _load(out, fmt)["ok"] is False and "--input-len" in _load(out, fmt)["error"]["message"]
    rc, out, _ = _cli(capsys, "predict", "--preset", "nope", *work, "-o", fmt)
    assert rc == 2 and _load(out, fmt)["error"]["where"] == "--preset"
    # 1: refused by the rules
    f = tmp_path / "d.yaml"
    f.write_text("apiVersion: k3.gpustack.ai/v1alpha1\nkind: K3Deployment\nmetadata: {name: x}\nspec:\n"
                 "  engine: {name: vllm, version: kimi-k3}\n  parallel: {tp: 8, dcp: 8}\n"
                 "  speculative: {method: dspark, draftModel: Inferact/Kimi-K3-DSpark, numTokens: 7}\n")
    rc, out, _ = _cli(capsys, "predict", str(f), *work, "-o", fmt)
    assert rc == 1 and _load(out, fmt)["exit_code"] == 1 and _load(out, fmt)["findings"]
    # advise: the measured lookup (0), its usage error (2), a refused objective (2)
    rc, out, _ = _cli(capsys, "advise", "--context", "65536", "--concurrency", "10", "--basis", "measured", "-o", fmt)
    assert rc == 0 and _load(out, fmt)["basis"] == "measured" and _load(out, fmt)["engine"] == "vllm"
    rc, out, _ = _cli(capsys, "advise", "--context", "0", "--concurrency", "10", "-o", fmt)
    assert rc == 2 and "--context" in _load(out, fmt)["error"]["message"]
    rc, out, _ = _cli(capsys, "advise", "--context", "65536", "--concurrency", "10", "--basis", "predicted",
                      "--objective", "goodput", "-o", fmt)
    assert rc == 2 and _load(out, fmt)["error"]["where"] == "--objective"
    rc, out, _ = _cli(capsys, "advise", "--context", "65536", "--concurrency", "10", "--topology",
                      "kimi-k3-b300-1p1d", "-o", fmt)
    assert rc == 2 and _load(out, fmt)["error"]["where"] == "--gpu-budget"


def test_usage_errors_are_json_with_o_json(capsys):
    rc, out, _ = _cli(capsys, "predict", "--preset", "vllm-seed", "--input-len", "x", "-o", "json")
    assert rc == 2 and json.loads(out)["ok"] is False and "--input-len" in json.loads(out)["error"]["message"]
    rc, out, _ = _cli(capsys, "predict", "--preset", "vllm-seed", "-o", "json")
    assert rc == 2 and json.loads(out)["error"]["where"] == "--input-len/--output-len"
    rc, out, err = _cli(capsys, "predict", "--preset", "nope", "--input-len", "1", "--output-len", "1")
    assert rc == 2 and out == "" and "unknown preset 'nope'" in err


def test_refused_spec_exits_1_with_findings(capsys, tmp_path):
    f = tmp_path / "d.yaml"
    f.write_text("apiVersion: k3.gpustack.ai/v1alpha1\nkind: K3Deployment\nmetadata: {name: x}\nspec:\n"
                 "  engine: {name: vllm, version: kimi-k3}\n  parallel: {tp: 8, dcp: 8}\n"
                 "  speculative: {method: dspark, draftModel: Inferact/Kimi-K3-DSpark, numTokens: 7}\n")
    rc, out, _ = _cli(capsys, "predict", str(f), "--input-len", "1000", "--output-len", "10", "-o", "json")
    d = json.loads(out)
    assert rc == 1 and d["exit_code"] == 1 and d["findings"][0]["rule"] == "vllm-dcp-with-dspark"


def test_other_commands_never_import_the_estimator():
    """predict and aiconfigurator-core load only for predict/advise: not on --help, validate or a measured advise."""
    import subprocess
    from pathlib import Path

    code = ("import json, sys\n"
            "from gpustack_k3.cli.main import run\n"
            "def mods(prefixes): return sorted(m for m in sys.modules if m.startswith(prefixes))\n"
            "run(['--help']); run(['validate', '--preset', 'vllm-seed', '-o', 'json']); run(['plan', '--preset', "
            "'vllm-seed', '-o', 'json'])\n"
            "before = mods(('gpustack_k3.predict', 'aiconfigurator_core'))\n"
            "run(['advise', '--context', '65536', '--concurrency', '10', '--basis', 'measured', '-o', 'json'])\n"
            "print('MODS' + json.dumps([before, mods(('aiconfigurator_core', 'pandas'))]))\n")
    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120,
                       env={**__import__("os").environ, "PYTHONPATH": str(root)})
    line = next(x for x in p.stdout.splitlines() if x.startswith("MODS"))
    assert json.loads(line[4:]) == [[], []], p.stderr


def test_missing_extra_names_it(capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "aiconfigurator_core" or m.startswith("aiconfigurator_core.")] + \
            ["aiconfigurator_core"]:
        monkeypatch.setitem(sys.modules, name, None)   # every import of it fails, as if not installed
    rc, out, err = _cli(capsys, "predict", "--preset", "sglang-no-dcp", "--input-len", "1000", "--output-len", "10",
                        "--acceptance-length", "1.5", "-o", "json")
    assert out, (rc, err)
    d = json.loads(out)
    assert rc == 2 and "gpustack-k3[predict]" in d["error"]["fix"] and "aiconfigurator-core" in err
    rc, out, _ = _cli(capsys, "advise", "--context", "65536", "--concurrency", "10", "-o", "json")
    d = json.loads(out)
    assert rc == 0 and d["basis"] == "measured" and d["engine"] == "vllm" and "[predict]" in d["note"]
    rc, out, _ = _cli(capsys, "advise", "--context", "65536", "--concurrency", "10", "--basis", "predicted", "-o", "json")
    assert rc == 2 and "gpustack-k3[predict]" in json.loads(out)["error"]["fix"]


# ---------------------------------------------------------------- with the estimator (tier `predict`)


@pytest.mark.predict
def test_predict_seed_vllm_64k(capsys):
    tiers.aiconfigurator()
    rc, out, _ = _cli(capsys, "predict", "--preset", "vllm-seed", "--input-len", "65536", "--output-len", "3000",
                      "--concurrency", "10", "--acceptance-length", "2.39", "-o", "json")
    assert rc == 0
    d = json.loads(out)
    r = d["roles"][0]
    dec = r["decode"]
    assert d["ok"] and r["role"] == "serve" and dec["batch"] == 10 and dec["tokens_per_step"] == 2.39
    assert dec["tpot_ms"] == pytest.approx(dec["step_ms"] / 2.39, rel=1e-3)
    assert sum(dec["breakdown_ms"].values()) == pytest.approx(dec["step_ms"], abs=0.01)
    assert r["bottleneck"]["decode_step"] == max(dec["breakdown_ms"], key=dec["breakdown_ms"].get)
    assert {"verify-kv-once", "moe-kernel", "vllm-budget"} <= set(r["assumptions"])
    assert len(r["prefill"]["chunks"]) == 2 and r["benchmark"]["requests"] == 10 and r["benchmark"]["e2e_s"] > 0
    # the ops AIC prices without a measured row stay a small, stated share of the step (README: ~5 %)
    assert dec["not_measured"] and 0 < dec["not_measured_share"] < 0.10
    rc, out, _ = _cli(capsys, "predict", "--preset", "vllm-seed", "--input-len", "65536", "--output-len", "3000",
                      "--concurrency", "10", "--acceptance-length", "2.39")
    assert rc == 0 and "bottleneck: moe_weights" in out and "TPOT" in out


@pytest.mark.predict
def test_predict_dcp_shrinks_attention_at_long_context(capsys):
    tiers.aiconfigurator()
    got = {}
    for preset in ("sglang-no-dcp", "sglang-seed"):
        rc, out, _ = _cli(capsys, "predict", "--preset", preset, "--input-len", "204800", "--output-len", "100",
                          "--concurrency", "4", "--acceptance-length", "1.1", "-o", "json")
        assert rc == 0, out
        got[preset] = json.loads(out)["roles"][0]["decode"]["breakdown_ms"]
    assert got["sglang-seed"]["attention_kv"] < got["sglang-no-dcp"]["attention_kv"] / 2


@pytest.mark.predict
def test_plan_vs_actual(capsys, tmp_path):
    tiers.aiconfigurator()
    f = tmp_path / "probe.json"
    f.write_text(json.dumps({"usable": True, "input_len": 4096, "output_len": 64, "concurrency": 2, "requests": 2,
                             "ttft_ms": {"mean": 900.0}, "tpot_ms": {"mean": 30.0}, "wall_s": 5.0}))
    rc, out, _ = _cli(capsys, "predict", "--preset", "sglang-no-dcp", "--measured", str(f),
                      "--acceptance-length", "1.3", "-o", "json")
    d = json.loads(out)
    assert rc == 0 and d["workload"]["input_len"] == 4096
    rows = {r["figure"]: r for r in d["plan_vs_actual"]}
    t = rows["ttft_mean_ms"]
    assert t["drift_pct"] == round((900.0 / t["predicted"] - 1) * 100, 1)
    assert {"tpot_mean_ms", "wall_s"} <= set(rows)


@pytest.mark.predict
def test_advise_ranks_refuses_and_finds_the_crossover(capsys):
    tiers.aiconfigurator()
    rc, out, _ = _cli(capsys, "advise", "--context", "65536", "--concurrency", "10", "-o", "json")
    d = json.loads(out)
    assert rc == 0 and d["basis"] == "predicted" and d["engine"] == "vllm"
    # the rule engine refuses every vLLM DCP>1 + DSpark candidate on the kimi-k3 release; none is recommended
    assert d["refusals"].get("vllm-dcp-with-dspark", 0) > 0
    from gpustack_k3.catalog import load_catalog

    refusing = {v for v, e in load_catalog().engines["vllm"].versions.items()
                if e.traits.get("dcp_with_spec") in ("refuse_dspark", "refuse_any")}
    assert {"kimi-k3", "0.28.0"} <= refusing
    rc, out, _ = _cli(capsys, "advise", "--context", "65536", "--concurrency", "10", "--engine", "vllm", "--top", "50",
                      "-o", "json")
    every = json.loads(out)["top"]
    dcp_spec = [c for c in every if c["knobs"]["dcp"] > 1 and c["knobs"]["drafts"] > 0]
    assert dcp_spec and all(not (set(c["releases"]) & refusing) for c in dcp_spec)   # only releases that take it
    decs = [c["figures"]["decode_tok_s"] for c in d["top"]]
    assert decs == sorted(decs, reverse=True)
    assert d["crossover"]["context"] and d["crossover"]["context"] > 65536
    rc, out, _ = _cli(capsys, "advise", "--context", "204800", "--concurrency", "10", "-o", "json")
    d = json.loads(out)
    assert rc == 0 and d["engine"] == "sglang" and d["winner"]["knobs"]["dcp"] >= 2
    rc, out, _ = _cli(capsys, "advise", "--context", "1000000", "--concurrency", "500")
    assert rc == 1 and "no preset" in out
    rc, out, _ = _cli(capsys, "advise", "--context", "65536", "--concurrency", "10", "--objective", "goodput", "-o",
                      "json")
    assert rc == 2 and json.loads(out)["error"]["where"] == "--objective"


@pytest.mark.predict
def test_advise_pd_ratio_within_a_gpu_budget(capsys):
    tiers.aiconfigurator()
    rc, out, _ = _cli(capsys, "advise", "--topology", "kimi-k3-b300-1p1d", "--gpu-budget", "32", "--context", "65536",
                      "--concurrency", "16", "--output-len", "1000", "-o", "json")
    d = json.loads(out)
    assert rc == 0 and d["candidates"]["total"] == 6      # (p, d) with 8p + 8d <= 32: 3 + 2 + 1
    w = d["winner"]
    assert w["gpus"] <= 32 and w["req_s"] == min(w["prefill_req_s"], w["decode_req_s"])
    assert [c["req_s"] for c in d["top"]] == sorted((c["req_s"] for c in d["top"]), reverse=True)
    rc, out, _ = _cli(capsys, "advise", "--topology", "vllm-seed", "--gpu-budget", "32", "--context", "1000",
                      "--concurrency", "1", "-o", "json")
    assert rc == 2 and json.loads(out)["error"]["where"] == "--topology"


def test_length_distribution_options(capsys, monkeypatch, tmp_path):
    from gpustack_k3.cli import predict_cmd

    from .doubles import FakeEstimator

    monkeypatch.setattr(predict_cmd, "_estimator", FakeEstimator)   # the workload path, not the tables
    base = ("predict", "--preset", "sglang-no-dcp", "--output-len", "20", "--acceptance-length", "1.5", "-o", "json")
    rc, out, _ = _cli(capsys, *base, "--input-len-dist", "2000:3,30000:1", "--requests", "8", "--seed", "4")
    d = json.loads(out)
    assert rc == 0, out
    w, b = d["workload"], d["roles"][0]["benchmark"]
    assert w["input_len"] == 9000 and w["input_len_dist"]["points"] == [[2000, 3.0], [30000, 1.0]] and w["seed"] == 4
    assert b["requests"] == 8 and b["sample"]["input_len"]["mean"] == 9000.0   # 6 x 2000 + 2 x 30000, exactly
    assert set(b["tpot_ms"]) == {"mean", "p50", "p90"}
    f = tmp_path / "lens.txt"
    f.write_text("2000\n2000\n2000\n30000\n")
    rc, out2, _ = _cli(capsys, *base, "--input-len-dist", f"@{f}", "--requests", "8", "--seed", "4")
    assert rc == 0 and json.loads(out2)["roles"] == d["roles"]          # the same distribution, the same run
    rc, out, _ = _cli(capsys, *base[:-2], "--input-len-dist", "2000:3,30000:1", "--requests", "8")
    assert rc == 0 and "9,000 mean (p50 2,000, p90 30,000, max 30,000) in" in out and "TPOT mean" in out \
        and "(p50 " in out.split("TPOT mean")[1]
    for args, where, part in ((("--input-len-dist", "2000:x", "--output-len", "9"), "--input-len-dist", "'2000:x'"),
                              (("--input-len", "5", "--input-len-dist", "5", "--output-len", "9"), "--input-len-dist",
                               "not both"),
                              (("--input-len", "5", "--output-len-dist", "@/nonexistent/x"), "--output-len-dist",
                               "/nonexistent/x: no such length file"),
                              (("--input-len", "5", "--output-len-dist", ""), "--output-len-dist", "no lengths")):
        rc, out, err = _cli(capsys, "predict", "--preset", "sglang-no-dcp", *args, "-o", "json")
        e = json.loads(out)["error"]
        assert rc == 2 and e["where"] == where and part in e["message"] and where in err, (args, out)
    rc, out, _ = _cli(capsys, "predict", "--preset", "sglang-no-dcp", "--input-len-dist", "100:1,2000000:1",
                      "--output-len", "20", "--acceptance-length", "1.5", "-o", "json")
    assert rc == 2 and json.loads(out)["error"]["where"] == "--input-len-dist"   # the longest exceeds max-model-len
