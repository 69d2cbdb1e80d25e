"""Field coverage (issue 33, What 2): every field of the document reaches every channel, or the channel says it cannot.

The fields are not listed by hand: they are read from the pydantic models of ``gpustack_k3/api/v1alpha1/spec.py``
(``DeploymentDocument`` down to every leaf, ``spec.roles[]`` included), so a field added tomorrow is covered
tomorrow. For each field and each document shape (single engine, one role, P/D, wide-EP; vLLM and SGLang) a
document that sets it to another value is built from a preset; then:

* the document is refused by ``validate`` naming that field (every channel reports it), or
* every channel — launch, argv, Kubernetes (the single-engine objects; LeaderWorkerSet and DisaggregatedSet forms),
  the operator's render, GPUStack, Docker — either changes its output (the field is *carried*), or refuses naming
  the field, or refuses the whole document as it refuses the shape without it (docker/gpustack and a multi-pod
  topology). *Neither* is a silently dropped field: the test fails naming field, shape and channel.

What a channel legitimately does not express is listed in ``NOT_EXPRESSED`` with the reason (the engine's command
line carries no Kubernetes placement, for instance): the list is the contract, reviewed like code, and a field
leaves it only by being carried. Values come from the field's own type (every other ``Literal`` option, the other
boolean, integers inside the field's bounds) or, for free text whose meaning the rules check (catalog keys,
backends), from ``HINTS``; a value the schema refuses, or whose document the rules refuse naming another field,
tells nothing and the next value is tried. Every field must be exercised in at least one shape.

Bounded: one shape per field (rotating over the 8 shapes; ``GPUSTACK_K3_FULL_COVERAGE=1`` sweeps every shape,
~8 min), at most three values per field and shape, rendered in memory without the schema validator (the objects
are the same): ~25 s of CPU on one core (measured: `pytest tests/contract/test_field_coverage.py`, user 23.7 s).
A hypothesis test then sets several fields at once. Silent drops found and not yet fixed are ``KNOWN_GAPS``.
"""
from __future__ import annotations

import copy
import json
import os
import re
import types
import typing
from functools import cache
from typing import Any

import annotated_types
import pydantic
import pydantic_core
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.errors import Refused

# ----------------------------------------------------------------------------- the fields, from the models


def _unwrap(a: Any) -> Any:
    o = typing.get_origin(a)
    if o is typing.Annotated:
        return _unwrap(typing.get_args(a)[0])
    if o in (typing.Union, types.UnionType):
        args = [x for x in typing.get_args(a) if x is not type(None)]
        return _unwrap(args[0]) if len(args) == 1 else a
    return a


def _is_model(a: Any) -> bool:
    return isinstance(a, type) and issubclass(a, BaseModel)


def _walk(model: type[BaseModel], prefix: str):
    for name, info in model.model_fields.items():
        a = _unwrap(info.annotation)
        if _is_model(a):
            yield from _walk(a, f"{prefix}{name}.")
        elif name == "roles" and typing.get_origin(a) is list and _is_model(_unwrap(typing.get_args(a)[0])):
            yield from _walk(_unwrap(typing.get_args(a)[0]), f"{prefix}{name}[].")
        else:
            yield f"{prefix}{name}", a, info


LEAVES = {path: (a, info) for path, a, info in _walk(DeploymentDocument, "")}
ROLE = "spec.roles[]."

# ----------------------------------------------------------------------------- the shapes


def _one_role(preset: str) -> dict:
    d = copy.deepcopy(load_catalog().presets[preset].document)
    d["spec"]["roles"] = [{"name": "serve", "role": "serve", "gpusPerPod": d["spec"].get("hardware", {}).get(
        "gpuCount", 8)}]
    return d


def _preset(name: str) -> dict:
    return copy.deepcopy(load_catalog().presets[name].document)


SHAPES: dict[str, Any] = {
    "single-vllm": lambda: _preset("vllm-fixed"),
    "single-sglang": lambda: _preset("sglang-fixed"),
    "one-role-vllm": lambda: _one_role("vllm-fixed"),
    "one-role-sglang": lambda: _one_role("sglang-fixed"),
    "pd-vllm": lambda: _preset("kimi-k3-b300-1p1d"),
    "pd-sglang": lambda: _preset("kimi-k3-b300-1p1d-sglang"),
    "wide-ep-vllm": lambda: _preset("dsv41-flash-gb300-8p1d"),
    "wide-ep-sglang": lambda: _preset("dsv41-flash-gb300-8p1d-sglang"),
}

