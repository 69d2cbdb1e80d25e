"""Tier engine_oracle: the offload options' bounds. vLLM lists --cpu-offload-gb, --offload-group-size,
--offload-num-in-group and --offload-prefetch-step in a group titled OffloadConfig while the values are built into
its nested classes (UVAOffloadConfig, PrefetchOffloadConfig: engine/arg_utils.py:1480-1506,2888-2900@0.34.0);
tools/engine_parsers/describe.py maps them to the nested class's field, so rule vllm-config-field-bounds knows
e.g. PrefetchOffloadConfig.offload_prefetch_step >= 0. Every bound the dumps now record for these options is
judged here by the release (refused just outside, accepted on the bound) and by the product alike."""
from __future__ import annotations

import pytest

from tests.engine_oracle.test_config_field_bounds_oracle import constraint_cases, product

pytestmark = pytest.mark.engine_oracle

OFFLOAD = ("--cpu-offload-gb:", "--offload-group-size:", "--offload-num-in-group:", "--offload-prefetch-step:")
BASE = ["/models/smollm2-hf"]
RELEASES = ("vllm-0.28.0", "vllm-0.29.0", "vllm-0.33.0", "vllm-0.34.0")


def joined(argv: list[str]) -> list[str]:
    """``--flag=value``: vLLM's pre-parse reads a token like -0.5 as a dotted option, not as a value
    (utils/argparse_utils.py:462-491@0.33.0), so a negative fraction is given in one token."""
    return [f"{argv[0]}={argv[1]}", *argv[2:]]


CASES = [(rel, c[0], c[1], joined(c[2]), joined(c[3])) for rel in RELEASES for c in constraint_cases(rel)
         if c[0].startswith(OFFLOAD)]


def test_the_dumps_map_the_offload_options_to_their_nested_classes():
    for rel in RELEASES:
        found = {c[0].split(":")[0] for c in constraint_cases(rel) if c[0].startswith(OFFLOAD)}
        assert found == {f.rstrip(":") for f in OFFLOAD}, (rel, found)


@pytest.mark.parametrize("release,case_id,bound,outside,on_bound", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_offload_bound_refused_outside_accepted_on_it(oracles, release, case_id, bound, outside, on_bound):
    judge = oracles(release)
    v_out, v_on = judge.judge_line(BASE + outside), judge.judge_line(BASE + on_bound)
    assert v_out["verdict"] == "refused", (bound, v_out)
    assert v_on["verdict"] == "accepted", (bound, v_on)
    code_out, found_out = product(release, BASE + outside)
    code_on, found_on = product(release, BASE + on_bound)
    assert code_out == 1 and any(f["rule"] == "vllm-config-field-bounds" for f in found_out), (bound, found_out)
    assert code_on == 0 and not found_on, (bound, found_on)
