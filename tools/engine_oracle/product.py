"""gpustack-k3's own verdict on a command line or a P/D pair: the `check-args` / `check-pd` commands, invoked
in-process through click (the same code path as the CLI, without an interpreter start per line).

``verdict``: "pass" (exit 0), "refuse" (exit 1: an error finding) or "unusable" (exit 2: the product could not
read the input; counted as a refusal by the differential: the engine was handed the same line). ``rules``: the
error findings' rule ids ("input-error" for exit 2).
"""
from __future__ import annotations

import json
import shlex

from click.testing import CliRunner

_RUNNER = CliRunner()


def _invoke(cmd, args: list[str]) -> dict:
    res = _RUNNER.invoke(cmd, args, catch_exceptions=True)
    out = res.stdout if hasattr(res, "stdout") else res.output
    try:
        payload = json.loads(out) if out.strip() else {}
    except ValueError:
        payload = {}
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        return {"verdict": "unusable", "rules": ["internal-error"], "exit": -1,
                "message": f"{type(res.exception).__name__}: {res.exception}"}
    findings = payload.get("findings") or []
    errors = [f for f in findings if f.get("severity") == "error"]
    if res.exit_code == 0:
        return {"verdict": "pass", "rules": [], "exit": 0}
    if res.exit_code == 1:
        return {"verdict": "refuse", "rules": sorted({f["rule"] for f in errors}), "exit": 1,
                "message": "; ".join(f"{f['rule']}: {f['message']}" for f in errors)[:600]}
    msg = (payload.get("error") or {}) if isinstance(payload.get("error"), dict) else payload.get("error")
    return {"verdict": "unusable", "rules": ["input-error"], "exit": res.exit_code,
            "message": json.dumps(msg)[:400] if msg else (getattr(res, "stderr", "") or out)[-400:]}


_MODEL_CONFIGS: dict[str, str] | None = None


def model_config(model: str) -> str | None:
    """The config.json the oracle hands the engine for this catalog model (gpustack_k3/oracle/models.py), given to
    the product as a user would (``--model-config FILE``): both sides judge the same architecture figures (heads,
    KV heads, experts, ...), not the catalog's subset of them."""
    global _MODEL_CONFIGS
    if _MODEL_CONFIGS is None:
        from gpustack_k3.oracle.models import MODELS, model_root, write_models

        write_models()
        _MODEL_CONFIGS = {name: str(model_root() / name / "config.json") for name in MODELS}
    return _MODEL_CONFIGS.get(model)


def shape_config(shape: str) -> str | None:
    """The config.json of a model shape (gpustack_k3/oracle/models.py SHAPES: its public config.json, the file the
    oracle's ``/models/shape-<shape>`` directory holds), None when aiconfigurator-core, which ships it, is absent."""
    from gpustack_k3.oracle.models import write_models

    d = write_models().get(f"/models/shape-{shape}")
    return f"{d}/config.json" if d else None


def _common(engine: str, version: str, model: str | None, gpu_type: str, config: str | None = None) -> list[str]:
    """``model`` None: a model the catalog does not know (a shape of gpustack_k3/oracle/models.py), judged from its
    config.json (``config``) alone."""
    args = ["--engine", engine, "--engine-version", version, "--gpu-type", gpu_type, "-o", "json"]
    if model is not None:
        args += ["--model", model]
    cfg = config or (model_config(model) if model is not None else None)
    return args + (["--model-config", cfg] if cfg else [])


def check_args(engine: str, version: str, line: dict) -> dict:
    from gpustack_k3.cli.core_cmds import check_args as cmd

    args = _common(engine, version, line["model"], line["gpu_type"], line.get("model_config"))
    args += ["--gpus", str(line["gpus"])]
    for k, v in sorted(line["env"].items()):
        args += ["--env", f"{k}={v}"]
    return _invoke(cmd, args + ["--", *line["argv"]])


def check_pd(engine: str, version: str, prefill: dict, decode: dict) -> dict:
    from gpustack_k3.cli.core_cmds import check_pd as cmd

    args = _common(engine, version, prefill["model"], prefill["gpu_type"])
    args += ["--prefill", shlex.join(prefill["argv"]), "--decode", shlex.join(decode["argv"])]
    args += ["--prefill-pods", str(prefill.get("pods") or 1), "--decode-pods", str(decode.get("pods") or 1)]
    for side, d in (("prefill", prefill), ("decode", decode)):
        for k, v in sorted(d["env"].items()):
            args += [f"--{side}-env", f"{k}={v}"]
    return _invoke(cmd, args)