# ----------------------------------------------------------------------------- what a channel does not express

_K8S_ONLY = "a Kubernetes scheduling/object field: the engine's command line and environment have no place for it"
_NOT_ENGINE = "not part of the engine's command line or environment (argv is {image, command, args, env, secret_env})"
_META = "the deployment's own metadata, which names and labels the platform objects, not the engine process"
NOT_EXPRESSED: dict[str, dict[str, str]] = {
    # channel -> {field (prefix; spec.roles[].x counts as spec.x): why the channel has nothing to carry}
    "argv": {
        "metadata.labels": _META, "metadata.annotations": _META, "metadata.namespace": _META,
        "spec.placement": _K8S_ONLY, "spec.serving.networkPolicy": _K8S_ONLY,
        "spec.storage.model.kind": _NOT_ENGINE, "spec.storage.model.source": _NOT_ENGINE,
        "spec.storage.model.sizeGiB": _NOT_ENGINE, "spec.storage.cache.kind": _NOT_ENGINE,
        "spec.storage.cache.source": _NOT_ENGINE, "spec.storage.cache.sizeGiB": _NOT_ENGINE,
        "spec.storage.shmSizeGiB": _NOT_ENGINE, "spec.startup": _NOT_ENGINE,
        "spec.network.rdma": _K8S_ONLY, "spec.routing": "the router in front of the roles, not an engine's argument",
        "spec.roles[].instances": "how many copies run, not what one runs (argv.json lists it per role)",
    },
    "docker": {
        "metadata.namespace": "a Kubernetes namespace; Docker has none",
        "spec.placement": _K8S_ONLY, "spec.serving.networkPolicy": _K8S_ONLY,
        "spec.storage.model.sizeGiB": "Docker volumes have no size", "spec.storage.cache.sizeGiB":
            "Docker volumes have no size",
        "spec.startup.warmup": "sent by `run` after Ready, not part of the container",
    },
    "gpustack": {
        "metadata.namespace": "GPUStack has no namespaces",
        "metadata.labels": "GPUStack 2.3.0 models have no labels",
        "metadata.annotations": "GPUStack 2.3.0 models have no annotations",
        "spec.placement": "GPUStack schedules by its own worker/GPU selectors (render --worker)",
        "spec.serving.networkPolicy": _K8S_ONLY,
        "spec.storage": "GPUStack mounts its own model and cache directories on the worker",
        "spec.startup.warmup": "sent by `gpustack status --probe`, not part of the model",
    },
    "launch": {
        "metadata.labels": _META, "metadata.annotations": _META, "metadata.namespace": _META,
        "spec.placement": "Kubernetes-only details are the Kubernetes target's (README: launch.json is "
                          "target-neutral)",
        "spec.serving.networkPolicy": "a Kubernetes object, the Kubernetes target's",
        "spec.routing": "the router in front of the roles is the Kubernetes target's",
        "spec.network.rdma": "a Kubernetes resource request, the Kubernetes target's",
        "spec.startup.warmup": "sent by `run` and the operator after Ready, not part of the launch",
    },
    "kubernetes": {"spec.startup.warmup": "sent by the operator after Ready (status.coldStart.warmup)"},
    "kubernetes-ds": {"spec.startup.warmup": "sent by the operator after Ready (status.coldStart.warmup)"},
    "operator": {"spec.startup.warmup": "sent by the operator after Ready (status.coldStart.warmup), not an object"},
}
for _ch in ("docker", "gpustack"):
    NOT_EXPRESSED[_ch]["spec.startup"] = ("the cold-start budget and warm-up are followed by `run` / `gpustack status` "
                                          "from the engine's log, not parameters of the container or the model")
_TOOL_INPUT = ("the tool's own input: the model's figures and limits for the rules, the plan and the prediction "
               "(docs/design/011-model-config.md); the engine reads the checkpoint's own config.json, so no channel "
               "carries it (a path is read by the CLI only; the operator refuses one)")
