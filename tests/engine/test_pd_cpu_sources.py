"""The KV-transfer catalog (gpustack_k3/probe/data/kvtransfer.yaml) against the releases it cites: every series
it reads is declared, under that name, in a file its ``source`` cites inside the released wheel (vllm 0.33.0,
sglang 0.5.23), and every label value it selects is spelled there. A renamed metric in a release fails here,
not as a silent "cannot tell" in a probe. Needs the wheels (tier engine_wheels: skips without them, fails under
CI=true)."""
from __future__ import annotations

import re
import zipfile

import pytest

from gpustack_k3.probe.kvtransfer import load_kv_catalog
from tests.support import tiers

pytestmark = [pytest.mark.engine, pytest.mark.engine_wheels]

RELEASES = {"vllm": ("vllm", "0.33.0", "vllm/"), "sglang": ("sglang", "0.5.23", "sglang/")}
_CITED = re.compile(r"\b((?:v1|distributed|srt|entrypoints)/[\w/]+\.py)")
_SUFFIX = re.compile(r"_(?:total|count|sum|bucket)$")


def _files(wheel, root: str, source: str) -> dict[str, str]:
    """The cited files' text from the wheel (a citation without a directory is looked up by its tail)."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        out = {}
        for cited in _CITED.findall(source):
            found = [n for n in names if n == root + cited or (n.startswith(root) and n.endswith("/" + cited))]
            for n in found:
                out[n] = z.read(n).decode("utf-8", "replace")
        return out


@pytest.mark.parametrize("engine", sorted(RELEASES))
def test_every_series_of_the_catalog_is_declared_where_it_cites(engine):
    dist, version, root = RELEASES[engine]
    wheel = tiers.engine_wheel(dist, version)
    ev = load_kv_catalog().engines[engine]
    checked = 0
    for key, sig in ev.signals.items():
        assert f"@{version}" in sig.source, (key, sig.source)
        files = _files(wheel, root, sig.source)
        assert files, f"{engine} {key}: no cited file of {sig.source!r} is in {wheel.name}"
        text = "\n".join(files.values())
        for s in sig.series:
            # prometheus_client exposes a Counter as <name>_total and a Histogram's count as <name>_count; the
            # releases declare a counter with or without the suffix (SGLang: "sglang:realtime_tokens_total")
            base = _SUFFIX.sub("", s.name)
            assert f'name="{base}"' in text or f'name="{s.name}"' in text, (
                f"{engine} {key}: {base} is not declared in {sorted(files)}")
            for label, value in s.labels:
                assert f'"{value}"' in text, f"{engine} {key}: {label}={value!r} is not spelled in {sorted(files)}"
            checked += 1
    assert checked >= 5


def test_the_block_size_comes_from_vllms_cache_config_info():
    wheel = tiers.engine_wheel("vllm", "0.33.0")
    name, label = load_kv_catalog().engines["vllm"].block_size
    with zipfile.ZipFile(wheel) as z:
        loggers = z.read("vllm/v1/metrics/loggers.py").decode()
        cache = z.read("vllm/config/cache.py").decode()
    assert f'name = "{name}"' in loggers
    assert re.search(rf"^\s+{label}: ", cache, re.MULTILINE), f"CacheConfig has no field {label}"
