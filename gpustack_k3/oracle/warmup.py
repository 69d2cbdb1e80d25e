"""The fixed lines a worker judges once before its first request, to learn which of the release's modules a line
imports (gpustack_k3/oracle/engine_side/worker.py preload): the catalog presets' lines for the release, rendered by
the product's own renderers, and one line per model shape of gpustack_k3/oracle/models.py SHAPES. A fixed set per
release: the worker's state never depends on the lines it judges. tools/engine_oracle/corpus.py mutates the same
lines into the differential's corpus.

``seed_lines(release)``: the catalog presets for the release's engine, with ``spec.engine.version`` set to the
release, rendered by ``gpustack_k3.core.flags.render_args`` (single-engine presets) and
``gpustack_k3.core.launch.build_topology_launch`` (the per-role leader lines of the topology presets).
A line: {"argv": [...], "env": {...}, "model": catalog model key, "gpu_type": ..., "gpus": ..., "seed": name}.
"""
from __future__ import annotations

import copy

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.oracle import lines
from gpustack_k3.oracle.models import SHAPES, model_root, preset_model_config, shape_configs
from gpustack_k3.oracle.releases import RELEASES


def _document(data: dict):
    return DeploymentDocument.model_validate(data)


def single_line(doc_data: dict, version: str):
    """(argv, env, model, gpu_type, gpus) of a single-engine document, rendered by the product (lines.py)."""
    data = copy.deepcopy(doc_data)
    data["spec"]["engine"]["version"] = version
    ln = lines.single_line(_document(data))
    return ln["argv"], ln["env"], ln["model"], ln["gpu_type"], ln["gpus"]


def role_lines(doc_data: dict, version: str):
    """(kind, argv, env, gpu_type, gpus, model, pods) per role of a topology document, rendered by the product."""
    data = copy.deepcopy(doc_data)
    data["spec"]["engine"]["version"] = version
    return [(ln["kind"], ln["argv"], ln["env"], ln["gpu_type"], ln["gpus"], ln["model"], ln["pods"])
            for ln in lines.role_lines(_document(data))]


def shape_lines(release: str) -> list[dict]:
    """One line per model shape of gpustack_k3/oracle/models.py SHAPES (MLA MoE, GQA dense, GQA with YaRN, hybrid:
    public config.json files from the installed aiconfigurator-core), for models the catalog does not know: the
    product judges them from the config.json alone (``model_config``, no catalog model), as a user's own model.
    The shapes are ones every pinned release registers, so a release's verdicts come from what the lines vary.
    The flags are the catalog's (the engine's flag table and model flag, the version's model_arg): a GPU release's
    line sets the tensor-parallel size 8, the CPU build's the maximum model length 4096 (one CPU device)."""
    engine, version, _wheel = RELEASES[release]
    e = load_catalog().engines[engine]
    v = e.versions.get(version)
    positional = ((v.model_arg if v is not None else None) or e.model_arg) == "positional"
    cpu = version.endswith("-cpu")
    out = []
    for shape in shape_configs():
        path = SHAPES[shape][1]
        argv = ([path] if positional else [e.model_flag, path]) + (
            [e.flag_of("scheduling.maxModelLen"), "4096"] if cpu else [e.flag_of("parallel.tp"), "8"])
        out.append({"seed": f"shape/{shape}", "argv": argv, "env": {}, "model": None,
                    "model_config": str(model_root() / f"shape-{shape}" / "config.json"),
                    "gpu_type": "cpu" if cpu else "b300",
                    "gpus": 1 if cpu else 8})
    return out


def seed_lines(release: str, shapes: bool = True) -> list[dict]:
    engine, version, _wheel = RELEASES[release]
    cat = load_catalog()
    out = shape_lines(release) if shapes else []
    for name, preset in cat.presets.items():
        data = preset.document
        if data["spec"]["engine"]["name"] != engine:
            continue
        cpu = data["spec"].get("hardware", {}).get("gpuType") == "cpu"
        if cpu and not version.endswith("-cpu") and engine == ENGINE_VLLM:
            # the tiny CPU model's line on a GPU release too (B300, one GPU): every release knows Llama, so its
            # lines reach the config checks where the Kimi-K3 lines stop at an unknown architecture or parser
            data = copy.deepcopy(data)
            data["spec"]["hardware"] = {"gpuType": "b300", "gpuCount": 1}
            name = f"{name}@b300"
        elif cpu != (version.endswith("-cpu")):
            continue
        try:
            if data["spec"].get("roles"):
                for kind, argv, env, gpu_type, gpus, model, pods in role_lines(data, version):
                    out.append({"seed": f"{name}/{kind}", "argv": list(argv), "env": env, "model": model,
                                "gpu_type": gpu_type, "gpus": gpus, "role": kind, "pods": pods})
            else:
                argv, env, model, gpu_type, gpus = single_line(data, version)
                line = {"seed": name, "argv": argv, "env": env, "model": model, "gpu_type": gpu_type, "gpus": gpus}
                own = preset_model_config(model) if model is not None else None
                if own is not None:   # a model the catalog does not know, carried by the preset: its config.json
                    line.update(model=None, model_config=own)
                out.append(line)
        except Exception as exc:  # noqa: BLE001 - a preset the product cannot render for this release
            out.append({"seed": name, "unrenderable": f"{type(exc).__name__}: {str(exc)[:200]}"})
    return out