for _ch in NOT_EXPRESSED:
    NOT_EXPRESSED[_ch]["spec.model.config"] = _TOOL_INPUT
    NOT_EXPRESSED[_ch]["spec.model.configJSON"] = _TOOL_INPUT
NOT_EXPRESSED["gpustack"]["spec.serving.host"] = "GPUStack assigns each instance's address on its worker"
_HUB = ("the engine loads spec.model.path from the model volume, where the weights already are (rule "
        "render-volume-source); the hub id is where GPUStack downloads them from (the gpustack target carries it)")
for _ch in ("launch", "argv", "docker", "kubernetes", "kubernetes-ds", "operator"):
    NOT_EXPRESSED[_ch]["spec.model.source"] = _HUB
for _ch in ("kubernetes", "kubernetes-ds", "operator"):
    NOT_EXPRESSED[_ch]["spec.placement.rack.racks"] = (
        "the NVLink domains the deployment may use: a capacity its layout is checked against (rule rack-fit: "
        "exclusive needs one domain per group), not a field of any object")
NOT_EXPRESSED["gpustack"]["spec.serving.port"] = "GPUStack assigns each instance's port ({worker_ip}:{port})"
CONSTANT = {"apiVersion", "kind"}      # one allowed value: nothing to vary

# Silent drops this sweep found that are not fixed yet (issue 33): (channel, field, shape class). Each is a defect
# to fix (carry the field, or refuse/warn naming it), listed so the test guards against new ones; the test fails
# when one of them is carried or reported, so the list only shrinks.
KNOWN_GAPS: list[tuple[str, str, str]] = []
# fields no value of which is usable in the swept shapes, with why
UNUSABLE = {
    "spec.engine.name": "another engine is another document (every engine-specific field changes with it)",
    "spec.hardware.gpuType": "another GPU type changes the figures every memory rule checks (swept with "
                             "GPUSTACK_K3_FULL_COVERAGE=1)",
    "spec.roles[].parallel.tp": "TP must fit gpusPerPod = dpLocal x TP: alone it refuses (topology-gpus-per-pod)",
    "spec.roles[].podsPerInstance": "a pod count needs the DP layout changed with it (topology-dp-layout)",
    "spec.roles[].role": "another role kind changes the P/D role set (pd-roles)",
    "spec.disaggregation.loadFailurePolicy": "the swept shape's values are refused by another rule; swept in full mode",
}


def known_gap(channel: str, path: str, shape: str) -> bool:
    return (channel, path, shape) in KNOWN_GAPS

# ----------------------------------------------------------------------------- values


def _catalog_versions(engine: str) -> list[str]:
    return list(load_catalog().engine(engine).versions)


