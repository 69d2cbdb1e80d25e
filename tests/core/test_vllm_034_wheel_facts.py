"""The data of vLLM 0.34.0's catalog entry that its rules compare against, re-read from the 0.34.0 and 0.33.0 wheels
(tier engine_wheels; a missing wheel skips on a developer machine and fails under CI=true: tests/support/tiers.py)."""
from __future__ import annotations

import ast
import re
import zipfile

import pytest

from gpustack_k3.catalog import load_catalog
from tests.support import tiers

pytestmark = pytest.mark.engine_wheels

V = load_catalog().engines["vllm"].versions["0.34.0"]


def source(version: str, path: str) -> str:
    with zipfile.ZipFile(tiers.engine_wheel("vllm", version)) as z:
        return z.read(f"vllm/{path}").decode("utf-8")


def init_fields(version: str) -> list[str]:
    """SpeculativeConfig's dataclass fields that __init__ takes (not ClassVar, not field(init=False))."""
    cls = next(n for n in ast.parse(source(version, "config/speculative.py")).body
               if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig")
    out = []
    for s in cls.body:
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and "ClassVar" not in ast.unparse(s.annotation):
            v = s.value
            if isinstance(v, ast.Call) and any(k.arg == "init" and getattr(k.value, "value", True) is False
                                               for k in v.keywords):
                continue
            out.append(s.target.id)
    return out


def test_speculative_config_fields_are_the_release_init_fields():
    assert V.traits["speculative_config_fields"] == init_fields("0.34.0")


def test_removed_speculative_keys_were_fields_of_0_33_0_and_are_not_of_0_34_0():
    removed = set(V.traits["speculative_removed_keys"])
    assert removed <= set(init_fields("0.33.0")) and not removed & set(init_fields("0.34.0"))


def test_refused_env_is_the_release_removed_list():
    tree = ast.parse(source("0.34.0", "envs.py"))
    node = next(n for n in tree.body if isinstance(n, ast.AnnAssign)
                and getattr(n.target, "id", "") == "removed_environment_variables")
    assert sorted(V.traits["env_refused"]) == sorted(k.value for k in node.value.keys)


def test_nixl_connector_version_and_parallel_drafting_methods():
    assert re.search(rf"^NIXL_CONNECTOR_VERSION: int = {V.traits['nixl_connector_version']}$",
                     source("0.34.0", "distributed/kv_transfer/kv_connector/v1/nixl/metadata.py"), re.M)
    spec = source("0.34.0", "config/speculative.py")
    m = re.search(r"self\.method not in \(([^)]*)\)", spec)
    assert m and sorted(re.findall(r'"(\w+)"', m.group(1))) == sorted(V.traits["parallel_drafting_methods"])
