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