HINTS: dict[str, Any] = {
    "metadata.name": ["k3cov"], "metadata.namespace": ["k3cov"], "metadata.labels": [{"k3cov": "yes"}],
    "metadata.annotations": [{"example.com/k3cov": "yes"}],
    "spec.engine.version": lambda engine: _catalog_versions(engine),
    "spec.engine.image": ["registry.example/k3cov/engine:1"],
    "spec.model.name": lambda engine: list(load_catalog().models),
    "spec.model.source": ["moonshotai/Kimi-K3", "example/k3cov"],
    "spec.model.path": ["/models/k3cov/Model"], "spec.model.revision": ["main", "k3cov"],
    "spec.model.servedModelName": ["k3cov"], "spec.model.loadFormat": ["safetensors", "auto", "fastsafetensors"],
    "spec.model.dtype": ["bfloat16", "auto"],
    # the catalog model's own config.json-shaped block: the preset stays the same model (docs/design/011)
    "spec.model.configJSON": lambda engine: [load_catalog().models["kimi-k3"].architecture.config],
    "spec.speculative.draftModel": ["/models/k3cov-draft"],
    "spec.speculative.attentionBackend": ["FLASHINFER_MLA", "TRITON_MLA", "FLASH_ATTN"],
    "spec.speculative.extraConfig": [{"disable_padded_drafter_batch": True}, {"k3cov": 1}],
    "spec.parallel.eplb.communicator": ["nixl", "torch_gloo", "symm_mem"],
    "spec.parallel.eplb.extraConfig": [{"policy": "default"}, {"k3cov": 1}],
    "spec.memory.kvCacheDtype": ["fp8", "auto", "bfloat16", "fp8_e4m3"],
    "spec.memory.mambaSsmDtype": ["float32", "bfloat16", "auto"],
    "spec.parsers.toolCall": ["kimi_k3", "kimi_k2", "deepseek_v31"],
    "spec.parsers.reasoning": ["kimi_k3", "kimi_k2", "deepseek_r1"],
    "spec.hardware.gpuType": lambda engine: list(load_catalog().hardware),
    "spec.serving.host": ["127.0.0.1", "::"],
    "spec.vllm.moeBackend": ["auto", "triton", "flashinfer_cutlass"],
    "spec.vllm.attentionBackend": ["FLASHINFER_MLA", "TRITON_MLA", "FLASH_ATTN"],
    "spec.vllm.attentionConfig": [{"use_prefill_query_quantization": False}, {"mla_prefill_backend": "FLASHINFER"}],
    "spec.vllm.additionalConfig": [{"decode_backend": "latency_specialized"}, {"k3cov": 1}],
    "spec.sglang.decodeAttentionBackend": ["flashinfer", "triton", "fa3", "flashmla"],
    "spec.sglang.prefillAttentionBackend": ["flashinfer", "triton", "fa3", "flashmla"],
    "spec.sglang.moeA2aBackend": ["deepep", "none"],
    "spec.env": [{"K3COV": "1"}],
    "spec.secretEnv": [[{"name": "K3COV_TOKEN", "secretName": "k3cov", "key": "token"}]],
    "spec.extraArgs": lambda engine: [["--seed", "7"]] if engine == "vllm" else [["--random-seed", "7"]],
    "spec.storage.model.source": ["/srv/k3cov-models", "k3cov-models"],
    "spec.storage.cache.source": ["/srv/k3cov-cache", "k3cov-cache"],
    "spec.storage.cachePath": ["/k3cov-cache"],
    "spec.placement.nodeSelector": [{"k3cov": "yes"}],
    "spec.placement.tolerations": [[{"key": "k3cov", "operator": "Exists", "effect": "NoSchedule"}]],
    "spec.placement.rack.topologyKey": ["example.com/k3cov"],
    "spec.roles[].name": ["k3cov"],
    "spec.disaggregation.extraConfig": [{"k3cov": 1}],
    "spec.disaggregation.ibDevice": ["mlx5_0"],
    "spec.network.rdma.resource": ["rdma/k3cov"],
    "spec.network.ucx.transports": ["rc,cuda_copy"], "spec.network.ucx.netDevices": ["mlx5_0:1"],
}
# a section created to hold a field needs its required siblings
REQUIRED = {"spec.network.rdma": {"resource": "rdma/k3cov"}}


def _bounds(info) -> tuple[float, float]:
    lo, hi = -10**9, 10**9
    for m in info.metadata:
        if isinstance(m, annotated_types.Ge):
            lo = max(lo, m.ge)
        elif isinstance(m, annotated_types.Gt):
            lo = max(lo, m.gt + (1e-9 if isinstance(m.gt, float) else 1))
        elif isinstance(m, annotated_types.Le):
            hi = min(hi, m.le)
        elif isinstance(m, annotated_types.Lt):
            hi = min(hi, m.lt)
    return lo, hi


def candidates(path: str, current: Any, engine: str) -> list[Any]:
    """Values for ``path`` other than ``current``, most plausible first."""
    a, info = LEAVES[path]
    key = path.replace(ROLE, "spec.") if path.startswith(ROLE) and path.replace(ROLE, "spec.") in HINTS \
        and path not in HINTS else path
    if key in HINTS:
        h = HINTS[key]
        values = h(engine) if callable(h) else h
    elif typing.get_origin(a) is typing.Literal:
        values = list(typing.get_args(a))
    elif a is bool:
        values = [True, False] if current is None else [not current]
    elif a is int:
        lo, hi = _bounds(info)
        base = [current * 2, current + 1, current - 1] if isinstance(current, int) else []
        values = [v for v in [*base, 2, 1, 4, 8, 64, 1024, 8001, int(lo), int(hi)] if lo <= v <= hi]
    elif a is float:
        lo, hi = _bounds(info)
        base = [round(current * 0.9, 4), round(current * 1.1, 4)] if isinstance(current, float) else []
        values = [v for v in [*base, 0.8, 0.5, 2.0] if lo <= v <= hi]
    else:
        values = ["k3cov"]
    out = []
    for v in values:
        if v != current and v not in out:
            out.append(v)
    return out


