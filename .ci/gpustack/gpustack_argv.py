"""The engine argv GPUStack 2.3.0 itself would build from our backend.json + model.json.

Run with the GPUStack venv's python (it imports the installed ``gpustack`` package):

  $GPUSTACK_PYTHON gpustack_argv.py BACKEND_JSON MODEL_JSON --model-path P --port N --worker-ip IP --gpus 8

Uses GPUStack's own code paths (wheel 2.3.0): ``InferenceBackend.get_container_entrypoint`` and
``replace_command_param`` (schemas/inference_backend.py), ``flatten_to_argv`` (utils/command.py),
``render`` (utils/template.py) and ``_normalize_param_format`` (worker/backends/base.py) - the same steps as
``CustomServer._build_command_args`` (worker/backends/custom.py:153). Prints
``{"entrypoint": [...], "args": [...], "env": {...}}`` as JSON.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys

from gpustack.schemas.inference_backend import InferenceBackend
from gpustack.utils.command import flatten_to_argv
from gpustack.utils.template import deployment_variables, render
from gpustack.worker.backends.base import _normalize_param_format


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("backend")
    ap.add_argument("model")
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--worker-ip", default="10.0.0.7")
    ap.add_argument("--gpus", type=int, default=8)
    a = ap.parse_args()
    b = json.load(open(a.backend))
    m = json.load(open(a.model))
    backend = InferenceBackend.model_validate(b)
    # pydantic leaves nested VersionConfig as dicts on a table model; use the validated form
    from gpustack.schemas.inference_backend import VersionConfigDict

    backend.version_configs = VersionConfigDict.model_validate(b["version_configs"])
    entrypoint = backend.get_container_entrypoint(m["backend_version"])
    gpu_ids = list(range(a.gpus))
    inline = backend.replace_command_param(
        version=m["backend_version"], model_path=a.model_path, port=a.port, worker_ip=a.worker_ip,
        model_name=m["name"], gpu_count=len(gpu_ids), gpu_ids=gpu_ids, command=m.get("run_command"),
        env=m.get("env") or {})
    args = shlex.split(inline) if inline else []
    variables = deployment_variables(model_path=a.model_path, port=a.port, worker_ip=a.worker_ip,
                                     model_name=m["name"], gpu_count=len(gpu_ids), gpu_ids=gpu_ids)
    tokens = [render(t, variables, context="backend parameter") or t
              for t in flatten_to_argv(m.get("backend_parameters") or [])]
    if backend.parameter_format is not None and tokens:
        tokens = _normalize_param_format(tokens, backend.parameter_format)
    args += tokens
    env = {k: (render(v, variables, context="env") or v) for k, v in (m.get("env") or {}).items()}
    json.dump({"entrypoint": entrypoint, "args": args, "env": env}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
