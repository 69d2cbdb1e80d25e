"""Bind a deployment document to its catalog entries and answer "what value is in effect"."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument, DeploymentSpec
from gpustack_k3.catalog.loader import (
    Catalog,
    EngineEntry,
    EngineVersion,
    HardwareProfile,
    ModelEngineFigures,
    ModelEntry,
    load_catalog,
)
from gpustack_k3.core.model_config import arch_from_config, document_arch

_UNSET = object()


def get_path(obj: Any, path: str) -> Any:
    """``get_path(spec, "parallel.tp")``; dict keys work too. Missing → None."""
    cur = obj
    for part in path.split("."):
        if cur is None:
            return None
        cur = cur.get(part) if isinstance(cur, dict) else getattr(cur, part, None)
    return cur


@dataclass
class Resolved:
    doc: DeploymentDocument
    catalog: Catalog
    engine: EngineEntry
    version: EngineVersion | None
    model: ModelEntry | None
    figures: ModelEngineFigures | None
    hardware: HardwareProfile | None
    # what the document said where it named a catalog entry in another spelling (v0.33.0, 0.33.1, B300): the
    # document above carries the catalog's key; rule engine-version-pinned warns naming both
    typed_version: str | None = None
    typed_gpu_type: str | None = None   # likewise for spec.hardware.gpuType (B300 read as b300)
    # the model's architecture figures from its config.json (core.model_config.ModelArch; --model-config or a local
    # model directory): with them a model the catalog does not know is checked for flags and parallelism and planned
    # from its config (core/plan.py; never another model's figures)
    arch: Any = None
    # where the model's own config.json (``arch``) and the catalog entry of the same name disagree: (figure name,
    # catalog value, config value). The config decides (architecture, limits, the memory plan); rule
    # model-config-disagrees-catalog warns naming both
    catalog_disagreements: list[tuple[str, Any, Any]] = field(default_factory=list)
    # the draft checkpoint's config.json (core.model_config.ModelArch, read once at the CLI edge: cli/model_source.py
    # draft_arch_for) where the line's draft is a local directory holding one and not the target; ``raw`` None when
    # that file could not be read (its ``source`` names the path and why); None otherwise
    draft_arch: Any = None

    @property
    def config_known(self) -> bool:
        """A config.json with figures was read for the model (not a stand-in naming where one would come from)."""
        return self.arch is not None and bool(getattr(self.arch, "known", False))

    @property
    def model_arch(self) -> Any:
        """The architecture the plan reads (core.model_config.ModelArch): the model's own config.json where one was
        read, else the catalog entry's config.json-shaped block, else None."""
        if self.config_known:
            return self.arch
        return catalog_arch(self.model, self.spec.model.name)

    @property
    def calibrated(self) -> bool:
        """The catalog's calibrated figures describe this model: a catalog entry with figures whose config.json (if
        one was read) agrees with it. Otherwise the config decides and the plan is derived from it."""
        arch_differs = any(f != "max_positions" for f, _, _ in self.catalog_disagreements)
        return self.figures is not None and self.figures.weights_per_gpu_gib is not None and not arch_differs

    @property
    def spec(self) -> DeploymentSpec:
        return self.doc.spec

    @property
    def complete(self) -> bool:
        return None not in (self.version, self.model, self.hardware)

    def trait(self, name: str, default: Any = None) -> Any:
        return self.version.traits.get(name, default) if self.version else default

    def value(self, path: str) -> Any:
        """The value in effect: the spec's, else the version's default, else the GPU-memory default."""
        v = get_path(self.spec, path)
        if v is not None:
            return v
        if self.version and path in self.version.defaults:
            return self.version.defaults[path]
        if path == "scheduling.maxModelLen":
            # the engines default max_model_len to the config's max_position_embeddings: the config decides
            a = self.arch if self.config_known else None
            if a is not None and a.max_positions:
                return a.max_positions
            if self.model:
                return self.model.max_context
        if self.hardware and path.startswith("scheduling."):
            key = path.split(".", 1)[1]
            for row in self.engine.defaults_by_gpu_memory:
                if self.hardware.visible_gib >= row["min_gib"] and key in row:
                    return row[key]
        return None

    @property
    def spec_enabled(self) -> bool:
        return self.spec.speculative.method != "none"

    @property
    def dcp(self) -> int:
        return int(self.value("parallel.dcp") or 1)

    @property
    def tp(self) -> int:
        return int(self.value("parallel.tp") or 1)

    @property
    def command(self) -> list[str]:
        return list((self.version and self.version.command) or self.engine.command)

    @property
    def model_arg(self) -> str:
        return (self.version and self.version.model_arg) or self.engine.model_arg

    @property
    def model_path(self) -> str:
        return self.spec.model.path or (self.model.default_path if self.model else "/models/model")

    @property
    def port(self) -> int:
        return self.spec.serving.port or self.engine.default_port

    @property
    def image(self) -> str:
        return self.spec.engine.image or (self.version.image if self.version else "")


