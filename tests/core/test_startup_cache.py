"""The start-up caches (gpustack_k3._startup_cache): the validated catalog and the parser dumps, as plain JSON
keyed by content. Each process is a fresh interpreter with its own cache directory, as a CLI call would be."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

PROBE = r"""
import json, sys
import gpustack_k3.api.v1alpha1.spec as spec
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
from gpustack_k3 import _startup_cache
print(json.dumps({"catalog": _startup_cache._encode(cat, "gpustack_k3.catalog.loader"), "good": good.model_dump(mode="json"),
                  "errors": errors, "validate_exit": code, "validate_out": json.loads(out.getvalue()),
                  "built": built}))
"""


def probe(cache: str) -> dict:
    env = {**os.environ, "GPUSTACK_K3_CATALOG_CACHE": cache, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_first_run_builds_and_stores_later_runs_read(tmp_path):
    first = probe(str(tmp_path))
    # the catalog; besides it the engine-check tables (core/rules/checks.py) and the release's parser dump the
    # checks read (core/argv/dumps.py), each its own entry
    entries = sorted(tmp_path.iterdir())
    kinds = [p.name.rsplit("-", 1)[0] for p in entries]
    assert "catalog" in kinds and set(kinds) <= {"catalog", "checks"} | {k for k in kinds if k.startswith("parser-dump-")}
    for p in entries:
        assert p.suffix == ".json"
        json.loads(p.read_text())                                # plain JSON
    second = probe(str(tmp_path))
    off = probe("off")
    for key in ("catalog", "good", "errors", "validate_exit", "validate_out"):
        assert first[key] == second[key] == off[key], key        # the cached catalog is the built one
    assert {tuple(e[0]) for e in second["errors"]} >= {("spec", "parallel", "tp"), ("spec", "serving", "port"),
                                                         ("spec", "typo")}
    assert second["validate_exit"] == 0 and second["validate_out"]["findings"]
    # a CLI call builds no nested model: defaults are constructed, sections are read, not dumped
    assert second["built"] == ["DeploymentDocument"]


def test_broken_cache_files_are_rebuilt(tmp_path):
    reference = probe(str(tmp_path))
    files = sorted(tmp_path.iterdir())
    for f in files:
        f.write_bytes(b'{"format": "not this')
    again = probe(str(tmp_path))
    assert again["catalog"] == reference["catalog"] and again["validate_out"] == reference["validate_out"]
    assert all(json.loads(f.read_text())["format"] != "not this" for f in files)   # rewritten with valid entries


def test_unwritable_cache_dir_is_no_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = probe(str(blocker / "sub"))
    assert out["validate_exit"] == 0


def test_constructed_defaults_equal_validated_ones():
    """Defaults are made with model_construct (no lazy build); they must equal what validation would give."""
    from gpustack_k3.api.v1alpha1 import spec

    for model in (spec.DeploymentSpec, spec.Storage):
        for name, info in model.model_fields.items():
            if info.default_factory is None:
                continue
            made = info.default_factory()
            if isinstance(made, spec.BaseModel):
                again = type(made).model_validate(made.model_dump(exclude_unset=True))
                assert made == again and made.model_fields_set == again.model_fields_set, f"{model.__name__}.{name}"


@pytest.mark.parametrize("name", ["catalog-x.json", "parser-dump-y.json"])
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
    for i, name in enumerate(["parser-dump-a1.json", "parser-dump-a2.json", "parser-dump-a3.json",
                              "parser-dump-a4.json", "parser-dump-a5.json", "catalog-b.json", "other.txt"]):
        (tmp_path / name).write_bytes(b"x")
        os.utime(tmp_path / name, (1000 + i, 1000 + i))
    _startup_cache.store("parser-dump-new.json", 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "catalog-b.json", "other.txt", "parser-dump-a3.json", "parser-dump-a4.json", "parser-dump-a5.json",
        "parser-dump-new.json"]


def _copy_package(tmp_path) -> pathlib.Path:
    import shutil

    pkg = tmp_path / "src"
    shutil.copytree(ROOT / "gpustack_k3", pkg / "gpustack_k3", ignore=shutil.ignore_patterns("__pycache__"))
    return pkg


def _validate(pkg: pathlib.Path, cache: pathlib.Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPUSTACK_K3_CATALOG_CACHE": str(cache), "PYTHONPATH": str(pkg)}
    code = "from gpustack_k3.cli.main import run; raise SystemExit(run(['validate', '--preset', 'vllm-fixed', '-o', 'json']))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          check=False, cwd=pkg)


def test_a_changed_loader_or_model_module_misses_the_warm_cache(tmp_path):
    """The key covers code as well as data: with a warm cache, a loader that now raises must raise (it used to be
    skipped because the key hashed the data files only), and the loader restored hits the warm entry again."""
    pkg, cache = _copy_package(tmp_path), tmp_path / "cache"
    assert _validate(pkg, cache).returncode == 0
    warm = sorted(p.name for p in cache.iterdir())
    assert [n.rsplit("-", 1)[0] for n in warm if n.startswith("catalog")] == ["catalog"]
    loader = pkg / "gpustack_k3" / "catalog" / "loader.py"
    text = loader.read_text()
    loader.write_text(text.replace("def _load_and_validate(DATA: Path) -> Catalog:\n",
                                   "def _load_and_validate(DATA: Path) -> Catalog:\n    raise RuntimeError('broken loader')\n"))
    broken = _validate(pkg, cache)
    assert broken.returncode != 0 and "broken loader" in broken.stderr
    loader.write_text(text)
    assert _validate(pkg, cache).returncode == 0
    assert sorted(p.name for p in cache.iterdir()) == warm


def test_a_changed_data_file_misses_the_warm_cache_even_at_the_same_size_and_mtime(tmp_path):
    """Data files are keyed by content: an edit that keeps the size (one digit of a figure) and the
    modification time still rebuilds the catalog, and the rebuilt catalog has the edit."""
    pkg, cache = _copy_package(tmp_path), tmp_path / "cache"
    assert _validate(pkg, cache).returncode == 0
    hw = pkg / "gpustack_k3" / "catalog" / "data" / "hardware.yaml"
    text = hw.read_text()
    assert "visible_gib: 267.69" in text
    before = hw.stat().st_mtime_ns
    hw.write_text(text.replace("visible_gib: 267.69", "visible_gib: 266.69", 1))
    os.utime(hw, ns=(before, before))                      # the same mtime: only the content tells
    assert _validate(pkg, cache).returncode == 0
    assert len(list(cache.glob("catalog-*"))) == 2
    env = {**os.environ, "GPUSTACK_K3_CATALOG_CACHE": str(cache), "PYTHONPATH": str(pkg)}
    out = subprocess.run([sys.executable, "-c", "from gpustack_k3.catalog import load_catalog; "
                          "print(load_catalog().hardware['b300'].visible_gib)"], capture_output=True, text=True,
                         env=env, timeout=120, check=True, cwd=pkg)
    assert out.stdout.strip() == "266.69"


@pytest.fixture
def cache_env(monkeypatch, tmp_path):
    from gpustack_k3 import _startup_cache

    d = tmp_path / "cache"
    monkeypatch.setenv("GPUSTACK_K3_CATALOG_CACHE", str(d))
    _startup_cache.store("probe-x.json", {"a": 1})
    assert _startup_cache.load("probe-x.json") == {"a": 1}
    assert oct(d.stat().st_mode & 0o777) == "0o700" and oct((d / "probe-x.json").stat().st_mode & 0o777) == "0o600"
    return _startup_cache, d


def test_a_directory_others_can_write_is_neither_read_nor_written(cache_env):
    cache, d = cache_env
    d.chmod(0o777)
    assert cache.load("probe-x.json") is None
    cache.store("probe-y.json", 2)
    assert not (d / "probe-y.json").exists()
    d.chmod(0o700)
    assert cache.load("probe-x.json") == {"a": 1}


def test_a_file_others_can_write_or_own_is_not_read(cache_env):
    cache, d = cache_env
    f = d / "probe-x.json"
    f.chmod(0o666)
    assert cache.load("probe-x.json") is None
    f.chmod(0o600)
    if os.getuid() == 0:   # only root can give a file away
        os.chown(f, 12345, 12345)
        assert cache.load("probe-x.json") is None
        os.chown(f, 0, 0)
    assert cache.load("probe-x.json") == {"a": 1}


def test_symlinks_are_not_followed(cache_env, tmp_path, monkeypatch):
    cache, d = cache_env
    (tmp_path / "elsewhere").symlink_to(d)
    monkeypatch.setenv("GPUSTACK_K3_CATALOG_CACHE", str(tmp_path / "elsewhere"))
    assert cache.load("probe-x.json") is None
    monkeypatch.setenv("GPUSTACK_K3_CATALOG_CACHE", str(d))
    (d / "link.json").symlink_to(d / "probe-x.json")
    assert cache.load("link.json") is None


def test_a_torn_or_foreign_file_is_a_miss(cache_env):
    cache, d = cache_env
    f = d / "probe-x.json"
    blob = f.read_bytes()
    f.write_bytes(blob[:-1])                                   # torn: not JSON
    assert cache.load("probe-x.json") is None
    import pickle

    f.write_bytes(pickle.dumps({"a": 1}))                      # a pickle, as an older format wrote
    assert cache.load("probe-x.json") is None
    (d / "probe-z.json").write_bytes(blob)                     # another entry's file under this name
    assert cache.load("probe-z.json") is None


def test_an_entry_names_only_classes_of_the_cached_module_and_runs_no_code(cache_env, tmp_path):
    """A crafted entry can name no callable: a class outside the module, a function or a builtin is a miss."""
    cache, d = cache_env
    from gpustack_k3.catalog import loader

    module = loader.__name__
    f = d / "probe-x.json"
    marker = tmp_path / "ran"
    for tag in ("os.system", "system", "Path", "replace", "_dc", "DATA", "CatalogError.__init__"):
        f.write_text(json.dumps({"format": cache.FORMAT, "name": "probe-x.json",
                                 "data": {"__k3": tag, "v": {"args": ["touch " + str(marker)]}}}))
        assert cache.load("probe-x.json", module) is None, tag
    assert not marker.exists()
    f.write_text(json.dumps({"format": cache.FORMAT, "name": "probe-x.json",
                             "data": {"__k3": "ParserRef", "v": {"dump": "x.json"}}}))
    ref = cache.load("probe-x.json", module)
    assert type(ref) is loader.ParserRef and ref.dump == "x.json"   # a class of the module: attributes set, no call


def test_what_is_not_plain_data_is_not_stored(cache_env):
    cache, d = cache_env
    for obj in (b"bytes", pathlib.Path("/x"), object(), {"k": print}):
        cache.store("probe-n.json", obj)
        assert not (d / "probe-n.json").exists(), obj
    value = {"t": (1, "a"), "fs": frozenset({2}), "s": {3}, "m": {(1, 2): "x", "__k3": "y"}, "f": 1.5, "n": None}
    cache.store("probe-v.json", value)
    assert cache.load("probe-v.json") == value


_CHECK_ARGS = r"""
import contextlib, io, json
from gpustack_k3.cli.main import run
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = run(["check-args", "--engine", "vllm", "--engine-version", "0.33.0", "-o", "json", "--",
                "vllm", "serve", "m", "--tensor-parallel-size", "8", "--max-model-len", "65536", "--new-log-len", "10"])
