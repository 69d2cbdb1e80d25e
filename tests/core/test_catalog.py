"""The catalog is data validated on load: broken data is refused with a message naming the problem."""
from __future__ import annotations

import shutil

import pytest
import yaml

from gpustack_k3.catalog.loader import DATA, CatalogError, load_catalog


@pytest.fixture
def data_copy(tmp_path):
    d = tmp_path / "data"
    shutil.copytree(DATA, d)
    return d


def edit(path, fn):
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_packaged_catalog_loads():
    cat = load_catalog()
    assert cat.hardware["b300"].visible_gib == 267.69 and cat.hardware["b300"].gpus_per_node == 8
    assert {"kimi-k3", "0.33.0", "0.29.0", "0.28.0", "0.11.0"} <= set(cat.engines["vllm"].versions)
    assert {"kimi-k3", "0.5.23", "0.5.22"} <= set(cat.engines["sglang"].versions)
    assert cat.engines["vllm"].versions["kimi-k3"].default and cat.engines["sglang"].versions["kimi-k3"].default
    assert cat.models["kimi-k3"].engines["vllm"].draft.modelscope == "skyai/Kimi-K3-DSpark"
    assert cat.models["kimi-k3"].engines["sglang"].draft.modelscope == "skyai/sglang-Kimi-K3-DSpark"


def test_copy_loads(data_copy):
    assert load_catalog(data_copy).default_preset == load_catalog().default_preset


@pytest.mark.parametrize("file,mutate,needle", [
    ("hardware.yaml", lambda d: d["hardware"]["b300"].update(visible_gib=-1), "visible_gib"),
    ("engines/vllm.yaml", lambda d: d["versions"]["0.33.0"].update(default=True), "exactly one version must be default"),
    ("engines/vllm.yaml", lambda d: d["flags"].append({"field": "x.y", "flag": "--max-num-seqs"}), "mapped twice"),
    ("engines/sglang.yaml", lambda d: d["versions"]["0.5.23"].update(bogus=1), "bogus"),
    ("engines/vllm.yaml", lambda d: d["versions"]["0.33.0"]["dspark_dcp_backends"]["verify"].update(X="sometimes"),
     "dspark_dcp_backends"),
    ("engines/vllm.yaml", lambda d: d["versions"]["0.33.0"]["compile_cache_env"].update(hashed="most"), "hashed"),
    ("presets/index.yaml", lambda d: d.update(default="nope"), "default preset nope"),
    ("advice.yaml", lambda d: d["presets"]["vllm"].append("ghost"), "unknown preset ghost"),
])
def test_broken_catalog_refused(data_copy, file, mutate, needle):
    edit(data_copy / file, mutate)
    with pytest.raises(CatalogError) as ei:
        load_catalog(data_copy)
    assert needle in str(ei.value)


def test_adding_an_engine_version_is_data(data_copy):
    """A new vLLM release is a data entry: its traits switch the right rules on (here: like 0.33.0)."""
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.core.resolve import resolve
    from gpustack_k3.core.rules import RULES, validate_resolved

    def add(d):
        v = dict(d["versions"]["0.33.0"])
        v["image"] = "vllm/vllm-openai:v0.34.0"
        d["versions"]["0.34.0"] = v
    edit(data_copy / "engines/vllm.yaml", add)
    cat = load_catalog(data_copy)
    doc = DeploymentDocument.model_validate({**cat.presets["vllm-seed"].document})
    doc.spec.engine.version = "0.34.0"
    doc.spec.parallel.dcp = 8
    doc.spec.speculative.attentionBackend = "TRITON_MLA"   # no supports_non_causal_multi_token_dcp @0.33.0
    rules = {f.rule for f in validate_resolved(resolve(doc, cat))}
    assert "vllm-dspark-dcp-backend" in rules and "vllm-dcp-with-dspark" not in rules
    assert ("vllm", "0.34.0") in RULES["vllm-dspark-dcp-backend"].versions(cat)
