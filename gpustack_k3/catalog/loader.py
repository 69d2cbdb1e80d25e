"""Load and validate the catalog data files (``catalog/data``). Loaded once per process, cached."""
from __future__ import annotations

import functools
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import Ge, Gt

from gpustack_k3 import _startup_cache
from gpustack_k3.errors import CatalogError  # the packaged catalog is inconsistent

# The catalog types are declared as plain annotated classes and made dataclasses only when pydantic must
# validate data files (a start-up cache miss: _as_dataclasses). Making a dataclass compiles its generated
# __init__ at every start: for the first fifteen classes that was ~25 M instructions, more than loading the whole
# validated catalog from the cache (callgrind, 2026-12-01). Instances come from pydantic's validation or from
# the start-up cache (which calls no __init__), so no code path needs the dataclass machinery before validation.
_FORBID = {"extra": "forbid"}
_TYPES: list[type] = []

DATA = Path(__file__).parent / "data"


def _dc(cls):
    """A catalog type: registered to be made a dataclass (kw_only; no generated __eq__ or __repr__: nothing
    compares or prints catalog entries) before the first validation. Every class has a docstring (else
    dataclass builds one from inspect.signature)."""
    cls.__pydantic_config__ = _FORBID
    _TYPES.append(cls)
    return cls


