"""Cold-process latency of the CLI on the seed configs (median <= 0.25 s on 2 cores; validate's own share above
the python + click + pydantic floor <= 0.1 s).

    python3 bench/cli_latency.py [--runs 15] [--no-compile]

Every command runs N times as a fresh process. The runs are interleaved round by round with two baselines
(the bare interpreter, and the floor: the interpreter importing click and pydantic's BaseModel/Field, which
any pydantic + click CLI pays), so a machine whose speed drifts during the run affects all figures alike.
``own_share`` is, per round, the command minus the floor of the same round: what this project adds;
``own_share_budget`` is the verdict on the validate cases' median own share.

Measured as installed: the package's modules must have current byte code (a wheel install compiles them; an
editable install under PYTHONDONTWRITEBYTECODE=1 never does), so the bench compiles them first unless
``--no-compile``, and says so. The start-up caches (validated catalog, parser dumps read) are warmed by one
untimed run; ``first_run`` times validate with an empty cache directory every time (what the very first call
after an install or an upgrade costs).

Prints one JSON object.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOAL_S = 0.25
SEED_VLLM = ["--trust-remote-code", "--load-format", "fastsafetensors", "--moe-backend", "auto",
             "--gpu-memory-utilization", "0.95", "--tensor-parallel-size", "8", "--max-model-len", "1000000",
             "--kv-cache-dtype", "fp8", "--max-num-batched-tokens", "32768", "--enable-prefix-caching",
             "--max-num-seqs", "32", "--speculative-config",
             '{"model":"Inferact/Kimi-K3-DSpark","num_speculative_tokens":7,"method":"dspark"}']
CLI = [sys.executable, "-m", "gpustack_k3"]
CASES = {
    "validate_preset_vllm_seed": [*CLI, "validate", "--preset", "vllm-seed", "-o", "json"],
    "validate_preset_sglang_seed": [*CLI, "validate", "--preset", "sglang-seed", "-o", "json"],
    "check_args_vllm_seed": [*CLI, "check-args", "--engine", "vllm", "-o", "json", "--", *SEED_VLLM],
    "help": [*CLI, "--help"],
}
GOAL_CASES = ("validate_preset_vllm_seed", "validate_preset_sglang_seed", "check_args_vllm_seed")
OWN_SHARE_BUDGET_S = 0.100
BUDGET_CASES = ("validate_preset_vllm_seed", "validate_preset_sglang_seed")
BASELINES = {
    "python": [sys.executable, "-c", "pass"],
    "floor_click_pydantic": [sys.executable, "-c", "import click; from pydantic import BaseModel, Field"],
    # the floor plus pydantic validating one trivial model, plugins off as the CLI has them: what any pydantic CLI
    # that validates something pays once per process (pydantic's plugin loader imports importlib.metadata, its
    # schema generator loads); printed beside the budget, not used for it
    "floor_click_pydantic_validating": [sys.executable, "-c", "import os; os.environ['PYDANTIC_DISABLE_PLUGINS'] = '__all__'\n"
                                        "import click; from pydantic import BaseModel, Field\n"
                                        "class M(BaseModel):\n    x: int = Field(0)\nM.model_validate({'x': 1})"],
}


def package_dir() -> pathlib.Path:
    spec = importlib.util.find_spec("gpustack_k3")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("gpustack_k3 is not importable: pip install -e . first")
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def stale_bytecode(pkg: pathlib.Path) -> int:
    """Modules whose .pyc is missing or older than the source (they would be compiled on every start)."""
    n = 0
    for src in pkg.rglob("*.py"):
        pyc = pathlib.Path(importlib.util.cache_from_source(str(src)))
        if not pyc.is_file() or pyc.stat().st_mtime < src.stat().st_mtime:
            n += 1
    return n


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    return time.perf_counter() - t0


def summary(xs: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(xs), 4), "min_s": round(min(xs), 4), "max_s": round(max(xs), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--no-compile", action="store_true", help="measure the byte code as it is")
    a = ap.parse_args()

    pkg = package_dir()
    stale = stale_bytecode(pkg)
    compiled = 0
    if stale and not a.no_compile:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(pkg)], check=True)
        compiled, stale = stale, stale_bytecode(pkg)
    for cmd in CASES.values():   # warm the start-up caches (one untimed run)
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    times: dict[str, list[float]] = {k: [] for k in [*CASES, *BASELINES, "first_run"]}
    own: dict[str, list[float]] = {k: [] for k in GOAL_CASES}
    own_validating: dict[str, list[float]] = {k: [] for k in GOAL_CASES}
    load0 = os.getloadavg()[0]
    for _ in range(a.runs):
        this = {name: timed(cmd) for name, cmd in {**BASELINES, **CASES}.items()}
        with tempfile.TemporaryDirectory() as empty:
            this["first_run"] = timed(CASES["validate_preset_vllm_seed"],
                                      env={**os.environ, "GPUSTACK_K3_CATALOG_CACHE": empty})
        for k, v in this.items():
            times[k].append(v)
        for k in GOAL_CASES:
            own[k].append(this[k] - this["floor_click_pydantic"])
            own_validating[k].append(this[k] - this["floor_click_pydantic_validating"])

    out = {
        "runs": a.runs, "cpus": os.cpu_count(), "loadavg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
        "bytecode": {"modules_compiled_by_bench": compiled, "modules_without_current_pyc": stale},
        "commands": {k: summary(times[k]) for k in CASES},
        "first_run_validate_vllm_seed": summary(times["first_run"]),
        "baselines": {k: summary(times[k]) for k in BASELINES},
        "own_share_median_s": {k: round(statistics.median(v), 4) for k in GOAL_CASES for v in [own[k]]},
        "own_share_above_validating_floor_median_s": {k: round(statistics.median(v), 4) for k in GOAL_CASES
                                                       for v in [own_validating[k]]},
        "own_share_budget": {"budget_s": OWN_SHARE_BUDGET_S, "cases": list(BUDGET_CASES),
                             "met": all(statistics.median(own[k]) <= OWN_SHARE_BUDGET_S for k in BUDGET_CASES)},
        "goal_median_s": GOAL_S,
        "meets_goal": all(statistics.median(times[k]) <= GOAL_S for k in GOAL_CASES),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
