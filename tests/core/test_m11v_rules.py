"""Helper m11v (held-out seeds 57119 and 46901: vLLM misses), the product side:

- gpustack_k3/core/rules/spec.py dtype-vs-quantization reads --dtype auto as the release resolves it where config.json
  decides it (its dtype float16; float32 with --runner pooling becomes float16): refused on an MXFP4 checkpoint;
- gpustack_k3/core/rules/vllm_checks_m11v.py warns where the term is a file the product does not read: --dtype auto
  with the pooling runner and no dtype in config.json (the weights decide; held-out seed 57119's 0.28.0 line), a draft
  model without num_speculative_tokens (the draft config's n_predict decides);
- the h-m11v block of gpustack_k3/catalog/data/checks/vllm.yaml (MTP method names without a count, dspark_draft_topk
  with MTP): its examples run in tests/core/test_checks_table.py and tests/engine_oracle/test_checks_vllm.py; the
  held-out 0.34.0 line is checked here.
tests/engine_oracle/test_m11v_rules_oracle.py has each release judge the same lines."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.vllm_checks_m11v import DRAFT_UNDECIDED, DTYPE_UNDECIDED
from tests.core.test_vllm_checks import product, shape_config

M11V_DIRECT = {DTYPE_UNDECIDED, DRAFT_UNDECIDED}   # wired in tests/core/test_registry.py and tests/core/test_rules.py

DTYPE_RULE = "dtype-vs-quantization"
DTYPE_RELEASES = ("0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0")
DRAFT_RELEASES = ("0.28.0", "0.29.0", "0.33.0", "0.34.0")
SMOL = ["/models/smollm2-hf"]
SMOL_M = "smollm2-135m"
POOL = ["--runner", "pooling"]


def gqa_model(dtype: str | None) -> str:
    """A model directory: the oracle's shape-gqa-yarn (gpt-oss, MXFP4) with config.json's torch_dtype set to ``dtype``
    (None: the shape itself, which gives none). Both the engine (argv) and the product (--model-config) read it."""
    src = Path(shape_config("shape-gqa-yarn")).parent
    if dtype is None:
        return str(src)
    dst = Path(tempfile.gettempdir()) / "gpustack-k3-m11v" / f"gqa-yarn-{dtype}"
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.name != "config.json":
            shutil.copyfile(f, dst / f.name)
    cfg = json.loads((src / "config.json").read_text())
    cfg["torch_dtype"] = dtype
    (dst / "config.json").write_text(json.dumps(cfg, indent=1))
    return str(dst)


def run(release: str, line: list[str], env: dict | None = None, model: str | None = None,
        config: str | None = None) -> tuple[dict, list[dict]]:
    """(the differential's product verdict, check-args' findings of every severity) in-process; ``config``: the
    config.json the product reads (--model-config)."""
    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args as cmd
    from tools.engine_oracle.product import _common, check_args

    env = env or {}
    entry = {"argv": line, "env": env, "model": model, "gpu_type": "b300", "gpus": 8}
    if config is not None:
        entry["model_config"] = config
    verdict = check_args("vllm", release, entry)
    args = _common("vllm", release, model, "b300", config) + ["--gpus", "8"]
    for k, v in sorted(env.items()):
        args += ["--env", f"{k}={v}"]
    res = CliRunner().invoke(cmd, args + ["--", *line])
    return verdict, json.loads(res.stdout if hasattr(res, "stdout") else res.output)["findings"]


def on_gqa(dtype: str | None, *flags: str) -> tuple[list[str], str]:
    d = gqa_model(dtype)
    return [d, "-tp", "8", *flags], f"{d}/config.json"


# (release, config.json dtype, flags, what the product says: the error rule, the warning rule or nothing)
DTYPE_LINES = [(rel, "float32", POOL, DTYPE_RULE) for rel in DTYPE_RELEASES] + [
    (rel, "float16", [], DTYPE_RULE) for rel in DTYPE_RELEASES] + [
    (rel, None, POOL, DTYPE_UNDECIDED) for rel in DTYPE_RELEASES] + [
    ("0.28.0", "float32", [], None),                                  # generate: float32 becomes bfloat16
    ("0.34.0", "bfloat16", POOL, None),                               # the config's bfloat16 stays
    ("0.33.0", "float32", POOL + ["--dtype", "bfloat16"], None),      # an explicit dtype: the rule's other arm
    ("0.29.0", None, [], None),                                       # no dtype, generate: bfloat16 (no warning)
]
DTYPE_IDS = [f"{c[0]}-{c[1]}-{'-'.join(c[2]) or 'generate'}" for c in DTYPE_LINES]


@pytest.mark.parametrize("release,dtype,flags,expect", DTYPE_LINES, ids=DTYPE_IDS)
def test_dtype_auto_against_the_quantization(release, dtype, flags, expect):
    line, cfg = on_gqa(dtype, *flags)
    verdict, found = run(release, line, config=cfg)
    ours = {f["rule"]: f for f in found if f["rule"] in (DTYPE_RULE, DTYPE_UNDECIDED)}
    if expect is None:
        assert not ours, ours
        return
    assert set(ours) == {expect}, ours
    if expect == DTYPE_RULE:
        assert verdict["verdict"] == "refuse" and DTYPE_RULE in verdict["rules"], verdict
        assert ours[DTYPE_RULE]["message"].startswith("float16 is not supported for quantization method mxfp4")
    else:
        assert ours[expect]["severity"] == "warning" and "safetensors weights" in ours[expect]["message"], ours


# (release, line, the warning expected)
DRAFT_LINES = [(rel, SMOL + ["--speculative-config", json.dumps(sc)], warned) for rel in DRAFT_RELEASES
               for sc, warned in (({"model": "/models/smollm2-hf"}, True),
                                  ({"method": "eagle3", "model": "/models/smollm2-hf"}, True),
                                  ({"model": "/models/smollm2-hf", "num_speculative_tokens": 2}, False),
                                  ({"method": "ngram", "num_speculative_tokens": 2}, False))] + [
    ("0.34.0", SMOL + ["--spec-model", "/models/smollm2-hf"], True),
    ("0.34.0", SMOL + ["--spec-model", "/models/smollm2-hf", "--spec-tokens", "2"], False),
]


@pytest.mark.parametrize("release,line,warned", DRAFT_LINES)
def test_a_draft_without_a_count_is_warned(release, line, warned):
    verdict, found = run(release, line, model=SMOL_M)
    mine = [f for f in found if f["rule"] == DRAFT_UNDECIDED]
    assert DRAFT_UNDECIDED not in verdict["rules"] or verdict["verdict"] != "refuse"
    if not warned:
        assert not mine, mine
        return
    assert len(mine) == 1 and mine[0]["severity"] == "warning", found
    assert "n_predict" in mine[0]["message"] and "/models/smollm2-hf" in mine[0]["message"]


def test_the_rules_are_on_the_releases_they_cite():
    assert {k.split()[1] for k in RULES[DTYPE_UNDECIDED].sources} == set(DTYPE_RELEASES)
    assert {k.split()[1] for k in RULES[DRAFT_UNDECIDED].sources} == set(DRAFT_RELEASES)
    for rid, rels in ((DTYPE_UNDECIDED, DTYPE_RELEASES), (DRAFT_UNDECIDED, DRAFT_RELEASES)):
        for rel in rels:
            assert f"@{rel}" in RULES[rid].sources[f"vllm {rel}"]


# held-out seed 57119, vLLM 0.34.0 (config/speculative.py:1654@0.34.0): a deprecated MTP method name without a count
HELDOUT_034 = ["/models/smollm2-hf", "--tensor-parallel-size", "1", "--max-model-len", "1024", "--enforce-eager",
               "--dtype", "bfloat16", "--served-model-name", "smollm2", "--host", "127.0.0.1", "--spec-method",
               "exaone_moe_mtp", "--kv-cache-metrics"]
HELDOUT_ENV = {"VLLM_CACHE_ROOT": "/cache/vllm", "VLLM_ENGINE_READY_TIMEOUT_S": "3600", "VLLM_CPU_KVCACHE_SPACE": "1",
               "VLLM_HOST_IP": "127.0.0.1", "VLLM_NO_USAGE_STATS": "1"}
# held-out seed 57119, vLLM 0.28.0 (config/vllm.py:783@0.28.0): the pooling runner's float16 on an MXFP4 checkpoint
HELDOUT_028 = ["/models/shape-gqa-yarn", "--tensor-parallel-size", "8", "--runner", "pooling",
               "--enable-expert-parallel", "--speculative-config",
               "{\"method\": \"dspark\", \"num_speculative_tokens\": 16, \"model\": \"Inferact/Kimi-K3-DSpark\"}"]


def test_the_heldout_mtp_alias_line_is_refused():
    got = product("0.34.0", HELDOUT_034, HELDOUT_ENV, SMOL_M)
    assert got["verdict"] == "refuse" and "vllm-spec-mtp-alias-without-tokens" in got["rules"], got


def test_the_heldout_pooling_line_is_warned_with_the_term():
    verdict, found = run("0.28.0", HELDOUT_028, config=shape_config("shape-gqa-yarn"))
    mine = [f for f in found if f["rule"] == DTYPE_UNDECIDED]
    assert len(mine) == 1 and "config.json gives no dtype" in mine[0]["message"], found
    assert DTYPE_RULE not in verdict["rules"], verdict
