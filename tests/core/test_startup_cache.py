"""The start-up caches (gpustack_k3._startup_cache): the validated catalog and the deployment document's compiled
schema. Each process is a fresh interpreter with its own cache directory, as a CLI call would be."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

PROBE = r"""
import json, sys
import gpustack_k3.api.spec as spec
complete_at_import = spec.DeploymentDocument.__pydantic_complete__
from gpustack_k3.catalog import load_catalog
from pydantic import ValidationError
cat = load_catalog()
good = spec.DeploymentDocument.model_validate(cat.presets["sglang-seed"].document)
bad = dict(cat.presets["vllm-seed"].document)
bad["spec"] = {**bad["spec"], "parallel": {"tp": "eight"}, "serving": {"port": 0}, "typo": 1}
try:
    spec.DeploymentDocument.model_validate(bad)
    errors = []
except ValidationError as e:
    errors = [(list(x["loc"]), x["type"], x["msg"]) for x in e.errors()]
from gpustack_k3.cli.main import run
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = run(["validate", "--preset", "vllm-seed", "-o", "json"])
built = sorted(n for n, c in vars(spec).items()
               if isinstance(c, type) and issubclass(c, spec.BaseModel) and c is not spec.BaseModel
               and c.__module__ == spec.__name__ and c.__pydantic_complete__)
print(json.dumps({"complete_at_import": complete_at_import, "good": good.model_dump(mode="json"),
                  "errors": errors, "validate_exit": code, "validate_out": json.loads(out.getvalue()),
                  "built": built}))
"""


def probe(cache: str) -> dict:
    env = {**os.environ, "GPUSTACK_K3_CATALOG_CACHE": cache, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_first_run_builds_and_stores_later_runs_install(tmp_path):
    first = probe(str(tmp_path))
    assert sorted(p.name.rsplit("-", 1)[0] for p in tmp_path.iterdir()) == ["catalog", "spec-schema"]
    assert not first["complete_at_import"]
    second = probe(str(tmp_path))
    assert second["complete_at_import"]                         # installed from the cache, nothing built
    off = probe("off")
    assert not off["complete_at_import"]
    for key in ("good", "errors", "validate_exit", "validate_out"):
        assert first[key] == second[key] == off[key], key        # the cached schema behaves exactly as a build
    assert {tuple(e[0]) for e in second["errors"]} >= {("spec", "parallel", "tp"), ("spec", "serving", "port"),
                                                         ("spec", "typo")}
    assert second["validate_exit"] == 0 and second["validate_out"]["findings"]
    # a CLI call builds no nested model: defaults are constructed, sections are read, not dumped
    assert second["built"] == ["DeploymentDocument"]


def test_broken_cache_files_are_rebuilt(tmp_path):
    reference = probe(str(tmp_path))
    files = sorted(tmp_path.iterdir())
    for f in files:
        f.write_bytes(b"\x80\x05not a pickle")
    again = probe(str(tmp_path))
    assert not again["complete_at_import"]                      # the broken schema entry was not used
    assert again["good"] == reference["good"] and again["validate_out"] == reference["validate_out"]
    assert all(f.read_bytes()[:2] != b"\x80\x05n" for f in files)   # rewritten with valid entries
    assert probe(str(tmp_path))["complete_at_import"]


def test_unwritable_cache_dir_is_no_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = probe(str(blocker / "sub"))
    assert out["validate_exit"] == 0 and not out["complete_at_import"]


def test_constructed_defaults_equal_validated_ones():
    """Defaults are made with model_construct (no lazy build); they must equal what validation would give."""
    from gpustack_k3.api import spec

    for model in (spec.DeploymentSpec, spec.Storage):
        for name, info in model.model_fields.items():
            if info.default_factory is None:
                continue
            made = info.default_factory()
            if isinstance(made, spec.BaseModel):
                again = type(made).model_validate(made.model_dump(exclude_unset=True))
                assert made == again and made.model_fields_set == again.model_fields_set, f"{model.__name__}.{name}"


@pytest.mark.parametrize("name", ["catalog-x.pickle", "spec-schema-y.pickle"])
def test_cache_location_follows_the_environment(monkeypatch, tmp_path, name):
    from gpustack_k3 import _startup_cache

    monkeypatch.setenv("GPUSTACK_K3_CATALOG_CACHE", "off")
    assert _startup_cache.cache_file(name) is None
    monkeypatch.setenv("GPUSTACK_K3_CATALOG_CACHE", str(tmp_path))
    assert _startup_cache.cache_file(name) == tmp_path / name
    monkeypatch.delenv("GPUSTACK_K3_CATALOG_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _startup_cache.cache_file(name) == tmp_path / "xdg" / "gpustack-k3" / name
    _startup_cache.store(name, {"a": 1})
    assert _startup_cache.load(name) == {"a": 1}


def test_no_home_directory_means_no_cache_not_a_crash(tmp_path):
    """An arbitrary container uid without HOME or a passwd entry: the CLI still works, uncached."""
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME", "GPUSTACK_K3_CATALOG_CACHE")}
    code = ("import os, pathlib, pwd\n"
            "def nobody(uid): raise KeyError(uid)\n"
            "pwd.getpwuid = nobody\n"
            "from gpustack_k3 import _startup_cache\n"
            "assert _startup_cache.cache_file('x') is None\n"
            "from gpustack_k3.cli.main import run\n"
            "raise SystemExit(run(['validate', '--preset', 'vllm-fixed', '-o', 'json']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**env, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ok"] is True


def test_a_new_entry_keeps_only_the_newest_of_its_kind(monkeypatch, tmp_path):
    from gpustack_k3 import _startup_cache

    monkeypatch.setenv("GPUSTACK_K3_CATALOG_CACHE", str(tmp_path))
    for i, name in enumerate(["spec-schema-a1.pickle", "spec-schema-a2.pickle", "spec-schema-a3.pickle",
                              "spec-schema-a4.pickle", "spec-schema-a5.pickle", "catalog-b.pickle", "other.txt"]):
        (tmp_path / name).write_bytes(b"x")
        os.utime(tmp_path / name, (1000 + i, 1000 + i))
    _startup_cache.store("spec-schema-new.pickle", 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "catalog-b.pickle", "other.txt", "spec-schema-a3.pickle", "spec-schema-a4.pickle", "spec-schema-a5.pickle",
        "spec-schema-new.pickle"]


def test_the_key_is_that_of_the_classes_in_memory_even_if_the_file_changes(tmp_path):
    """An upgrade under a running process: the schema built from the classes imported earlier is stored
    under the key of the bytes they came from, not of the new file."""
    import shutil

    pkg = tmp_path / "src"
    shutil.copytree(ROOT / "gpustack_k3", pkg / "gpustack_k3", ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "cache"
    code = """
import pathlib
import gpustack_k3.api.spec as spec
name = spec._SCHEMA_CACHE
p = pathlib.Path(spec.__file__)
p.write_text(p.read_text() + "\\n# edited\\n")
from gpustack_k3.catalog import load_catalog
spec.DeploymentDocument.model_validate(load_catalog().presets["vllm-fixed"].document)
print(name)
"""
    env = {**os.environ, "GPUSTACK_K3_CATALOG_CACHE": str(cache), "PYTHONPATH": str(pkg)}
    # cwd: `python -c` puts the working directory first on sys.path; run from the checkout, it imported (and
    # edited) the checkout's own api/spec.py instead of the copy
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    stored = sorted(p.name for p in cache.glob("spec-schema-*"))
    assert stored == [proc.stdout.strip()]
