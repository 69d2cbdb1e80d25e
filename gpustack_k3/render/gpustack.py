"""GPUStack target: a custom inference backend, a deployment and a 2.3.0 import document from one LaunchSpec.

Files (``render_gpustack``):

* ``backend.json`` - ``POST /v2/inference-backends`` body (InferenceBackendCreate). Name
  ``kimi-k3-<engine>-custom`` (the suffix is mandatory, routes/inference_backend.py:1792 @2.3.0),
  ``health_check_path: /health`` (without it GPUStack reports RUNNING immediately, serve_manager.py:3006),
  the executable as ``default_entrypoint`` and *arguments only* as ``default_run_command``, built from
  GPUStack's placeholders ``{{model_path}} {{port}} {{worker_ip}} {{model_name}} {{gpu_count}}`` (regex
  ``\\{\\{([A-Za-z_][A-Za-z0-9_.]*)\\}\\}``, no inner spaces: utils/template.py @2.3.0). Default env and
  parameters are mirrored for UI users (the deploy form copies them; gpustack.md §2.2).
* ``model.json`` - ``POST /v2/models`` body (ModelCreate) with the **full** env and flags, because neither
  server nor worker applies a backend's defaults. ``cluster_id`` is left out (``apply`` resolves
  ``--cluster``). With a worker name, all GPUs are pinned by ``gpu_selector.gpu_ids``
  (``<worker>:cuda:<i>``); without one, ``GPUSTACK_MODEL_VRAM_CLAIM`` claims more than ``gpu_count - 1``
  cards so no smaller set can satisfy it (gpustack.md §2.4).
* ``import.yaml`` - the same deployment as a 2.3.0 deployment document for ``POST /v2/models/import``
  (``cluster_name`` instead of ``cluster_id``; unknown fields are errors there: deployment_document.py:447).

Platform projection (documented, not a recomputation): the flags GPUStack owns (model path, host, port,
served name) move from the engine argv into the run command as placeholders; the tensor-parallel flag
becomes ``{{gpu_count}}`` when it equals the spec's GPU count; the memory-fraction flag moves into the run
command as ``{{KIMI_K3_MEMORY_FRACTION}}`` with its value in the model env (otherwise GPUStack's scheduler
books it on every card and no VRAM claim can give the deployment all GPUs, see ``gpustack_documents``); paths under the spec's model and cache
volumes are moved under GPUStack's persistent ``/var/lib/gpustack/cache`` (custom backends cannot mount
other host directories, gpustack#4551; the worker's data dir is mirrored into the container, gpustack.md
§2.4, §3.4), so JIT caches survive restarts. ``GPUSTACK_MODEL_RUNTIME_SHM_SIZE_GIB`` carries the spec's
``/dev/shm`` size (GPUStack's default is 10 GiB, worker/backends/custom.py @2.3.0).

Serialised from the documents built here (no text template) and validated (``validate_gpustack``) before
anything is returned.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM, GIB
from gpustack_k3.catalog import load_catalog
from gpustack_k3.render.templates import RenderError, dump_json, dump_yaml_documents

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.core.launch_types import LaunchSpec

GPUSTACK_VERSION = "2.3.0"
GPUSTACK_CACHE = "/var/lib/gpustack/cache"              # worker data dir, mirrored into containers
CACHE_ROOT = f"{GPUSTACK_CACHE}/gpustack-k3"             # our persistent JIT caches and side files
VOLUME_ROOTS = {"cache": CACHE_ROOT, "model": f"{CACHE_ROOT}/models"}
# utils/template.py @2.3.0: the only placeholder syntax GPUStack substitutes
PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_.]*)\}\}")
ANY_BRACES = re.compile(r"\{\{(.*?)\}\}")
DEPLOYMENT_VARIABLES = frozenset({"model_path", "port", "worker_ip", "model_name", "gpu_count", "gpu_ids"})
BUILT_IN_BACKENDS = frozenset({"vllm", "sglang", "mindie", "voxbox", "custom"})   # schemas/models.py:90 BackendEnum
PARAMETER_FORMATS = frozenset({"space", "equal"})                                 # ParameterFormatEnum
PARAMETER_FORMAT = {ENGINE_VLLM: "equal", ENGINE_SGLANG: "space"}                           # gpustack.md §7.1
GPUSTACK_OWNED_FLAGS = ("--host", "--port", "--served-model-name", "--api-key")   # routes/models.py validate_model_in
FRACTION_ENV = "KIMI_K3_MEMORY_FRACTION"   # {{KIMI_K3_MEMORY_FRACTION}} in the run command, from the model env
_PLAIN = re.compile(r"^[A-Za-z0-9_./:,+@%=-]+$")
NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"   # a GPUStack worker or cluster name as the CLI accepts it


@dataclass(frozen=True)
class ModelSource:
    """Where GPUStack gets the weights: ``huggingface`` | ``model_scope`` | ``local_path`` and the id/path."""

    source: str
    ref: str

    def fields(self) -> dict[str, str]:
        key = {"huggingface": "huggingface_repo_id", "model_scope": "model_scope_model_id",
               "local_path": "local_path"}.get(self.source)
        if key is None:
            raise RenderError("gpustack.source", f"unknown model source {self.source!r}",
                              "use huggingface, model_scope or local_path")
        return {key: self.ref}


def model_source_for(doc: DeploymentDocument) -> ModelSource:
    """The spec's hub id (``spec.model.source``) on the catalog model's hub, else the catalog's own id."""
    entry = load_catalog().models.get(doc.spec.model.name)
    ref = doc.spec.model.source or (entry.source_id if entry else None)
    if not ref:
        return ModelSource("local_path", doc.spec.model.path or (entry.default_path if entry else "/models/model"))
    hub = getattr(entry, "hub", None) or "huggingface"
    return ModelSource("model_scope" if hub == "modelscope" else "huggingface", ref)


