"""On-disk caches that keep the CLI's start-up short: the validated catalog and the deployment document's
compiled pydantic schema.

Each entry is a pickle whose file name carries a hash of everything it was made from: the data files (by path,
size and mtime, as Python's own byte-code cache judges a source: :func:`stat_digest`) AND the source of the
modules that build it (:func:`source_digest`), plus the library and Python versions. A changed input, loader or
model simply misses; a missing, stale or unreadable entry is rebuilt, never an error.

Trust. A pickle can execute code when loaded, so an entry is only ever read from a directory and a file that
no other user can write: the directory is created ``0700``; on load the directory must be a real directory
(not a symlink) owned by this uid and writable by nobody else, and the file, opened without following
symlinks, must be a regular file owned by this uid and writable by nobody else. Anything else is treated as
"no cache" (neither read nor written). Only this uid can then have written the bytes, and that uid can change
the installed package itself anyway. Each file also carries its payload's length and CRC-32, so a torn,
truncated or zero-filled write (a crash before the data reached the disk) is a miss, not an unpickling of
garbage. A checksum against accidents, not a digest against an attacker: trust comes from the ownership
checks above. (SHA-256 of the payload was ~30 instructions a byte, ~3 M for a parser dump's entry, more than
loading it; CRC-32 is ~1.)

Location: ``$GPUSTACK_K3_CATALOG_CACHE`` if set (``off`` disables the caches), else
``$XDG_CACHE_HOME/gpustack-k3`` (default ``~/.cache/gpustack-k3``). Writes are atomic (temp file + rename);
a read-only home just means no cache.
"""
from __future__ import annotations

import hashlib
import os
import stat
import zlib
from pathlib import Path
from typing import Any

ENV = "GPUSTACK_K3_CATALOG_CACHE"
KEEP_PER_KIND = 4
MAGIC = b"gpustack-k3 cache v3\n"
_CHECK = 8    # payload length and CRC-32, 4 bytes each, big-endian


def source_digest(*paths: Path) -> str | None:
    """Hex SHA-256 over the given source or data files (sorted, each with its name), or None when one cannot be
    read (a zip import has no plain files: then there is no cache)."""
    h = hashlib.sha256(MAGIC)
    for p in sorted(paths):
        h.update(str(p.name).encode() + b"\0")
        try:
            h.update(p.read_bytes())
        except OSError:
            return None
    return h.hexdigest()


def stat_digest(root: Path, paths: list[Path]) -> str | None:
    """Hex SHA-256 over each file's path (relative to ``root``), size and modification time in nanoseconds: how
    Python itself decides that a source changed (its byte-code cache keys on size and mtime), for data too large
    to hash at every start (the parser dumps: ~0.8 MB). None when one cannot be stat'ed."""
    h = hashlib.sha256(MAGIC)
    for p in sorted(paths):
        try:
            st = p.stat()
        except OSError:
            return None
        h.update(f"{p.relative_to(root).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def entry_name(kind: str, code: tuple[Path, ...], data_root: Path | None = None, data: list[Path] | None = None,
               extra: str = "") -> str | None:
    """``KIND-<24 hex>.pickle``: the name of the entry the modules ``code`` (by content: :func:`source_digest`)
    make from the files ``data`` (by path under ``data_root``, size and mtime: :func:`stat_digest`) and ``extra``
    (library versions, ...). None when one of them cannot be read: then there is no cache."""
    code_key = source_digest(*code)
    data_key = stat_digest(data_root, data) if data else ""
    if code_key is None or data_key is None:
        return None
    return f"{kind}-{hashlib.sha256(f'{code_key}|{data_key}|{extra}'.encode()).hexdigest()[:24]}.pickle"


def cached(name: str | None, expected: type, build: Any) -> Any:
    """The entry ``name`` if it holds an ``expected``, else ``build()``, stored under ``name`` (None: no cache)."""
    obj = load(name) if name else None
    if isinstance(obj, expected):
        return obj
    obj = build()
    if name:
        store(name, obj)
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


def load(name: str) -> Any | None:
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
    head, check, payload = blob[:len(MAGIC)], blob[len(MAGIC):len(MAGIC) + _CHECK], blob[len(MAGIC) + _CHECK:]
    if head != MAGIC or check != _check(payload):
        return None
    import pickle

    try:
        return pickle.loads(payload)  # noqa: S301 - written by this uid into a directory only it can write
    except Exception:  # stale classes, ...: rebuilt by the caller
        return None


def _check(payload: bytes) -> bytes:
    return (len(payload) & 0xFFFFFFFF).to_bytes(4, "big") + zlib.crc32(payload).to_bytes(4, "big")


def _ensure_dir(d: Path) -> bool:
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    return trusted_dir(d)


def store(name: str, obj: Any) -> None:
    path = cache_file(name)
    if path is None or not _ensure_dir(path.parent):
        return
    import pickle

    try:
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC + _check(payload) + payload)
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