# ----------------------------------------------------------------------------- documents


def _role_index(data: dict) -> int:
    return 0


def get_path(data: dict, path: str) -> Any:
    """The value in ``data`` at ``path``, else the field's default (what the document means without it)."""
    cur: Any = data
    for part in _parts(data, path):
        if isinstance(cur, list) and isinstance(part, int) and part < len(cur) or isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            default = LEAVES[path][1].default
            return None if default is pydantic_core.PydanticUndefined else default
    return cur


def _parts(data: dict, path: str) -> list:
    if path.startswith(ROLE):
        return ["spec", "roles", _role_index(data), *path[len(ROLE):].split(".")]
    return path.split(".")


def set_path(data: dict, path: str, value: Any) -> dict:
    d = copy.deepcopy(data)
    cur: Any = d
    parts = _parts(d, path)
    walked = []
    for part in parts[:-1]:
        walked.append(str(part))
        if isinstance(cur, list):
            cur = cur[part]
            continue
        if cur.get(part) is None:
            cur[part] = copy.deepcopy(REQUIRED.get(".".join(walked), {}))
        cur = cur[part]
    cur[parts[-1]] = value
    return d


def applies(path: str, shape: str) -> bool:
    return not path.startswith(ROLE) or not shape.startswith("single")


def engine_of(shape: str) -> str:
    return "sglang" if shape.endswith("sglang") else "vllm"


# ----------------------------------------------------------------------------- the channels


def _norm_objects(objs: list[dict]) -> str:
    objs = copy.deepcopy(objs)
    for o in objs:
        for md in _metas(o):
            (md.get("annotations") or {}).pop(api.ANNOTATION_LAUNCH_SHA256, None)
    return json.dumps(objs, sort_keys=True)


def _metas(o: dict):
    yield o.get("metadata") or {}
    spec = o.get("spec") or {}
    for s in [spec, *(r.get("spec") or {} for r in spec.get("roles") or [] if isinstance(r, dict))]:
        if isinstance(s.get("template"), dict):
            yield s["template"].get("metadata") or {}
        lwt = s.get("leaderWorkerTemplate") or {}
        for k in ("leaderTemplate", "workerTemplate"):
            if isinstance(lwt.get(k), dict):
                yield lwt[k].get("metadata") or {}


def channels(data: dict) -> dict[str, tuple]:
    """Each channel's answer for an accepted document: ("out", normalised text) or ("refused", where, message)."""
    from gpustack_k3.operator import hooks
    from gpustack_k3.render.kubernetes import render_kubernetes
    from gpustack_k3.render.lws import render_document
    from gpustack_k3.render.targets import (
        prepare,
        render_targets,
        render_topology_targets,
    )
    from gpustack_k3.render.templates import RenderError

    doc = DeploymentDocument.model_validate(data)
    out: dict[str, tuple] = {}
    plain = ("launch", "argv", "docker", "gpustack")
    if doc.spec.roles:
        files, refused, _ = render_topology_targets(doc, plain)
        for form, name in (("leaderworkerset", "kubernetes"), ("disaggregatedset", "kubernetes-ds")):
            try:
                out[name] = ("out", _norm_objects(render_document(doc, form=form, validate=False)))
            except RenderError as exc:
                out[name] = ("refused", exc.where, exc.message)
    else:
        launch, _ = prepare(doc)
        files, refused = render_targets(launch, plain, doc=doc)
        try:
            out["kubernetes"] = ("out", _norm_objects(render_kubernetes(launch, doc)))
        except RenderError as exc:
            out["kubernetes"] = ("refused", exc.where, exc.message)
    for t in plain:
        out[t] = ("refused", refused[t].where, refused[t].message) if t in refused else (
            "out", json.dumps(files[t], sort_keys=True))
    try:
        out["operator"] = ("out", _norm_objects(hooks.render(copy.deepcopy(data))))
    except RenderError as exc:
        out["operator"] = ("refused", exc.where, exc.message)
    return out


@cache
def _base(shape: str) -> dict[str, tuple]:
    return channels(SHAPES[shape]())


