"""vLLM 0.34.0's cold-start markers, read from its wheel (tier engine_wheels): every vLLM marker whose version range
holds 0.34.0 names the 0.34.0 line that prints it, and its key is there; the markers of Model Runner V1, which 0.34.0
removed, end at 0.33.x and their keys are gone from the wheel; Model Runner V2's load line starts the weights
phase (gpustack_k3/coldstart/data/vllm.yaml)."""
from __future__ import annotations

import re
import zipfile

import pytest
from packaging.version import Version

from gpustack_k3.coldstart.catalog import load_catalog
from tests.support import tiers

V = Version("0.34.0")
MARKERS = [m for m in load_catalog().markers if m.engine == "vllm"]
IN_RANGE = [m for m in MARKERS if (m.since is None or Version(m.since) <= V) and (m.until is None or Version(m.until) >= V)]
# lines vLLM does not print itself (uvicorn): no vLLM file to read
NOT_VLLM = {"vllm-uvicorn-started", "vllm-uvicorn-ready"}
MRV1_ONLY = {"vllm-load-start", "vllm-drafter", "vllm-cudagraph-estimate"}
_CITE = re.compile(r"([\w/]+\.py):(\d+)(?:-(\d+))?@0\.34\.0")
_JOIN = re.compile(r"[\"']\s*\n\s*f?[\"']")   # adjacent string literals over lines, as Python joins them


def wheel_text() -> dict[str, str]:
    with zipfile.ZipFile(tiers.engine_wheel("vllm", "0.34.0")) as z:
        return {n[len("vllm/"):]: z.read(n).decode("utf-8") for n in z.namelist()
                if n.startswith("vllm/") and n.endswith(".py")}


@pytest.fixture(scope="module")
def files() -> dict[str, str]:
    return wheel_text()


def test_every_marker_of_0_34_0_names_its_0_34_0_line_or_is_not_vllms():
    unnamed = sorted(m.id for m in IN_RANGE if not _CITE.search(m.source))
    assert unnamed == sorted(NOT_VLLM)


@pytest.mark.engine_wheels
@pytest.mark.parametrize("marker", [m for m in IN_RANGE if m.id not in NOT_VLLM], ids=lambda m: m.id)
def test_the_cited_0_34_0_line_prints_the_key(marker, files):
    path, a, b = _CITE.search(marker.source).groups()
    a, b = int(a), int(b or a)
    lines = files[path].splitlines()
    window = _JOIN.sub("", "\n".join(lines[max(a - 4, 0):b + 3]))
    key = marker.key.strip()
    assert key in window or key[:24] in window, (marker.id, path, a, window)


@pytest.mark.engine_wheels
@pytest.mark.parametrize("mid", sorted(MRV1_ONLY))
def test_the_model_runner_v1_markers_end_at_0_33_and_their_lines_are_gone(mid, files):
    m = next(m for m in MARKERS if m.id == mid)
    assert m.until == "0.33.99"
    assert not any(m.key in t for t in files.values())


def test_the_mrv2_load_line_starts_the_weights_phase():
    m = next(m for m in MARKERS if m.id == "vllm-load-start-mrv2")
    assert (m.phase, m.kind) == ("weights_load", "start") and m in IN_RANGE