def replace(entry: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` for a catalog entry: a copy with ``changes``, checked as the dataclass's __init__
    checks them. Use this, not ``dataclasses.replace``: an entry loaded from the start-up cache is not a
    dataclass instance until the types are made dataclasses (which this does first)."""
    from dataclasses import replace as dc_replace

    _as_dataclasses()
    return dc_replace(entry, **changes)


def _as_dataclasses() -> None:
    """Make the catalog types dataclasses, in place (once; the classes keep their identity, so instances
    read from the start-up cache before stay instances of them)."""
    from dataclasses import dataclass, is_dataclass

    for cls in _TYPES:
        if not is_dataclass(cls):
            dataclass(kw_only=True, eq=False, repr=False)(cls)


@_dc
class HardwareProfile:
    """One GPU type: what the driver reports per GPU, the node and rack shape, the device-plugin resource."""
    description: str
    visible_gib: Annotated[float, Gt(0)]
    gpus_per_node: Annotated[int, Ge(1)]
    sm: str
    resource: str
    node_selector: dict[str, str]
    source: str
    estimated: bool = False
    gpus_per_rack: int | None = None        # a scale-up domain (GB300 NVL72: 72); None: no rack unit
    nvlink_domain: NvlinkDomain | None = None   # multi-node NVLink (IMEX) domain; None: NVLink stays in a node
    host_ram_gib: Annotated[float, Gt(0)] | None = None   # host RAM per node (the engine oracle's host double)


@_dc
class NvlinkDomain:
    """A multi-node NVLink domain (an NVL72 rack): pods on different nodes reach each other's GPUs over NVLink
    only inside one IMEX domain (a ComputeDomain on Kubernetes, docs/design/004-rack-scale.md)."""
    gpus: Annotated[int, Ge(1)]
    nodes: Annotated[int, Ge(1)]
    label: str                              # node label naming the domain (NVIDIA GPU feature discovery)
    source: str


@_dc
class RouterImage:
    """A pinned router or endpoint-picker image (never a moving tag)."""
    image: str
    version: str
    source: str


@_dc
class SglangRouter:
    """The pinned SGLang router (sglang-router / SGLang Model Gateway): image, launcher and its policy choices."""
    image: str
    version: str
    source: str
    command: list[str]
    prefill_policies: list[str]
    decode_policies: list[str]


@_dc
class RoutingCatalog:
    """Router and endpoint-picker images (catalog/data/routing.yaml)."""
    vllm_router: RouterImage
    endpoint_picker: RouterImage
    sglang_router: SglangRouter


@_dc
class DraftArtifact:
    """Where a model's speculative draft is published: hub id, config file name, path beside the model."""
    modelscope: str
    config_name: str
    path: str


@_dc
class Calibration:
    """Figures taken or fitted from one engine log: agreement with that log at its own settings (those of
    ``preset``) is calibration, not accuracy (the plan's notes say so)."""
    log: str             # which log, and where its figures are written down
    preset: str          # the catalog preset that has the log's settings
    inputs: list[str]    # the figures of this entry taken or fitted from it


@_dc
class ModelEngineFigures:
    """One model's memory figures for one engine (the planner's inputs); None where not public."""
    weights_per_gpu_gib: float | None = None   # None: not public; the planner reports "unknown"
    # vLLM
    non_kv_fixed_gib: float | None = None
    activation_peak_gib: float | None = None
    activation_calibration_tokens: int | None = None
    cudagraph_gib: float | None = None
    kv_bytes_per_token: dict[str, int] | None = None
    block_size_tokens: int | None = None
    runtime_headroom_gib: float | None = None
    calibration_gpus: int = 8
    # SGLang
    full_kv_bytes_per_token: dict[str, int] | None = None
    draft_kv_bytes_per_token: int | None = None
    mamba_state_per_request_gib: float | None = None
    mamba_spec_ratio: float | None = None
    eagle_default_max_running_requests: int | None = None
    draft: DraftArtifact | None = None
    calibration: Calibration | None = None


@_dc
class ModelEntry:
    """A model: where it comes from, its size and context, per-engine figures, topology figures."""
    description: str
    source_id: str
    hub: str
    default_path: str
    max_context: int
    weight_bytes_total_gib: float | None       # None: not public (the planner says unknown)
    engines: dict[str, ModelEngineFigures]
    # Topology figures (docs/design/002-topologies.md): None where not public, never invented
    hybrid_mamba: bool = False                 # MLA + Mamba-style state (Kimi-K3 KDA): P/D needs equal DCP
    routed_experts: int | None = None
    experts_per_token: int | None = None
    draft_routed_experts: int | None = None
    draft_experts_per_token: int | None = None
    kv_bytes_per_token: int | None = None      # per DP rank, per token (all layers)
    quantization: str | None = None            # the checkpoint's quant_method (mxfp4, fp8, ...); None: unquantized/unknown
    figure_sources: dict[str, str] = field(default_factory=dict)
    # config.json figures of the target and of its speculative draft (read by core.model_config, planned by
    # core/plan_moe.py); None where not public
    architecture: ConfigFigures | None = None
    draft_architecture: ConfigFigures | None = None


@_dc
class ConfigFigures:
    """A model's ``config.json`` as the catalog holds it (the keys the model publishes, config.json-shaped): read by the
    one reader, core.model_config.arch_from_config, like a local config.json. Not public: the keys are absent."""
    source: str
    config: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        """A config key read as an attribute (``kv_lora_rank``): None where the config does not give it. Readers
        should prefer core.model_config's ModelArch (Resolved.model_arch), which also reads ``text_config``."""
        if name.startswith("_"):
            raise AttributeError(name)
        return (self.__dict__.get("config") or {}).get(name)


@_dc
class FlagSpec:
    """One row of an engine's flag table: the spec field, the flag it maps to, how the value is written."""
    field: str
    flag: str
    kind: Literal["value", "bool_optional", "store_true", "store_false", "json", "speculative", "eplb"] = "value"
    type: Literal["str", "int", "float"] = "str"
    platform: bool = False


@_dc
class ParserRef:
    """Where a version's argument parser comes from: a dump of the real parser (catalog-relative path),
    made from the released wheel (``wheel``: the release; tools/engine_parsers/dump.py) or from an installed
    engine (``made_by``: the script). A build without a public wheel names the release whose parser stands
    for it and why (``nearest``)."""
    dump: str
    wheel: str | None = None
    made_by: str | None = None
    nearest: str | None = None


@_dc
class DsparkDcpBackends:
    """Which MLA attention backends let DSpark run with decode context parallelism in one vLLM release
    (``MLACommonMetadataBuilder._validate_dspark_dcp_support``): the draft's non-causal block needs
    ``supports_non_causal_multi_token_dcp``, the target's verify step ``supports_dcp_with_varlen``."""
    draft: list[str]                                   # supports_non_causal_multi_token_dcp = True
    # supports_dcp_with_varlen: always; only with cp_kv_cache_interleave_size 1; or decided by the platform's
    # kernels at start-up (ROCm AITER), which a spec cannot show
    verify: dict[str, Literal["always", "interleave_1", "platform"]]
    source: str


@_dc
class CompileCacheEnv:
    """Which environment variables key vLLM's torch.compile cache (a persistent cache is reused only when the
    hash matches): every variable vLLM knows except ``names`` (``all_known_except``), or only ``names``."""
    hashed: Literal["all_known_except", "only"]
    names: list[str]
    also_hashed: list[str] = field(default_factory=list)   # known variables without the VLLM_ prefix
    source: str


@_dc
class EngineVersion:
    """One pinned engine release: image, command, the traits rules read, what its parser dump says."""
    key: str = ""
    engine: str = ""
    default: bool = False
    image: str
    description: str
    command: list[str] | None = None
    model_arg: Literal["positional", "flag"] | None = None
    traits: dict[str, Any]
    parser: ParserRef
    # Filled from the parser dump at load (the yaml gives only what the dump cannot: a default the engine
    # decides after parsing): defaults of mapped flags, --kv-cache-dtype values, fields whose flag is absent.
    defaults: dict[str, Any] = field(default_factory=dict)
    kv_cache_dtypes: list[str] = field(default_factory=list)
    env_known: list[str] = field(default_factory=list)
    env_removed: dict[str, str] = field(default_factory=dict)
    unsupported_fields: dict[str, str] = field(default_factory=dict)
    dspark_dcp_backends: DsparkDcpBackends | None = None
    compile_cache_env: CompileCacheEnv | None = None


@_dc
class EngineEntry:
    """One engine: how it is started, its flag table, its pinned versions (exactly one default)."""
    engine: Literal["vllm", "sglang"]
    command: list[str]
    model_arg: Literal["positional", "flag"]
    model_flag: str
    default_port: int
    health_path: str
    flags: list[FlagSpec]
    platform_flags: list[str]
    speculative: dict[str, Any]
    defaults_by_gpu_memory: list[dict[str, Any]] = field(default_factory=list)
    cache_env: dict[str, str] = field(default_factory=dict)        # env var -> sub-directory of the persistent cache volume
    topology: dict[str, Any] = field(default_factory=dict)         # multi-pod flags per purpose (vllm.yaml `topology`)
    versions: dict[str, EngineVersion]

    def __post_init__(self) -> None:
        defaults = [k for k, v in self.versions.items() if v.default]
        if len(defaults) != 1:
            raise ValueError(f"engine {self.engine}: exactly one version must be default, got {defaults}")
        for k, v in self.versions.items():
            v.key, v.engine = k, self.engine
        seen: dict[str, str] = {}
        for f in self.flags:
            if f.flag in seen:
                raise ValueError(f"engine {self.engine}: flag {f.flag} mapped twice ({seen[f.flag]}, {f.field})")
            seen[f.flag] = f.field

    def flag_of(self, field: str) -> str:
        """The flag the flag table maps to a spec field (``speculative`` -> --speculative-config on vLLM)."""
        return next(f.flag for f in self.flags if f.field == field)


@_dc
class PresetEntry:
    """A named deployment document shipped with the catalog."""
    name: str
    description: str
    document: dict[str, Any]


@_dc
class AdviceRow:
    """One measured row of the seed's long-context table: engine, context, decode speed, TTFT, TPOT."""
    engine: Literal["vllm", "sglang"]
    context: int
    decode_tok_s: float
    ttft_ms: float
    tpot_ms: float


@_dc
class Advice:
    """The seed's measurements and the presets each piece of advice applies to."""
    source: str
    measurements: list[AdviceRow]
    presets: dict[str, list[str]]


@_dc
class Catalog:
    """Everything the catalog data files say, validated."""
    hardware: dict[str, HardwareProfile]
    models: dict[str, ModelEntry]
    engines: dict[str, EngineEntry]
    presets: dict[str, PresetEntry]
    default_preset: str
    advice: Advice
    routing: RoutingCatalog

    def engine(self, name: str) -> EngineEntry:
        return self.engines[name]

    def version(self, engine: str, key: str | None) -> EngineVersion | None:
        """The catalog version a user's spelling names: the key itself, else as :meth:`pinned_version` reads it."""
        e = self.engines[engine]
        if key is None:
            return next(v for v in e.versions.values() if v.default)
        v = e.versions.get(key)
        return v if v is not None else self.pinned_version(engine, key)

    def pinned_version(self, engine: str, key: str) -> EngineVersion | None:
        """A version as users type it: any case, a leading ``v`` (``v0.33.0``), or a release that is not pinned
        (``0.33.1``): the nearest pinned release at or below it in the same X.Y series (the plain ``X.Y.Z`` keys;
        builds such as ``0.32.0-cpu`` and ``kimi-k3`` are only named exactly; another series can change flags and
        rules wholesale, e.g. 0.29 dropped a DCP refusal of 0.28). None: no such release, or not a version."""
        import re

        versions = self.engines[engine].versions
        text = str(key).strip()
        for k, v in versions.items():
            if k.lower() == text.lower() or k.lower() == text.lower().removeprefix("v"):
                return v
        m = re.fullmatch(r"[vV]?(\d+)\.(\d+)(?:\.(\d+))?(?:[.+-]?[0-9A-Za-z.+-]*)?", text)
        if m is None:
            return None
        want = tuple(int(x or 0) for x in m.groups())
        pinned = [(tuple(int(x) for x in k.split(".")), v) for k, v in versions.items()
                  if re.fullmatch(r"\d+\.\d+\.\d+", k)]
        below = [(t, v) for t, v in pinned if t <= want and t[:2] == want[:2]]   # the same X.Y series only
        return max(below, key=lambda tv: tv[0])[1] if below else None

    def gpu(self, name: str | None) -> HardwareProfile | None:
        """The hardware profile of a GPU type, its name in any case (``B300`` is ``b300``)."""
        if name is None:
            return None
        hw = self.hardware.get(name)
        if hw is None:
            hw = next((h for k, h in self.hardware.items() if k.lower() == str(name).lower()), None)
        return hw

    def gpu_key(self, name: str | None) -> str | None:
        """The catalog's own spelling of a GPU type name (None: not in the catalog)."""
        hw = self.gpu(name)
        return next((k for k, h in self.hardware.items() if h is hw), None) if hw is not None else None


def _read(path: Path) -> Any:
    import yaml  # only on a cache miss

    with path.open("rb") as fh:
        return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe loaders


@functools.lru_cache(maxsize=4)
def load_catalog(data_dir: Path | None = None) -> Catalog:
    """The catalog from ``data_dir`` (default: the packaged data), validated; raises CatalogError naming the
    problem. The validated catalog is cached (gpustack_k3._startup_cache) under a key of this module's source
    (the types and checks that build it) by content and every data file by path, size and mtime (hashing 0.8 MB
    of parser dumps cost more than the rest of a cache hit), so the CLI does not re-validate unchanged data on
    every start."""
    root = data_dir or DATA
    name = _startup_cache.entry_name("catalog", (Path(__file__),), root, [p for p in root.rglob("*") if p.is_file()])
    return _startup_cache.cached(name, Catalog, lambda: _load_and_validate(root))


def _load_and_validate(DATA: Path) -> Catalog:
    try:
        raw: dict[str, Any] = {
            "hardware": _read(DATA / "hardware.yaml")["hardware"],
            "models": _read(DATA / "models.yaml")["models"],
            "engines": {},
            "presets": {},
        }
        for p in sorted((DATA / "engines").glob("*.yaml")):
            d = _read(p)
            raw["engines"][d["engine"]] = d
        pidx = _read(DATA / "presets" / "index.yaml")
        raw["default_preset"] = pidx["default"]
        for entry in pidx["presets"]:
            doc = _read(DATA / "presets" / entry["file"])
            raw["presets"][entry["name"]] = {"name": entry["name"], "description": entry["description"], "document": doc}
        raw["advice"] = _read(DATA / "advice.yaml")
        raw["routing"] = _read(DATA / "routing.yaml")["routing"]
        from pydantic import TypeAdapter, ValidationError

        _as_dataclasses()
        try:
            cat = TypeAdapter(Catalog).validate_python(raw)
        except ValidationError as exc:
            raise CatalogError(f"catalog {DATA} is invalid: {exc}") from exc
    except CatalogError:
        raise
    except Exception as exc:   # OSError, KeyError, TypeError, yaml.YAMLError: a broken data file
        raise CatalogError(f"catalog {DATA} is invalid: {type(exc).__name__}: {exc}") from exc
    for eng in cat.engines.values():
        for v in eng.versions.values():
            _apply_parser_dump(DATA, eng, v)
    if cat.default_preset not in cat.presets:
        raise CatalogError(f"default preset {cat.default_preset} is not defined")
    for mname, model in cat.models.items():
        for ename, fig in model.engines.items():
            cal = fig.calibration
            if cal is None:
                continue
            if cal.preset not in cat.presets:
                raise CatalogError(f"models.yaml {mname}.{ename}.calibration names unknown preset {cal.preset}")
            unknown = [f for f in cal.inputs if getattr(fig, f, None) is None or f == "calibration"]
            if unknown:
                raise CatalogError(f"models.yaml {mname}.{ename}.calibration.inputs: {unknown} are not figures of "
                                   "this entry")
    for r in (cat.routing.vllm_router, cat.routing.endpoint_picker, cat.routing.sglang_router):
        tag = r.image.rpartition(":")[2] if "@" not in r.image else ""
        if "@" not in r.image and (tag in ("", "latest", "nightly") or "/" in tag):
            raise CatalogError(f"routing.yaml: image {r.image} is not pinned (a dated tag or a digest)")
    for eng, names in cat.advice.presets.items():
        for n in names:
            if n not in cat.presets:
                raise CatalogError(f"advice.yaml names unknown preset {n}")
    return cat


def _apply_parser_dump(data: Path, eng: EngineEntry, v: EngineVersion) -> None:
    """Defaults, KV cache dtypes and unsupported fields of a version, from its parser dump (one source: the
    yaml restating a value the dump holds is an error)."""
    import json

    where = f"engine {eng.engine} {v.key}"
    try:
        dump = json.loads((data / v.parser.dump).read_text(encoding="utf-8"))
        options = {f: o for o in dump["parser"]["options"] for f in o["flags"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CatalogError(f"{where}: parser dump {v.parser.dump} unreadable: {type(exc).__name__}: {exc}") from exc
    if dump.get("engine") != eng.engine or (v.parser.wheel and dump.get("version") != v.parser.wheel):
        raise CatalogError(f"{where}: parser dump {v.parser.dump} is {dump.get('engine')} {dump.get('version')}")
    for f in eng.flags:
        o = options.get(f.flag)
        if o is None:
            if f.field not in ("model.path",) and f.kind != "speculative":
                v.unsupported_fields.setdefault(f.field, f"{eng.engine} {v.key} has no {f.flag} ({v.parser.dump})")
            continue
        default = o.get("default")
        # platform-owned fields (host, port, served name) are ours to decide; "" and None mean unset
        if f.platform or default is None or default == "" or isinstance(default, (dict, list)):
            continue
        if f.kind == "store_false":
            default = not default
        if f.field in v.defaults:
            raise CatalogError(f"{where}: defaults.{f.field} restates the parser dump's default of {f.flag} "
                               f"({default!r}, {v.parser.dump}); drop it from the yaml")
        v.defaults[f.field] = default
    if v.traits.get("topology") is True:
        # the trait says the topology flags were read in this release: each must be in its parser
        missing = sorted(f for k, f in eng.topology.items() if k.endswith("_flag") and f not in options)
        if missing:
            raise CatalogError(f"{where}: trait topology, but {v.parser.dump} has no {', '.join(missing)}")
    kv = next((f for f in eng.flags if f.field == "memory.kvCacheDtype"), None)
    o = options.get(kv.flag) if kv else None
    values = (o.get("choices") if o.get("choices") is not None else o.get("metavar")) if o else None
    if values:
        if v.kv_cache_dtypes:
            raise CatalogError(f"{where}: kv_cache_dtypes restates {kv.flag}'s values in {v.parser.dump}")
        v.kv_cache_dtypes = [x for x in values if x is not None]
    elif not v.kv_cache_dtypes:
        raise CatalogError(f"{where}: {v.parser.dump} lists no {kv.flag if kv else 'kv cache dtype'} values; "
                           "give kv_cache_dtypes with their source")