def default_source(launch: LaunchSpec) -> ModelSource:
    """Without the document: the catalog model whose default path the launch spec uses, else the path."""
    for entry in load_catalog().models.values():
        if entry.default_path == launch.model_path and entry.source_id:
            return ModelSource("model_scope" if entry.hub == "modelscope" else "huggingface", entry.source_id)
    return ModelSource("local_path", launch.model_path)


def backend_name(engine: str) -> str:
    return f"kimi-k3-{engine}-custom"


# ------------------------------------------------------------------ argv helpers (mirror GPUStack's)

def is_parameter_key(token: str) -> bool:
    """utils/command.py:544 @2.3.0: ``-x``/``--x`` is a key; ``--`` and numbers like ``-1`` are values."""
    if not token.startswith("-") or len(token) <= 1 or token == "--":
        return False
    try:
        float(token)
        return False
    except ValueError:
        return True


def clusters(tokens: list[str]) -> list[list[str]]:
    """Group an argv into ``[key, value...]`` clusters (leading stray values form key-less clusters)."""
    out: list[list[str]] = []
    for tok in tokens:
        if is_parameter_key(tok) or not out:
            out.append([tok])
        else:
            out[-1].append(tok)
    return out


def parameter_elements(tokens: list[str], fmt: str) -> list[str]:
    """``backend_parameters`` elements, one row per flag as a UI user would write it. A value that is not
    plain (spaces, quotes, JSON) stays a separate bare element, which GPUStack passes through verbatim
    (``flatten_to_argv``, utils/command.py:562 @2.3.0) - so the engine receives exactly these tokens."""
    out: list[str] = []
    for c in clusters(tokens):
        key, vals = c[0], c[1:]
        if not is_parameter_key(key):
            out.extend(c)
        elif not vals:
            out.append(key)
        elif len(vals) == 1 and _PLAIN.match(vals[0]) and not vals[0].startswith("-"):
            out.append(f"{key}={vals[0]}" if fmt == "equal" else f"{key} {vals[0]}")
        else:
            out.append(key)
            out.extend(vals)
    return out


def flatten_elements(elements: list[str]) -> list[str]:
    """Our own elements back to tokens (the inverse of ``parameter_elements``; used by the checks)."""
    toks: list[str] = []
    for e in elements:
        if is_parameter_key(e.split(None, 1)[0]) and ("=" in e or " " in e):
            key, sep, val = e.partition("=") if "=" in e.split(" ", 1)[0] else e.partition(" ")
            toks += [key, val]
        else:
            toks.append(e)
    return toks


def _remap(value: str, mounts: dict[str, str]) -> str:
    """Move a path under one of the spec's volume mounts to its GPUStack location (JSON values too)."""
    if value.startswith("{"):
        try:
            obj = json.loads(value)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            new = _remap_obj(obj, mounts)
            return value if new == obj else json.dumps(new, separators=(",", ":"))
    for mount, target in mounts.items():
        if value == mount:
            return target
        if value.startswith(mount + "/"):
            return target + value[len(mount):]
    return value


def _remap_obj(obj: Any, mounts: dict[str, str]) -> Any:
    if isinstance(obj, dict):
        return {k: _remap_obj(v, mounts) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_remap_obj(v, mounts) for v in obj]
    return _remap(obj, mounts) if isinstance(obj, str) else obj