print(json.dumps({"exit": code, "out": json.loads(out.getvalue())}))
"""


def _check_args(pkg: pathlib.Path, cache: str) -> dict:
    env = {**os.environ, "GPUSTACK_K3_CATALOG_CACHE": cache, "PYTHONPATH": str(pkg)}
    proc = subprocess.run([sys.executable, "-c", _CHECK_ARGS], capture_output=True, text=True, env=env, timeout=120,
                          check=False, cwd=pkg)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_parser_dump_is_cached_and_an_edited_dump_misses(tmp_path):
    """check-args reads a command line with the version's parser dump, read from the cache once warm; the
    answer is the same built, cached or with caches off, and an edit of the dump (same size, same mtime)
    is read, not the stale entry: here the edit gives the parser the option the command line uses."""
    pkg, cache = _copy_package(tmp_path), tmp_path / "cache"
    cold = _check_args(pkg, str(cache))
    entries = sorted(p.name for p in cache.glob("parser-dump-*"))
    assert [n.rsplit("-", 1)[0] for n in entries] == ["parser-dump-vllm-0.33.0-options"]
    warm, off = _check_args(pkg, str(cache)), _check_args(pkg, "off")
    assert cold == warm == off
    def refused(r: dict) -> list[str]:
        return [f["message"] for f in r["out"]["findings"] if f["rule"] == "argv-refused"]
    assert cold["exit"] == 1 and any("--new-log-len" in m for m in refused(cold))   # 0.33.0 has no such option
    dump = pkg / "gpustack_k3" / "catalog" / "data" / "engines" / "vllm-0.33.0-options.json"
    text, before = dump.read_text(), dump.stat().st_mtime_ns
    assert text.count('"--max-log-len"') == 1
    dump.write_text(text.replace('"--max-log-len"', '"--new-log-len"'))     # same size and mtime: the content tells
    os.utime(dump, ns=(before, before))
    edited = _check_args(pkg, str(cache))
    assert refused(edited) == [], edited
    assert len(list(cache.glob("parser-dump-vllm-0.33.0-options-*"))) == 2


_TYPES_PROBE = r"""
import dataclasses, json, shutil, sys, pathlib, uuid
from gpustack_k3.catalog import loader
warm = loader.load_catalog()
before = [dataclasses.is_dataclass(t) for t in loader._TYPES]
v = warm.version("vllm", None)
if sys.argv[2] == "replace":   # a warm entry copied with changes, before any validation in this process
    other = loader.replace(v, key="next", default=False)
    print(json.dumps([other.key, other.default, v.key, sorted(vars(other)) == sorted(vars(v))]))
    sys.exit(0)
