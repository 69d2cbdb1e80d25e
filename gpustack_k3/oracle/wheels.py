"""A released engine wheel in the cache: found by version, its Python files unpacked once (compiled extensions left
out, their dotted names returned for the stubs), and the distribution versions it requires (for the stubs'
metadata). Shared by the engine oracle (gpustack_k3/oracle/judge.py) and the parser dumps (tools/engine_parsers/dump.py).
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.oracle.cache import cache_dir, wheels_dir

# engine -> its distribution's name on the package index (pip download vllm==...)
DIST = {ENGINE_VLLM: "vllm", ENGINE_SGLANG: "sglang"}


class WheelError(Exception):
    pass


def find_wheel(engine: str, version: str) -> Path:
    found = sorted(wheels_dir().glob(f"{DIST[engine]}-{version}-*.whl"))
    if not found:
        raise WheelError(f"no {engine} {version} wheel in {wheels_dir()}: run `gpustack-k3 oracle setup --engine "
                         f"{engine} --version {version}` (or `pip download --no-deps {DIST[engine]}=={version} -d "
                         f"{wheels_dir()}`)")
    return found[0]


def _extension_module(name: str) -> str:
    stem = name[:-3]
    for sep in (".abi3", ".cpython-"):
        stem = stem.split(sep)[0]
    return stem.replace("/", ".")


def _requirements(wheel: Path) -> list[tuple[str, str]]:
    """(distribution, the rest of the line) of each unconditional ``Requires-Dist`` of the wheel's METADATA (an
    ``extra ==`` marker left out), in order."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    out = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:") or "extra ==" in line:
            continue
        m = re.match(r"Requires-Dist:\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(.*)", line)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def required_versions(wheel: Path) -> dict[str, str]:
    """Distribution -> the lowest version the wheel's unconditional requirements accept (``==X``/``>=X``), for
    the stubs of those distributions (an import-time ``Version(version("transformers")) < ...`` check)."""
    out: dict[str, str] = {}
    for dist, rest in _requirements(wheel):
        bound = re.search(r"(?:==|>=|~=)\s*([0-9][^,\s]*)", rest.split(";")[0].replace(")", " "))
        if bound and dist not in out:
            out[dist] = bound.group(1).rstrip(".*")
    return out


def pinned_versions(wheel: Path) -> dict[str, str]:
    """Distribution -> the exact version the wheel's unconditional requirements pin (``==X`` only): what the
    release's own image installs (doubles.py TORCH_VERSION_REASON)."""
    out: dict[str, str] = {}
    for dist, rest in _requirements(wheel):
        m = re.match(r"\(?\s*==\s*([0-9][^,\s;)*]*)\s*\)?\s*(?:;|$)", rest)
        if m and dist not in out:
            out[dist] = m.group(1).rstrip(".")
    return out


def unpacked_dir(wheel: Path) -> Path:
    return cache_dir() / "engine-parsers" / "unpacked" / wheel.stem


def is_unpacked(wheel: Path) -> bool:
    return (unpacked_dir(wheel) / ".complete").is_file()


def unpack(wheel: Path) -> tuple[Path, list[str]]:
    """The wheel's Python files (and dist-info, so importlib.metadata finds the version) under the cache, and
    the dotted names of its compiled extensions (left out; stubbed)."""
    dest = unpacked_dir(wheel)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        extensions = sorted(_extension_module(n) for n in names if n.endswith(".so"))
        if not (dest / ".complete").is_file():
            for n in names:
                if not n.endswith(".so"):
                    zf.extract(n, dest)
            (dest / ".complete").write_text(wheel.name + "\n")
    return dest, extensions