# ------------------------------------------------------------------ the intended documents (pure)

def gpustack_documents(launch: LaunchSpec, *, worker: str | None = None, cluster: str = "default",
                       source: ModelSource | None = None) -> dict[str, dict]:
    """``{"backend": ..., "model": ..., "import": ...}`` as Python objects, before templating."""
    cat = load_catalog()
    eng = cat.engine(launch.engine)
    if launch.secret_env:
        names = ", ".join(s.name for s in launch.secret_env)
        raise RenderError("spec.secretEnv", f"GPUStack deployments have no secret references ({names})",
                          "drop spec.secretEnv for the gpustack target and set the value in GPUStack's env")
    # GPUStack starts the engine with --served-model-name "{{model_name}}", the deployment's name: the deployment is
    # named after the served model name (spec.model.servedModelName, else metadata.name; a role's: the document's)
    if not re.fullmatch(NAME, launch.served_model_name):
        raise RenderError("spec.model.servedModelName", (
            f"GPUStack names the deployment after the served model, and {launch.served_model_name!r} is no GPUStack "
            "deployment name (letters, digits, '.', '_', '-'; no '/': gpustack#3407)"),
            "set spec.model.servedModelName (or metadata.name) to such a name for the gpustack target")
    if worker is not None and not re.fullmatch(NAME, worker):
        raise RenderError("--worker", f"invalid worker name {worker!r}", "give the worker's name as GPUStack lists it")
    flag_of = {f.field: f for f in eng.flags}
    fmt = PARAMETER_FORMAT[launch.engine]
    n = launch.gpu_count

    # run command: what GPUStack owns, as placeholders (arguments only; the executable is the entrypoint)
    if eng.model_arg == "positional":
        run = ['"{{model_path}}"']
    else:
        run = [flag_of["model.path"].flag if "model.path" in flag_of else eng.model_flag, '"{{model_path}}"']
    run += [flag_of["serving.host"].flag, "{{worker_ip}}", flag_of["serving.port"].flag, "{{port}}",
            flag_of["model.servedModelName"].flag, '"{{model_name}}"']
    moved: set[str] = set()
    tp = launch.arg("parallel.tp")
    if tp is not None and tp.tokens[1:] == [str(n)]:
        moved.add(tp.field)
        run += [tp.tokens[0], "{{gpu_count}}"]
    # The memory fraction rides in the run command through a model-env placeholder: GPUStack 2.3.0's
    # custom-backend selector reads it from run_command + backend_parameters and then books
    # max(VRAM claim, fraction x card) on *every* card, so a deployment that declares it can never be
    # placed on more than one GPU by a VRAM claim (custom_backend_resource_fit_selector.py:120-185,
    # 342-470 @2.3.0; VERIFIED: unschedulable with --gpu-memory-utilization=0.95 + an 8-card claim).
    fraction_env: dict[str, str] = {}
    frac = launch.arg("memory.fraction")
    if frac is not None:
        moved.add(frac.field)
        run += [frac.tokens[0], "{{" + FRACTION_ENV + "}}"]
        fraction_env[FRACTION_ENV] = frac.tokens[1]
    tokens = [tok for a in launch.arguments if not a.platform and a.field not in moved for tok in a.tokens]
    mounts = {v.mount_path.rstrip("/"): VOLUME_ROOTS[v.purpose] for v in launch.volumes
              if v.purpose in VOLUME_ROOTS and v.mount_path not in ("", "/")}
    tokens = [_remap(t, mounts) for t in tokens]
    params = parameter_elements(tokens, fmt)
    env = {k: _remap(v, mounts) for k, v in launch.env.items()}
    env["GPUSTACK_MODEL_RUNTIME_SHM_SIZE_GIB"] = str(launch.shm_size_gib)
    env.update(fraction_env)

    name = backend_name(launch.engine)
    moved = ", ".join(f"{m} -> {t}" for m, t in sorted(mounts.items()))
    backend = {
        "backend_name": name,
        "description": (f"Kimi-K3 on {n}x {launch.gpu_type.upper()} via {launch.engine} {launch.engine_version} "
                        f"(rendered by gpustack-k3 from {launch.name}). Paths moved under GPUStack's cache: "
                        f"{moved or 'none'}; put draft models there."),
        "health_check_path": launch.health_path,
        "parameter_format": fmt,
        "default_version": launch.engine_version,
        "default_entrypoint": " ".join(launch.command),
        "default_run_command": " ".join(run),
        "default_backend_param": params,
        "default_env": dict(sorted(env.items())),
        "common_parameters": list(dict.fromkeys(c[0] for c in clusters(tokens) if is_parameter_key(c[0]))),
        "version_configs": {launch.engine_version: {"image_name": launch.image, "custom_framework": "cuda"}},
    }
    if worker:
        selector: dict[str, Any] = {"gpu_ids": [f"{worker}:cuda:{i}" for i in range(n)], "gpus_per_replica": n}
    else:
        hw = cat.hardware.get(launch.gpu_type)
        if hw is None:
            raise RenderError("spec.hardware.gpuType", f"no hardware profile for {launch.gpu_type!r}",
                              "pass --worker to pin GPUs by id")
        # more than n-1 cards' worth: no set of fewer than n GPUs satisfies the claim (gpustack.md §2.4)
        env["GPUSTACK_MODEL_VRAM_CLAIM"] = str(int((n - 1) * hw.visible_gib * GIB) + GIB)
        selector = {"gpus_per_replica": n}
    src = source or default_source(launch)
    model = {
        "name": launch.served_model_name,
        "description": f"Kimi-K3 via {name} {launch.engine_version}, rendered by gpustack-k3",
        "source": src.source,
        "source_fields": src.fields(),
        "backend": name,
        "backend_version": launch.engine_version,
        "backend_parameters": params,
        "env": dict(sorted(env.items())),
        "replicas": 1,
        "categories": ["llm"],
        "placement_strategy": "binpack",
        "gpu_selector": selector,
    }
    return {"backend": backend, "model": model, "cluster": cluster}