def _field_key(field: str) -> str:
    """``spec.roles[3].memory.fraction`` and ``spec.memory.fraction`` -> ``spec.memory.fraction``."""
    return re.sub(r"\[\d*\]", "[]", field).replace(ROLE, "spec.")


def related(where: str | None, path: str) -> bool:
    if not where:
        return False
    a, b = _field_key(where.split()[0]), _field_key(path)
    return a == b or b.startswith((a + ".", a + "[")) or a.startswith(b + ".")


def not_expressed(channel: str, path: str) -> str | None:
    key = _field_key(path)
    for prefix, why in NOT_EXPRESSED.get(channel, {}).items():
        p = _field_key(prefix)
        if key == p or key.startswith(p + "."):
            return why
    return None


class Unusable(Exception):
    """The value tells nothing about this field (the schema refuses it, or the rules refuse another field)."""


def judge(shape: str, path: str, value: Any) -> set[str]:
    """The channels that neither carried nor reported ``path`` set to ``value`` in ``shape``; raises Unusable.
    A finding of ``validate`` naming the field (an error refusing the document, or a warning saying what becomes
    of it) reports it for every channel."""
    from gpustack_k3.core.launch import Refused
    from gpustack_k3.core.rules import validate

    data = set_path(SHAPES[shape](), path, value)
    try:
        doc = DeploymentDocument.model_validate(data)
    except pydantic.ValidationError as exc:
        raise Unusable(str(exc).splitlines()[0]) from None
    findings = validate(doc)
    if any(related(f.field, path) for f in findings if f.severity in ("error", "warning")):
        return set()                                # reported by validate, naming the field
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise Unusable("; ".join(f"{f.rule} {f.field}" for f in errors[:3]))
    try:
        got = channels(data)
    except Refused as exc:                          # the targets' own findings (render family: volumes)
        if any(related(f.field, path) for f in exc.findings if f.severity == "error"):
            return set()
        raise Unusable("; ".join(f"{f.rule} {f.field}" for f in exc.findings[:3])) from None
    base = _base(shape)
    silent = set()
    for ch, answer in got.items():
        if answer != base.get(ch):
            continue                                # carried (or newly refused: said, not silent)
        if answer[0] == "refused":
            continue                                # the channel refuses this document, as without the field
        if not_expressed(ch, path):
            continue
        silent.add(ch)
    return silent


def overridden_by_every_role(shape: str, path: str) -> bool:
    """``spec.X`` where every role of the shape sets ``X`` itself: the README's documented field-by-field override,
    the shared value never in effect."""
    if path.startswith(ROLE) or not path.startswith("spec."):
        return False
    roles = SHAPES[shape]()["spec"].get("roles") or []
    sub = path[len("spec."):].split(".")
    def has(r):
        cur = r
        for part in sub:
            if not isinstance(cur, dict) or part not in cur:
                return False
            cur = cur[part]
        return True
    return bool(roles) and all(has(r) for r in roles)


def sweep(path: str, shape: str, tries: int = 3) -> tuple[bool, set[str], list]:
    """(exercised, channels silent for every usable value, values used): up to ``tries`` values; a channel drops
    the field only when no usable value changed its output (a value can equal what is in effect anyway, e.g. the
    engine's own default, which emits no flag)."""
    current = get_path(SHAPES[shape](), path)
    silent: set[str] | None = None
    used = []
    for value in candidates(path, current, engine_of(shape))[:tries]:
        try:
            found = judge(shape, path, value)
        except Unusable:
            continue
        used.append(value)
        silent = found if silent is None else silent & found
        if not silent:
            break
    return silent is not None, silent or set(), used


FIELDS = sorted(p for p in LEAVES if p not in CONSTANT)
# swept in every shape, and left out of the rotation below so that adding them moved no other field's shape (the
# rotation is by position): the model's config.json, which no channel carries (NOT_EXPRESSED), costs little;
# eplb.extraConfig (spec and roles), added after the rotation was set (vLLM shapes only)
EVERY_SHAPE = ("spec.model.config", "spec.model.configJSON", "spec.parallel.eplb.extraConfig",
               "spec.roles[].parallel.eplb.extraConfig")
ROTATION = [p for p in FIELDS if p not in EVERY_SHAPE]


CLASSES = ("single", "one-role", "pd", "wide-ep")


