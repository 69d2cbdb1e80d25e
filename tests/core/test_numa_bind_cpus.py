"""Rule vllm-numa-bind-cpus-syntax (gpustack_k3/core/rules/vllm_checks.py): vLLM 0.28.0 .. 0.34.0 refuse a
--numa-bind-cpus entry that is not a numactl CPU list or holds a descending range (ParallelConfig's field validator,
config/parallel.py:35,533-557@0.34.0); the product refuses exactly those lines and passes the ones the release
takes. tests/engine_oracle/test_numa_bind_cpus_oracle.py has each release judge the same values."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.rules import RULES
from tests.core.test_vllm_checks import SMOL, product

RID = "vllm-numa-bind-cpus-syntax"
RELEASES = ("0.28.0", "0.29.0", "0.33.0", "0.34.0")
# (entries, the release's message); the validator's own example values and their near misses
REFUSED = [
    (["synth-numa-bind-cpus"], "numa_bind_cpus entries must use numactl CPU list syntax"),
    (["0-3,"], "numa_bind_cpus entries must use numactl CPU list syntax"),
    (["0--3"], "numa_bind_cpus entries must use numactl CPU list syntax"),
    (["0-3-5"], "numa_bind_cpus entries must use numactl CPU list syntax"),
    (["0,a"], "numa_bind_cpus entries must use numactl CPU list syntax"),
    (["0-3", "4-x"], "numa_bind_cpus entries must use numactl CPU list syntax"),   # the second entry
    (["3-1"], "numa_bind_cpus ranges must be ascending, but got '3-1'."),
    (["0,2,7-4"], "numa_bind_cpus ranges must be ascending, but got '0,2,7-4'."),
]
ACCEPTED = [["0-3"], ["0,2,4-7"], ["0"], ["7-7"], ["0-3", "4-7"], ["\u0660-\u0663"]]   # \d: any Unicode digit


def line(entries: list[str]) -> list[str]:
    return [SMOL, "--numa-bind", "--numa-bind-cpus", *entries]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("entries,message", REFUSED, ids=[repr(c[0]) for c in REFUSED])
def test_a_value_outside_numactl_cpu_list_syntax_is_refused(release, entries, message):
    res = product(release, line(entries), {})
    assert res["verdict"] == "refuse" and res["rules"] == [RID], res
    assert res["message"].startswith(f"{RID}: {message}"), res


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("entries", ACCEPTED, ids=[repr(e) for e in ACCEPTED])
def test_a_numactl_cpu_list_passes(release, entries):
    res = product(release, line(entries), {})
    assert res["verdict"] == "pass", res


def test_the_issue_line_is_refused_on_the_flag():
    # issue #31's line, as typed (0.34.0 implies --numa-bind from the list): exit 1, the finding on the flag
    argv = ["/models/shape-gqa-dense", "--tensor-parallel-size", "8", "--numa-bind-cpus", "synth-numa-bind-cpus"]
    done = subprocess.run([sys.executable, "-m", "gpustack_k3", "check-args", "--engine", "vllm", "--engine-version",
                           "0.34.0", "-o", "json", "--", *argv], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 1, done.stderr
    found = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == RID]
    assert [f["field"] for f in found] == ["spec.extraArgs[0]"], found   # tp and the model are spec fields
    assert "config/parallel.py:35,533-557@0.34.0" in found[0]["source"]


def test_the_rule_applies_to_the_releases_with_the_validator():
    # 0.11.0 has no --numa-bind-cpus (its parser refuses the flag: rule argv-refused)
    assert sorted(v for _, v in RULES[RID].versions(load_catalog())) == list(RELEASES)