def model_body(model_view: dict) -> dict:
    """The view's model as the API body (source fields inlined, the two fixed flags added)."""
    body = {k: v for k, v in model_view.items() if k != "source_fields"}
    out: dict[str, Any] = {}
    for k, v in body.items():
        out[k] = v
        if k == "source":
            out.update(model_view["source_fields"])
    out["distributed_inference_across_workers"] = False
    out["restart_on_error"] = True
    return out


# ------------------------------------------------------------------ validation of the parsed-back files

def _placeholder_problems(where: str, text: str, allowed: set[str]) -> list[str]:
    out = []
    for inner in ANY_BRACES.findall(text):
        if not PLACEHOLDER.fullmatch("{{" + inner + "}}"):
            out.append(f"{where}: '{{{{{inner}}}}}' is not a GPUStack placeholder (no spaces inside the braces)")
        elif inner not in allowed:
            out.append(f"{where}: unknown placeholder {{{{{inner}}}}} would reach the engine verbatim")
    return out


def validate_gpustack(backend: dict, model: dict, entry: dict, launch: LaunchSpec | None = None) -> list[str]:
    """Problems with rendered GPUStack documents (empty list = fine). Pure."""
    p: list[str] = []
    name = backend.get("backend_name", "")
    if not name.endswith("-custom"):
        p.append(f"backend.backend_name: {name!r} must end with -custom")
    if name.lower() in BUILT_IN_BACKENDS:
        p.append(f"backend.backend_name: {name!r} is a built-in backend name")
    hp = backend.get("health_check_path") or ""
    if not hp.startswith("/"):
        p.append("backend.health_check_path: must be set (without it GPUStack reports RUNNING immediately)")
    if backend.get("parameter_format") not in PARAMETER_FORMATS:
        p.append(f"backend.parameter_format: {backend.get('parameter_format')!r} not in space|equal")
    allowed = set(DEPLOYMENT_VARIABLES) | set(model.get("env", {}))
    run = backend.get("default_run_command", "")
    p += _placeholder_problems("backend.default_run_command", run, allowed)
    entrypoint = backend.get("default_entrypoint", "").split()
    if entrypoint and run.split()[:len(entrypoint)] == entrypoint:
        p.append("backend.default_run_command: starts with the entrypoint (GPUStack would run it twice)")
    for k, v in model.get("env", {}).items():
        if not isinstance(v, str):
            p.append(f"model.env.{k}: value must be a string")
    versions = backend.get("version_configs", {})
    if model.get("backend_version") not in versions:
        p.append(f"model.backend_version: {model.get('backend_version')!r} not in backend version_configs")
    for ver, vc in versions.items():
        if not vc.get("image_name"):
            p.append(f"backend.version_configs.{ver}.image_name: missing")
        if vc.get("custom_framework") != "cuda":
            p.append(f"backend.version_configs.{ver}.custom_framework: must be cuda")
    if model.get("backend") != name:
        p.append(f"model.backend: {model.get('backend')!r} is not the rendered backend {name!r}")
    model_flags = {e.model_flag for e in load_catalog().engines.values()}   # the engines' model flags
    for where, params in (("model.backend_parameters", model.get("backend_parameters", [])),
                          ("backend.default_backend_param", backend.get("default_backend_param", []))):
        for tok in flatten_elements(params):
            if tok in GPUSTACK_OWNED_FLAGS or tok in model_flags:
                p.append(f"{where}: {tok} is owned by GPUStack (it comes from the run command)")
    sel = model.get("gpu_selector") or {}
    if launch is not None:
        n = launch.gpu_count
        if sel.get("gpu_ids"):
            ids = sel["gpu_ids"]
            if len(ids) != n or len(set(ids)) != n or not all(re.fullmatch(r"[^:]+:cuda:\d+", i) for i in ids):
                p.append(f"model.gpu_selector.gpu_ids: need {n} distinct '<worker>:cuda:<i>' ids, got {ids}")
            if len({i.split(':')[0] for i in ids}) != 1:
                p.append("model.gpu_selector.gpu_ids: custom backends run on one worker only")
        elif "GPUSTACK_MODEL_VRAM_CLAIM" not in model.get("env", {}):
            p.append("model: neither gpu_selector.gpu_ids nor GPUSTACK_MODEL_VRAM_CLAIM forces all GPUs")
        if sel.get("gpus_per_replica") != n:
            p.append(f"model.gpu_selector.gpus_per_replica: must be {n}")
        for k, v in launch.env.items():
            if k not in model.get("env", {}):
                p.append(f"model.env: {k} of the launch spec is missing")
    expected_entry = {"name": model.get("name"), "cluster_name": entry.get("cluster_name"),
                      **{k: v for k, v in model.items() if k != "name"}}
    if entry != expected_entry:
        diff = sorted(set(entry) ^ set(expected_entry)) or sorted(k for k in entry if entry[k] != expected_entry.get(k))
        p.append(f"import.yaml: differs from model.json (+cluster_name) in {diff}")
    return p