# figures a catalog entry's architecture block and a model's config.json both give, compared (ModelArch names)
_COMPARED = ("architecture", "model_type", "layers", "hidden_size", "heads", "kv_heads", "kv_lora_rank", "experts",
             "experts_per_token", "vocab_size", "quantization", "mtp_layers")


# figures that say which model a config.json is: where one of them differs, the catalog entry of that name is another
# model and is not used for this one (no calibrated figures, limits or draft of it); the disagreement stays exposed
_IDENTITY = ("architecture", "model_type", "layers", "hidden_size", "heads", "experts")


def catalog_arch(model: ModelEntry | None, name: str) -> Any:
    """The catalog entry's config.json-shaped block read by the one reader (None: the entry has none)."""
    if model is None or model.architecture is None:
        return None
    return arch_from_config(model.architecture.config, f"catalog models.yaml {name}: {model.architecture.source}")


def disagreements(model: ModelEntry | None, name: str, arch: Any) -> list[tuple[str, Any, Any]]:
    """(figure, catalog value, config value) where a read config.json and the catalog entry of the same name differ."""
    if model is None or arch is None or not getattr(arch, "known", False):
        return []
    out: list[tuple[str, Any, Any]] = []
    cat = catalog_arch(model, name)
    if cat is not None:
        for f in _COMPARED:
            c, v = getattr(cat, f), getattr(arch, f)
            if f == "experts":              # no routed experts in a config: a dense model
                c, v = c or 0, v or 0
            if c is not None and v is not None and c != v:
                out.append((f, c, v))
    if arch.max_positions is not None and arch.max_positions != model.max_context:
        out.append(("max_positions", model.max_context, arch.max_positions))
    return out


def resolve(doc: DeploymentDocument, catalog: Catalog | None = None, arch: Any = None) -> Resolved:
    cat = catalog or load_catalog()
    if arch is None:                    # the config.json the document carries inline (spec.model.configJSON)
        arch = document_arch(doc.spec.model)
    eng = cat.engine(doc.spec.engine.name)
    typed = doc.spec.engine.version
    ver = cat.version(eng.engine, typed)
    model = cat.models.get(doc.spec.model.name)
    figs = model.engines.get(eng.engine) if model else None
    typed_gpu = doc.spec.hardware.gpuType
    hw = cat.gpu(typed_gpu)
    spec_update: dict[str, Any] = {}
    if ver is not None and typed is not None and typed != ver.key:
        spec_update["engine"] = doc.spec.engine.model_copy(update={"version": ver.key})
    gpu_key = cat.gpu_key(doc.spec.hardware.gpuType) if hw is not None else None
    if gpu_key is not None and gpu_key != doc.spec.hardware.gpuType:
        spec_update["hardware"] = doc.spec.hardware.model_copy(update={"gpuType": gpu_key})
    if spec_update:   # downstream (launch, targets) reads the catalog's keys
        doc = doc.model_copy(update={"spec": doc.spec.model_copy(update=spec_update)})
    differs = disagreements(model, doc.spec.model.name, arch)
    if any(f in _IDENTITY for f, _, _ in differs):
        model, figs = None, None        # the config.json is another model than the catalog entry of this name
    return Resolved(doc, cat, eng, ver, model, figs, hw,
                    typed_version=typed if "engine" in spec_update else None,
                    typed_gpu_type=typed_gpu if "hardware" in spec_update else None, arch=arch,
                    catalog_disagreements=differs)