copy = pathlib.Path(sys.argv[1])
shutil.rmtree(copy, ignore_errors=True)
shutil.copytree(loader.DATA, copy)
with (copy / "hardware.yaml").open("a") as fh:   # another content: the key misses and the copy is validated, here
    fh.write(f"# copy {uuid.uuid4()}\n")   # new in every run
fresh = loader.load_catalog(copy)
after = [dataclasses.is_dataclass(t) for t in loader._TYPES]
print(json.dumps({"before": before, "after": after, "same_class": type(v) is type(fresh.version("vllm", None)),
                  "equal": sorted(vars(v)) == sorted(vars(fresh.version("vllm", None))),
                  "n": len(loader._TYPES)}))
"""


def test_catalog_types_become_dataclasses_only_to_validate(tmp_path):
    """With a warm cache no catalog type is made a dataclass (that compiled fifteen __init__s at every start);
    loader.replace copies a warm entry with changes; a validation later in the same process makes the types
    dataclasses in place, and the entries read from the cache before stay instances of the same classes with the same
    fields."""
    env = {**os.environ, "GPUSTACK_K3_CATALOG_CACHE": str(tmp_path / "cache")}
    run = [sys.executable, "-c", _TYPES_PROBE, str(tmp_path / "data"), "validate"]
    subprocess.run(run, env=env, check=True, capture_output=True, timeout=120)    # fills the cache
    out = json.loads(subprocess.run(run, env=env, check=True, capture_output=True, text=True, timeout=120).stdout)
    assert out["n"] == 20 and not any(out["before"]) and all(out["after"])
    assert out["same_class"] and out["equal"]
    replaced = subprocess.run(run[:-1] + ["replace"], env=env, check=True, capture_output=True, text=True, timeout=120)
    assert json.loads(replaced.stdout) == ["next", False, "kimi-k3", True]