# ------------------------------------------------------------------ rendering

def render_gpustack(launch: LaunchSpec, *, worker: str | None = None, cluster: str = "default",
                    source: ModelSource | None = None) -> dict[str, str]:
    """``{"backend.json": text, "model.json": text, "import.yaml": text}``, serialised from the documents
    and validated (``validate_gpustack``)."""
    view = gpustack_documents(launch, worker=worker, cluster=cluster, source=source)
    backend, model = view["backend"], model_body(view["model"])
    entry = {"name": model["name"], "cluster_name": cluster, **{k: v for k, v in model.items() if k != "name"}}
    problems = validate_gpustack(backend, model, entry, launch)
    if problems:
        raise RenderError("target gpustack", "; ".join(problems), "please report: the renderer broke a GPUStack rule")
    head = (f"# Kimi-K3 deployment for GPUStack {GPUSTACK_VERSION} (POST /v2/models/import), rendered by gpustack-k3.\n"
            f"# Needs the custom backend {model['backend']} (backend.json) registered first.\n")
    return {"backend.json": dump_json(backend), "model.json": dump_json(model),
            "import.yaml": head + dump_yaml_documents([entry]).removeprefix("---\n")}


def refuse_topology(tl) -> None:
    """GPUStack: a custom backend runs on one worker (docs/sources.md#gpustack-single-worker; gpustack#4464,
    #5658), and the built-in vLLM backend's runners stop at vLLM 0.32.0 and render only eagle3|mtp|ngram drafts,
    so neither covers a role spanning pods or P/D roles with our engine versions. Raises RenderError naming why."""
    for r in tl.roles:
        if r.pods_per_instance > 1:
            raise RenderError(f"{r.field_prefix}.podsPerInstance", (
                f"role {r.role} spans {r.pods_per_instance} workers: GPUStack custom backends cannot span workers "
                "(gpustack#4464, #5658), and the built-in vLLM backend (runners up to vLLM 0.32.0, drafts "
                "eagle3|mtp|ngram only) does not run this engine version's data/expert-parallel group"),
                "use the kubernetes (LeaderWorkerSet) target")
    if tl.disaggregation or len(tl.roles) > 1:
        raise RenderError("spec.roles", ("P/D or several roles: GPUStack 2.3.0 models P/D only for its own backends "
                                         "and a custom backend is one worker; this product does not render it"),
                          "use the kubernetes target, or render each role as its own document")
    for r in tl.roles:
        if r.instances > 1:
            raise RenderError(f"{r.field_prefix}.instances", f"role {r.role} asks for {r.instances} instances: "
                              "this product renders one GPUStack model of one replica per document", "use the kubernetes target, or set the model's replicas in GPUStack")
