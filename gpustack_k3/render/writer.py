"""Writing rendered files: everything is rendered and validated in memory first, then written atomically.

* a new (or empty) output directory is staged as a sibling temp directory and renamed into place:
  all files appear at once or none do;
* ``replace_dir`` (``render --out``): a directory an earlier render wrote (it holds ``MARKER``) is replaced as
  a whole: the new tree is staged beside it and swapped in with two renames (a failure renames the old one
  back), so nothing of the earlier render survives; a non-empty directory without the marker holds someone
  else's files and is refused;
* ``write_files`` into an existing non-empty directory (the repository's generated files): every destination
  is checked first, then each file is moved in with ``os.replace``, the file it replaces kept aside until all
  are in: a failure puts everything back (files the render does not produce are left alone).

Shell files (``*.sh``) are written executable (0755), everything else 0644.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from gpustack_k3.errors import InputError


def _check_rel(rel: str) -> None:
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise ValueError(f"refusing to write outside the output directory: {rel!r}")


def _stage(parent: Path, name: str, files: dict[str, str]) -> Path:
    stage = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=parent))
    try:
        for rel, content in sorted(files.items()):
            _check_rel(rel)
            dest = stage / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(content)
            os.chmod(dest, 0o755 if rel.endswith(".sh") else 0o644)
        for d in [stage, *(p for p in stage.rglob("*") if p.is_dir())]:
            os.chmod(d, 0o755)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return stage


@contextlib.contextmanager
def _out_dir(out_dir: Path | str, fix: str) -> Iterator[Path]:
    """``out_dir`` as a Path (an empty one is unusable input, ``fix`` the way out); an OSError while writing
    becomes unusable input naming it."""
    if isinstance(out_dir, str) and not out_dir.strip():
        raise InputError("--out", "an empty path", fix)
    path = Path(out_dir)
    try:
        yield path
    except OSError as exc:
        raise InputError(f"--out {path}", f"cannot write: {exc.strerror or exc}",
                         "check the path and permissions") from None


@contextlib.contextmanager
def _staged(parent: Path, name: str, files: dict[str, str]) -> Iterator[Path]:
    """The files written into a temporary sibling directory, removed on the way out (renamed away or not)."""
    stage = _stage(parent, name or "out", files)
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _parent(out_dir: Path) -> Path:
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir}", "exists and is not a directory", "name a directory")
    parent = out_dir.resolve().parent
    if not parent.is_dir():
        raise InputError(f"--out {out_dir}", f"parent directory {parent} does not exist", "create it first")
    return parent


def preflight(out_dir: Path | str, rels: list[str] | set[str] | dict[str, str]) -> None:
    """Refuse before anything is written if a destination cannot take its file: the path, or a directory
    on the way to it, is of the wrong kind."""
    out_dir = Path(out_dir)
    for rel in sorted(rels):
        _check_rel(rel)
        dest = out_dir / rel
        if dest.is_dir():
            raise InputError(f"--out {out_dir}", f"{dest} is a directory, the render writes a file there",
                             "move it away or choose another --out")
        for up in list(dest.parents)[: len(Path(rel).parts) - 1]:
            if up.exists() and not up.is_dir():
                raise InputError(f"--out {out_dir}", f"{up} is a file, the render needs a directory there",
                                 "move it away or choose another --out")


def write_files(out_dir: Path | str, files: dict[str, str]) -> list[Path]:
    """Write ``files`` (relative path -> text) under ``out_dir``, all or nothing; returns the written paths."""
    with _out_dir(out_dir, "name a directory (`--out .` for the current one)") as out_dir:
        parent = _parent(out_dir)
        preflight(out_dir, files)
        with _staged(parent, out_dir.name, files) as stage:
            if out_dir.is_dir() and not any(out_dir.iterdir()):
                out_dir.rmdir()
            if not out_dir.exists():
                os.rename(stage, out_dir)
            else:
                _swap_in(parent, out_dir, stage, files)
    return [out_dir / rel for rel in sorted(files)]


def _swap_in(parent: Path, out_dir: Path, stage: Path, files: dict[str, str]) -> None:
    """Move the staged files over an existing directory; on any failure put back what was there."""
    backup = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=parent))
    done: list[tuple[Path, Path | None]] = []
    made: list[Path] = []
    try:
        for rel in sorted(files):
            dest = out_dir / rel
            missing = [d for d in reversed(list(dest.parents)[: len(Path(rel).parts) - 1]) if not d.exists()]
            for d in missing:
                d.mkdir()
                made.append(d)
            bak = None
            if dest.exists():
                bak = backup / rel
                bak.parent.mkdir(parents=True, exist_ok=True)
                os.replace(dest, bak)
            done.append((dest, bak))
            os.replace(stage / rel, dest)
    except BaseException:
        for dest, bak in reversed(done):
            if bak is not None:
                os.replace(bak, dest)
            else:
                dest.unlink(missing_ok=True)
        for d in reversed(made):
            try:
                d.rmdir()
            except OSError:
                pass
        raise
    finally:
        shutil.rmtree(backup, ignore_errors=True)


MARKER = ".gpustack-k3-render"


def replace_dir(out_dir: Path | str, files: dict[str, str]) -> list[Path]:
    """Make ``out_dir`` hold exactly ``files`` (plus ``MARKER``): all or nothing, nothing of an earlier render
    left. A new or empty directory is created by one rename; a directory an earlier render wrote is swapped
    for the new one; any other non-empty directory is refused (InputError) before anything is written."""
    if MARKER in files:
        raise ValueError(f"{MARKER} is the render's own marker")
    with _out_dir(out_dir, "name a directory") as out_dir:
        parent = _parent(out_dir)
        real = out_dir.resolve()
        existing = real.is_dir() and any(real.iterdir())
        if existing and not (real / MARKER).is_file():
            raise InputError(f"--out {out_dir}", "is a non-empty directory that no render wrote (no "
                             f"{MARKER} in it): its files would be mixed with the render's",
                             "choose a new or empty directory, or remove it first")
        cwd = Path.cwd().resolve()
        if existing and real in (cwd, *cwd.parents):     # out_dir is where we stand, or holds it
            raise InputError(f"--out {out_dir}", "is the current directory (or holds it): it cannot be replaced "
                             "while in use", "render into a sub-directory")
        marked = {**files, MARKER: "rendered by gpustack-k3; `render --out` replaces this directory as a whole\n"}
        with _staged(parent, real.name, marked) as stage:
            if real.is_dir() and not existing:
                try:
                    real.rmdir()
                except OSError:   # the current directory, a mount point: fill it file by file
                    _swap_in(parent, real, stage, {**files, MARKER: ""})
                    return [out_dir / rel for rel in sorted(files)]
            if not real.exists():
                os.rename(stage, real)
            else:
                old = Path(tempfile.mkdtemp(prefix=f".{real.name}.old-", dir=parent))
                os.rename(real, old / "tree")
                try:
                    os.rename(stage, real)
                except BaseException:
                    os.rename(old / "tree", real)
                    raise
                finally:
                    shutil.rmtree(old, ignore_errors=True)
    return [out_dir / rel for rel in sorted(files)]
