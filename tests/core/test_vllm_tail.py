"""The vLLM tail of issue 31's misses: the oracle's classification of a refusal that follows the release's own
availability probe (gpustack_k3/oracle/engine_side/doubles.py probe_refused), and the check-table entries and rules
added for the seed-5153 misses (their engine verdicts: tests/engine_oracle/test_checks_vllm.py,
tests/engine_oracle/test_vllm_tail_oracle.py)."""
from __future__ import annotations

import pytest

from gpustack_k3.oracle.engine_side import doubles


@pytest.fixture()
def probes():
    saved = list(doubles.NEGATIVE_PROBES)
    doubles.NEGATIVE_PROBES.clear()
    yield doubles.NEGATIVE_PROBES
    doubles.NEGATIVE_PROBES[:] = saved


def _validate():
    raise ImportError("needs a package")


def _elsewhere():
    raise ImportError("needs a package")


def _raised(fn) -> BaseException:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001
        return exc
    raise AssertionError("did not raise")


def test_an_import_error_of_the_function_whose_probe_answered_false_is_the_probe(probes):
    probes.append(("arctic_inference", __file__, "_validate"))
    assert doubles.probe_refused(_raised(_validate)) == ("arctic_inference", __file__, "_validate")


def test_an_import_error_raised_elsewhere_stays_the_releases(probes):
    probes.append(("arctic_inference", __file__, "_validate"))
    assert doubles.probe_refused(_raised(_elsewhere)) is None


def test_without_a_negative_probe_nothing_is_excused(probes):
    assert doubles.probe_refused(_raised(_validate)) is None


def test_a_missing_module_or_another_type_is_not_the_probe(probes):
    probes.append(("arctic_inference", __file__, "_validate"))

    def _validate():   # same name, a ModuleNotFoundError: the chain's ModuleNotFoundError rule decides that one
        raise ModuleNotFoundError("x", name="x")

    assert doubles.probe_refused(_raised(_validate)) is None
    assert doubles.probe_refused(ValueError("no")) is None


# ---------------------------------------------------------------- check-table entries of the tail (product side)

KIMI = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8"]


@pytest.mark.parametrize("release", ["0.29.0", "0.34.0"])
def test_replayssm_is_not_refused_on_kimi_k3(release):
    # KimiK3ForConditionalGeneration implements SupportsReplaySSM (vllm/models/kimi_k3/nvidia/model.py:1689@0.34.0,
    # :1754@0.29.0): both releases accept this line (tests/engine_oracle/test_vllm_tail_oracle.py)
    from tests.core.test_vllm_checks import product

    ours = product(release, [*KIMI, "--use-replayssm"], {}, "kimi-k3")
    assert "vllm-replayssm-unsupported-architecture" not in ours["rules"], ours


def test_replayssm_is_refused_on_a_llama():
    from tests.core.test_vllm_checks import product

    ours = product("0.34.0", ["/models/smollm2-hf", "--use-replayssm"], {}, "smollm2-135m")
    assert "vllm-replayssm-unsupported-architecture" in ours["rules"], ours


@pytest.mark.parametrize("release,name,refused", [
    ("0.34.0", "none", False),       # parse_reasoning_parser maps none to unset from 0.33.0 on
    ("0.33.0", "NONE", False),
    ("0.28.0", "none", True),        # 0.28.0 looks "none" up and refuses it
    ("0.34.0", "zaya", False),       # registered in 0.34.0 only
    ("0.33.0", "zaya", True),
    ("0.34.0", "kimi_k3", False),
])
def test_reasoning_parser_names_are_per_release(release, name, refused):
    from tests.core.test_vllm_checks import product

    ours = product(release, ["/models/smollm2-hf", "--reasoning-parser", name], {}, "smollm2-135m")
    rid = f"vllm-reasoning-parser-unknown-{release.replace('.', '')[:3]}"
    assert (rid in ours["rules"]) is refused, ours


def test_kimi_k3_mtp_with_zero_layers_is_refused_on_034_only_with_tokens():
    from tests.core.test_vllm_checks import product

    mtp = [*KIMI, "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 5}']
    assert "vllm-kimi-k3-mtp-zero-layers-034" in product("0.34.0", mtp, {}, "kimi-k3")["rules"]
    dspark = [*KIMI, "--speculative-config",
              '{"model": "Inferact/Kimi-K3-DSpark", "num_speculative_tokens": 7, "method": "dspark"}']
    assert "vllm-kimi-k3-mtp-zero-layers-034" not in product("0.34.0", dspark, {}, "kimi-k3")["rules"]


COMPILATION_MODE_CASES = [   # (--compilation-config JSON, the release's message or None: accepted)
    ('{"mode": "auto"}', "Invalid compilation mode: auto. Valid modes are: NONE, STOCK_TORCH_COMPILE, "
                         "DYNAMO_TRACE_ONCE, VLLM_COMPILE"),
    ('{"mode": 8}', "Input should be 0, 1, 2 or 3"),
    ('{"mode": "vllm_compile"}', None),
    ('{"mode": 0}', None),
]


@pytest.mark.parametrize("release", ["0.28.0", "0.34.0"])
@pytest.mark.parametrize("cfg,message", COMPILATION_MODE_CASES)
def test_compilation_mode_as_the_field_reads_it(release, cfg, message):
    from tests.core.test_vllm_checks import product

    ours = product(release, ["/models/smollm2-hf", "--compilation-config", cfg], {}, "smollm2-135m")
    if message is None:
        assert "vllm-compilation-config-invalid" not in ours["rules"], ours
    else:
        assert "vllm-compilation-config-invalid" in ours["rules"] and message in ours["message"], ours