def shapes_for(path: str) -> list[str]:
    """The shapes a field is swept in: every shape with GPUSTACK_K3_FULL_COVERAGE=1 (~8 min on one core); else one
    shape per field, rotating over the shape classes and then the engines by the field's position (each of the 8
    shapes gets an eighth of the fields): the bounded run of the unit tiers (~60 s)."""
    shapes = [s for s in SHAPES if applies(path, s)]
    if os.environ.get("GPUSTACK_K3_FULL_COVERAGE") == "1" or path in EVERY_SHAPE:
        return shapes
    classes = [c for c in CLASSES if any(s.startswith(c + "-") for s in shapes)]
    i = ROTATION.index(path)
    cls, engine = classes[i % len(classes)], ("vllm", "sglang")[(i // len(classes)) % 2]
    return [f"{cls}-{engine}"]


@pytest.mark.parametrize("path", FIELDS)
def test_every_field_is_carried_or_reported_by_every_channel(path):
    exercised, drops, healed = [], [], []
    for shape in shapes_for(path):
        if overridden_by_every_role(shape, path):
            exercised.append(shape)
            continue
        ok, silent, used = sweep(path, shape)
        if not ok:
            continue
        exercised.append(shape)
        known = {ch for ch in silent if known_gap(ch, path, shape)}
        drops += [f"{shape} ({path} = {used!r}) {ch}: output unchanged and nothing reported"
                  for ch in sorted(silent - known)]
        healed += [f"{shape} {ch}" for ch, p, sh in KNOWN_GAPS if p == path and sh == shape and ch not in silent]
    if path not in UNUSABLE:
        assert exercised, f"{path}: no value of the field was usable in {shapes_for(path)} (extend HINTS)"
    assert not drops, "silently dropped:\n" + "\n".join(drops)
    assert not healed, (f"{path} is carried or reported now by {healed}: remove it from KNOWN_GAPS")


def test_the_walk_sees_every_section():
    """The leaves come from the models: a few landmarks, so a broken walk cannot pass by finding nothing."""
    for p in ("spec.roles[].placement.nodeSelector", "spec.parallel.eplb.windowSize", "spec.secretEnv",
              "metadata.labels", "spec.disaggregation.connector", "spec.network.rdma.count"):
        assert p in LEAVES, p
    assert len(LEAVES) > 150


def test_not_expressed_names_only_fields_that_exist():
    for ch, table in NOT_EXPRESSED.items():
        for prefix in table:
            key = _field_key(prefix)
            assert any(_field_key(p) == key or _field_key(p).startswith(key + ".") for p in LEAVES), (ch, prefix)


def test_a_dropped_field_is_caught(monkeypatch):
    """The test can fail: with per-role placement dropped again (issue 33 item 1), the sweep names it."""
    from gpustack_k3.render import lws

    monkeypatch.setattr(lws, "role_placement", lambda doc, role: doc.spec.placement if doc else None)
    _base.cache_clear()
    try:
        # (the operator's render caches by document, so it may answer from before the patch)
        assert judge("pd-vllm", "spec.roles[].placement.nodeSelector", {"k3cov": "yes"}) >= {
            "kubernetes", "kubernetes-ds"}
    finally:
        _base.cache_clear()


# ----------------------------------------------------------------------------- several fields at once


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_several_fields_at_once(data):
    """Fields set together still each reach every channel: a value set beside another is not lost to it."""
    shape = data.draw(st.sampled_from(sorted(SHAPES)))
    paths = data.draw(st.lists(st.sampled_from([p for p in FIELDS if applies(p, shape)]), min_size=2, max_size=3,
                               unique=True))
    doc = SHAPES[shape]()
    for p in paths:
        values = candidates(p, get_path(doc, p), engine_of(shape))
        if values:
            doc = set_path(doc, p, data.draw(st.sampled_from(values[:3])))
    from gpustack_k3.core.rules import validate

    try:
        parsed = DeploymentDocument.model_validate(doc)
    except pydantic.ValidationError:
        return
    if any(f.severity == "error" for f in validate(parsed)):
        return
    try:
        got = channels(doc)
    except Refused:   # a render rule refuses the document (e.g. a hostPath cache without its path): reported, not lost
        return
    for ch, answer in got.items():
        assert answer[0] in ("out", "refused"), ch
