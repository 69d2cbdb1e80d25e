"""On-disk caches that keep the CLI's start-up short: the validated catalog and the parser dumps, read.

Each entry is a JSON file whose name carries a hash of the content of everything it was made from: the data
files and the source of the modules that build it (:func:`source_digest`), plus the Python version where it
matters. A changed input, loader or model simply misses; a missing, stale or unreadable entry is rebuilt, never
an error.

Plain data only. An entry holds JSON: builtins, and instances of the classes of the one module that defines the
cached type (the ``expected`` type of :func:`cached`), written as their class name and attributes. Loading one
runs no code from the file: a class is looked up by name in that module (anything else is a miss), the instance
is made with ``object.__new__`` and its attributes are set; no ``__init__``, no pickle, no marshal, no bytes. A
writable cache directory can at worst give wrong data, so an entry is still only read from a directory and a
file that no other user can write: the directory is created ``0700``; on load the directory must be a real
directory (not a symlink) owned by this uid and writable by nobody else, and the file, opened without following
symlinks, must be a regular file owned by this uid and writable by nobody else. Anything else is "no cache".
A torn or truncated write is not JSON, or not this entry: a miss.

Location: ``$GPUSTACK_K3_CATALOG_CACHE`` if set (``off`` disables the caches), else
``$XDG_CACHE_HOME/gpustack-k3`` (default ``~/.cache/gpustack-k3``). Writes are atomic (temp file + rename);
a read-only home just means no cache.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

ENV = "GPUSTACK_K3_CATALOG_CACHE"
KEEP_PER_KIND = 4
FORMAT = "gpustack-k3 cache v4 (json)"
SUFFIX = ".json"
_TAG = "__k3"    # the key of an encoded non-JSON value: {"__k3": "tuple"|"frozenset"|"set"|"map"|"<Class>", "v": ...}


def source_digest(*paths: Path) -> str | None:
    """Hex SHA-256 over the given source or data files (sorted, each with its name), or None when one cannot be
    read (a zip import has no plain files: then there is no cache)."""
    h = hashlib.sha256(FORMAT.encode())
    for p in sorted(paths):
        h.update(str(p.name).encode() + b"\0")
        try:
            h.update(p.read_bytes())
        except OSError:
            return None
    return h.hexdigest()


def content_digest(root: Path, paths: list[Path]) -> str | None:
    """Hex SHA-256 over each file's path (relative to ``root``) and content. None when one cannot be read.
    (The catalog's ~0.9 MB: ~0.5 ms with the CPU's SHA instructions.)"""
    h = hashlib.sha256(FORMAT.encode())
    for p in sorted(paths):
        try:
            body = p.read_bytes()
        except OSError:
            return None
        h.update(f"{p.relative_to(root).as_posix()}\0{len(body)}\0".encode())
        h.update(body)
    return h.hexdigest()


def entry_name(kind: str, code: tuple[Path, ...], data_root: Path | None = None, data: list[Path] | None = None,
               extra: str = "") -> str | None:
    """``KIND-<24 hex>.json``: the name of the entry the modules ``code`` make from the files ``data`` (under
    ``data_root``) and ``extra`` (library versions, ...), all by content. None when one of them cannot be read:
    then there is no cache."""
    code_key = source_digest(*code)
    data_key = content_digest(data_root, data) if data else ""
    if code_key is None or data_key is None:
        return None
    key = hashlib.sha256(f"{code_key}|{data_key}|{extra}|{sys.version}".encode()).hexdigest()[:24]
    return f"{kind}-{key}{SUFFIX}"


def cached(name: str | None, expected: type, build: Any) -> Any:
    """The entry ``name`` if it holds an ``expected``, else ``build()``, stored under ``name`` (None: no cache).
    Instances of the classes of ``expected``'s module travel as plain data (see the module's docstring)."""
    obj = load(name, expected.__module__) if name else None
    if isinstance(obj, expected):
        return obj
    obj = build()
    if name:
        store(name, obj, expected.__module__)
    return obj


def cache_dir() -> Path | None:
    base = os.environ.get(ENV)
    if base == "off":
        return None
    if base:
        return Path(base)
    try:   # no HOME and a uid without a passwd entry (a container's arbitrary uid): no cache, not an error
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    except (RuntimeError, KeyError):
        return None
    return root / "gpustack-k3"


def cache_file(name: str) -> Path | None:
    d = cache_dir()
    return None if d is None else d / name


def _private(st: os.stat_result) -> bool:
    """Owned by this uid and writable by nobody else."""
    return st.st_uid == os.getuid() and not (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def trusted_dir(d: Path) -> bool:
    try:
        st = os.lstat(d)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and _private(st)


# --- plain data <-> objects -----------------------------------------------------------------------------------

class _Unstorable(TypeError):
    pass


def _encode(obj: Any, module: str | None) -> Any:
    if obj is None or type(obj) in (str, int, float, bool):
        return obj
    t = type(obj)
    if t is list:
        return [_encode(x, module) for x in obj]
    if t is tuple or t is frozenset or t is set:
        return {_TAG: t.__name__, "v": [_encode(x, module) for x in obj]}
    if t is dict:
        if _TAG not in obj and all(type(k) is str for k in obj):
            return {k: _encode(v, module) for k, v in obj.items()}
        return {_TAG: "map", "v": [[_encode(k, module), _encode(v, module)] for k, v in obj.items()]}
    if module is not None and t.__module__ == module and getattr(sys.modules[module], t.__qualname__, None) is t:
        return {_TAG: t.__qualname__, "v": {k: _encode(v, module) for k, v in _attributes(obj).items()}}
    raise _Unstorable(f"{t.__module__}.{t.__qualname__} is not plain data")


def _attributes(obj: Any) -> dict[str, Any]:
    out = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for slot in cls.__dict__.get("__slots__", ()):
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                out[slot] = getattr(obj, slot)
    return out


def _decoder(module: str | None):
    classes = sys.modules[module].__dict__ if module else {}

    def hook(d: dict) -> Any:
        tag = d.get(_TAG)
        if tag is None:
            return d
        v = d["v"]
        if tag == "tuple":
            return tuple(v)
        if tag == "frozenset":
            return frozenset(v)
        if tag == "set":
            return set(v)
        if tag == "map":
            return {k: x for k, x in v}
        cls = classes.get(tag)
        if not (isinstance(cls, type) and cls.__module__ == module and type(v) is dict):
            raise _Unstorable(f"{tag} is not a class of {module}")
        inst = object.__new__(cls)
        for k, x in v.items():
            object.__setattr__(inst, k, x)
        return inst

    return hook


def load(name: str, module: str | None = None) -> Any | None:
    """The data of entry ``name`` (None: a miss), objects made of the classes of ``module`` only."""
    path = cache_file(name)
    if path is None or not trusted_dir(path.parent):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not (stat.S_ISREG(st.st_mode) and _private(st)):
                return None
            blob = fh.read()
    except OSError:
        return None
    try:
        doc = json.loads(blob, object_hook=_decoder(module))
    except (ValueError, TypeError, KeyError, AttributeError):   # not JSON, not this format, an unknown class
        return None
    if not (type(doc) is dict and doc.get("format") == FORMAT and doc.get("name") == name):
        return None
    return doc.get("data")


def _ensure_dir(d: Path) -> bool:
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    return trusted_dir(d)


def store(name: str, obj: Any, module: str | None = None) -> None:
    """Write ``obj`` (plain data, or instances of the classes of ``module``) as entry ``name``; anything else,
    or an unwritable directory, means no entry."""
    path = cache_file(name)
    if path is None or not _ensure_dir(path.parent):
        return
    try:
        payload = json.dumps({"format": FORMAT, "name": name, "data": _encode(obj, module)},
                             separators=(",", ":")).encode()
    except (TypeError, ValueError):   # _Unstorable, a circular reference
        return
    try:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        tmp.replace(path)
    except OSError:
        return  # no cache: validated/built again next time
    # entries of the same kind made from older inputs: keep the few newest (two installs of different
    # versions sharing this directory must not evict each other on every call), drop the rest
    kind = name.rsplit("-", 1)[0]
    same = []
    for old in path.parent.glob(f"{kind}-*{SUFFIX}"):
        if old.name.rsplit("-", 1)[0] == kind:
            try:
                same.append((old.stat().st_mtime, old))
            except OSError:
                pass
    for _mtime, old in sorted(same, reverse=True)[KEEP_PER_KIND:]:
        try:
            old.unlink()
        except OSError:
            pass
