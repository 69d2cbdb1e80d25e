"""On-disk caches that keep the CLI's start-up short: the validated catalog and the deployment document's
compiled pydantic schema. Each entry is a pickle whose file name carries a hash of everything it was made
from, so a changed input simply misses; a missing, stale or unreadable entry is rebuilt, never an error.

Location: ``$GPUSTACK_K3_CATALOG_CACHE`` if set (``off`` disables the caches), else
``$XDG_CACHE_HOME/gpustack-k3`` (default ``~/.cache/gpustack-k3``). Writes are atomic (temp file + rename);
a read-only home just means no cache.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ENV = "GPUSTACK_K3_CATALOG_CACHE"
KEEP_PER_KIND = 4


def cache_file(name: str) -> Path | None:
    base = os.environ.get(ENV)
    if base == "off":
        return None
    if base:
        return Path(base) / name
    try:   # no HOME and a uid without a passwd entry (a container's arbitrary uid): no cache, not an error
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    except (RuntimeError, KeyError):
        return None
    return root / "gpustack-k3" / name


def load(name: str) -> Any | None:
    path = cache_file(name)
    if path is None or not path.is_file():
        return None
    import pickle

    try:
        with path.open("rb") as fh:
            return pickle.load(fh)  # noqa: S301 - our own cache, keyed by a content hash
    except Exception:  # stale classes, truncated file, ...: rebuilt by the caller
        return None


def store(name: str, obj: Any) -> None:
    path = cache_file(name)
    if path is None:
        return
    import pickle

    try:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return  # no cache: validated/built again next time
    # entries of the same kind made from older inputs: keep the few newest (two installs of different
    # versions sharing this directory must not evict each other on every call), drop the rest
    kind = name.rsplit("-", 1)[0]
    same = []
    for old in path.parent.glob(f"{kind}-*.pickle"):
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
