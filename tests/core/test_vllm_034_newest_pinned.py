"""The newest engine release the wheel cache list names is pinned: `.ci/setup_engine_wheels.sh` fetches every
catalog version's wheel (tools/engine_parsers/dump.py --wheels) plus its DIFFED list (releases diffed with
tools/release_diff.py before they are pinned). Adding a newer vLLM or SGLang wheel there fails this test until the
catalog pins that release (README: adding a release), so the catalog's newest pinned release never lags the wheels."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from packaging.version import InvalidVersion, Version

from gpustack_k3.catalog import load_catalog
from tools.engine_parsers import dump as dump_tool

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / ".ci" / "setup_engine_wheels.sh"
ENGINES = ("vllm", "sglang")


def diffed(script_text: str) -> list[tuple[str, str]]:
    """(engine, version) of the script's DIFFED=(...) array: the wheels it fetches beyond the catalog's."""
    m = re.search(r"^DIFFED=\(([^)]*)\)", script_text, re.M)
    assert m, f"{SCRIPT.relative_to(REPO)} has no DIFFED=(...) list"
    out = []
    for spec in shlex.split(m.group(1)):
        name, sep, version = spec.partition("==")
        assert sep, f"DIFFED entry {spec!r} is not NAME==VERSION"
        out.append((name, version))
    return out


def pinned() -> dict[str, list[Version]]:
    """Every release the catalog pins with a public wheel (parser.wheel), per engine."""
    out: dict[str, list[Version]] = {e: [] for e in ENGINES}
    for engine, version, _ in dump_tool.catalog_targets():
        out[engine].append(Version(version))
    return out


def lagging(listed: list[tuple[str, str]], pins: dict[str, list[Version]]) -> list[str]:
    """What the wheel list names newer than the engine's newest pinned release."""
    problems = []
    for engine in ENGINES:
        newest = max(pins[engine], default=None)
        for name, version in listed:
            if name != engine:
                continue
            try:
                v = Version(version)
            except InvalidVersion:
                problems.append(f"{name}=={version}: not a release version")
                continue
            if newest is None or v > newest:
                problems.append(f"{engine} {version} is in the wheel cache list but the catalog's newest pinned "
                                f"{engine} is {newest}: pin it (catalog/data/engines/{engine}.yaml, README: adding a "
                                "release)")
    return problems


def test_the_newest_release_in_the_wheel_cache_list_is_pinned():
    listed = diffed(SCRIPT.read_text(encoding="utf-8"))
    listed += [(e, str(v)) for e, vs in pinned().items() for v in vs]
    assert lagging(listed, pinned()) == []


def test_a_newer_wheel_in_the_list_fails_the_check():
    script = 'WANT=()\nDIFFED=("vllm==99.0.0" "sglang==0.5.22")\nfor spec in "${DIFFED[@]}"; do :; done\n'
    listed = diffed(script)
    assert listed == [("vllm", "99.0.0"), ("sglang", "0.5.22")]
    (msg,) = lagging(listed, pinned())
    assert msg.startswith("vllm 99.0.0 is in the wheel cache list") and "0.34.0" in msg
    assert diffed("DIFFED=()\n") == []


def test_the_catalog_pins_vllm_0_34_0_as_its_newest_vllm_and_sglang_0_5_23():
    pins = pinned()
    assert max(pins["vllm"]) == Version("0.34.0") and max(pins["sglang"]) == Version("0.5.23")
    assert "0.34.0" in load_catalog().engines["vllm"].versions
