"""Writing rendered files: everything is rendered and validated in memory first, then written atomically.

* a new (or empty) output directory is staged as a sibling temp directory and renamed into place:
  all files appear at once or none do;
* into an existing non-empty directory every destination is checked first, then each file is moved in
  with ``os.replace``, the file it replaces kept aside until all are in: a failure puts everything back
  (files the render does not produce are left alone).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from gpustack_k3.core.errors import InputError


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
        os.chmod(stage, 0o755)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return stage


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
    if isinstance(out_dir, str) and not out_dir.strip():
        raise InputError("--out", "an empty path", "name a directory (`--out .` for the current one)")
    out_dir = Path(out_dir)
    try:
        parent = _parent(out_dir)
        preflight(out_dir, files)
        stage = _stage(parent, out_dir.name or "out", files)
        try:
            if out_dir.is_dir() and not any(out_dir.iterdir()):
                out_dir.rmdir()
            if not out_dir.exists():
                os.rename(stage, out_dir)
            else:
                _swap_in(parent, out_dir, stage, files)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    except OSError as exc:
        raise InputError(f"--out {out_dir}", f"cannot write: {exc.strerror or exc}",
                         "check the path and permissions") from None
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
