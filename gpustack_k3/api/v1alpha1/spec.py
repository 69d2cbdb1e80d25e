"""The deployment document: one format for CLI files and for the ``K3Deployment`` custom resource.

Field names are camelCase, as Kubernetes users expect; every model refuses unknown fields.
``None`` always means "the engine's own default for that version" and emits no flag.

Annotations are real objects here (no ``from __future__ import annotations``): pydantic then has no
strings to evaluate when the classes are created, which is part of the CLI's start-up budget.
"""
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gpustack_k3.api.v1alpha1.constants import API_VERSION, KIND


def _empty_list() -> list:
    """``default_factory`` of list fields. Not the builtin ``list``: ``model_construct`` (how absent sections are
    made) asks ``inspect.signature`` of each factory whether it takes the validated data, and for a builtin that
    parses its text signature with ``tokenize`` (~1-3 ms a call, pydantic/_internal/_fields.py@2.14.4)."""
    return []


ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# Kubernetes label keys ([prefix/]name) and values (apimachinery validation.IsQualifiedName / IsValidLabelValue)
_NAME63 = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LABEL_KEY = rf"^({DNS_SUBDOMAIN[1:-1]}/)?{_NAME63}$"
LABEL_VALUE = rf"^({_NAME63})?$"
LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=317)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE, max_length=63)]
# the API server validates annotation keys lower-cased (apimachinery ValidateAnnotations)
AnnotationKey = Annotated[str, StringConstraints(pattern=f"(?i){LABEL_KEY}", max_length=317)]


# pydantic's error types of a number's bound (Field ge/gt/le/lt) and of allow_inf_nan=False
_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False, defer_build=True,
                              allow_inf_nan=False)

    @field_validator("*", mode="wrap")
    @classmethod
    def _argv_numbers_are_the_releases(cls, v: Any, handler: Any, info: ValidationInfo) -> Any:
        """A number's bound below (``Field(ge=...)``) guards the documents we write and render. A value read from
        a command line the engine runs as it is (validation context ``{"engine_argv": True}``: check-args,
        check-pd) is judged by that release's own rules instead — what its parser and config classes accept (rule
        vllm-config-bounds, vllm-config-field-bounds, the checks tables): vLLM 0.11.0 builds its config with
        --pipeline-parallel-size -1 or --gpu-memory-utilization -1 (plain ints/floats, config/parallel.py:67 and
        config/cache.py:43@0.11.0), SGLang 0.5.23 with --mamba-full-memory-ratio 0 (a plain Optional[float],
        arg_groups/fields/schedule.py:220-227@0.5.23), and both take ``nan`` there (the engine oracle,
        2026-12-03). The type is still the field's (a bound is all that is left to the release)."""
        if not (info.context or {}).get("engine_argv"):
            return handler(v)
        try:
            return handler(v)
        except ValidationError as exc:
            errs = exc.errors()
            if (isinstance(v, (int, float)) and not isinstance(v, bool)
                    and all(e["type"] in _BOUND_ERRORS and not e["loc"] for e in errs)):
                return v
            raise


class EngineRef(_Strict):
    name: Literal["vllm", "sglang"] = Field(description="Inference engine.")
    version: str | None = Field(default=None, description="Catalog version key (e.g. kimi-k3, 0.33.0); default: the catalog's default.")
    image: str | None = Field(default=None, description="Container image override; default: the catalog image of that version.")


class ModelSource(_Strict):
    name: str = Field(default="kimi-k3", description="Catalog model key.")
    source: str | None = Field(default=None, description="Hub id (ModelScope/Hugging Face), e.g. moonshotai/Kimi-K3.")
    path: str | None = Field(default=None, description=(
        "Path of the weights inside the container, e.g. /models/Kimi-K3; the model volume is mounted at its parent "
        "directory, so it is absolute and below one (a hub id such as moonshotai/Kimi-K3 goes in source)."))
    revision: str | None = None
    trustRemoteCode: bool | None = None
    servedModelName: str | None = Field(default=None, description="Name the API serves; platforms usually own it.")
    loadFormat: str | None = Field(default=None, description="vLLM --load-format, e.g. fastsafetensors.")
    dtype: str | None = None
    config: str | None = Field(default=None, min_length=1, max_length=4096, description=(
        "The model's config.json on the machine running the CLI: a file, or a directory holding config.json (and "
        "hf_quant_config.json, read when present); relative to the current directory. Its figures and limits "
        "decide validate, plan, predict, advise, render, run and gpustack apply over a catalog entry of the same "
        "name; --model-config overrides it. A K3Deployment resource cannot use it (the operator cannot read your "
        "disk): put the file's content in configJSON (docs/design/011-model-config.md)."))
    configJSON: dict[str, Any] | None = Field(default=None, description=(
        "The model's config.json inline (its JSON object as written): what config names, carried in the document "
        "itself, so a K3Deployment resource and a preset are self-contained (docs/design/011-model-config.md). Read by "
        "the one config.json reader when the document is used: an unusable one is refused naming this field."))

    @model_validator(mode="after")
    def _one_config(self) -> "ModelSource":
        if self.config is not None and self.configJSON is not None:
            raise ValueError("config and configJSON both given: give the model's config.json once, as a path "
                             "(config) or inline (configJSON)")
        return self

    @field_validator("path")
    @classmethod
    def _path_in_volume(cls, v: str | None, info: ValidationInfo) -> str | None:
        """The served path lies inside the mounted model volume (mounted at its parent directory). A layout rule of
        the documents we render: a command line the engine runs as it is (check-args, check-pd: validation context
        ``{"engine_argv": True}``) keeps its own path, which the engine accepts wherever it is."""
        if v is None:
            return v
        import posixpath

        if not v.startswith("/"):
            raise ValueError("not an absolute path: a hub id (org/name) is spec.model.source, and spec.model.path "
                             "is where the weights are inside the container, e.g. /models/Kimi-K3")
        if (info.context or {}).get("engine_argv"):
            return v
        if posixpath.normpath(v) != v.rstrip("/") or v.startswith("//"):
            raise ValueError("not a normalised path (no '.', '..' or '//'): write it as e.g. /models/Kimi-K3")
        if posixpath.dirname(v.rstrip("/")) == "/":
            raise ValueError("the model volume is mounted at the path's parent directory, and / cannot be a "
                             "mount point: put the weights one directory down, e.g. /models" + v.rstrip("/"))
        return v


class Speculative(_Strict):
    method: str = Field(default="none", max_length=128, description=(
        "none (no speculative decoding), or a method the engine release accepts: dspark, mtp, eagle3 and ngram are "
        "written for every engine (SGLang: DSPARK, NEXTN, EAGLE3, NGRAM); any other name is passed to the engine as "
        "given (vLLM SpeculativeConfig.method, e.g. suffix, eagle, draft_model; SGLang --speculative-algorithm, e.g. "
        "EAGLE) and checked against the release's own list by rule spec-method-unsupported."))
    draftModel: str | None = Field(default=None, description="Draft model as the engine should see it (vLLM config name or path).")
    numTokens: int | None = Field(default=None, ge=1, le=64, description="vLLM num_speculative_tokens / SGLang DSPARK block size.")
    draftSampleMethod: Literal["greedy", "probabilistic"] | None = None
    rejectionSampleMethod: Literal["standard", "synthetic", "block", "fly"] | None = None
    attentionBackend: str | None = Field(default=None, description="Draft attention backend (vLLM speculative config).")
    draftTensorParallelSize: int | None = Field(default=None, ge=1)
    extraConfig: dict[str, Any] = Field(default_factory=dict, description="Further --speculative-config keys (vLLM), checked.")


class Eplb(_Strict):
    """Expert-parallel load balancing (vLLM ``--enable-eplb`` + ``--eplb-config``; config/parallel.py
    ``EPLBConfig``). Unset fields keep the engine's defaults (window 1000, step interval 3000 at 0.33.0, which
    are also the figures of the DeepSeek-V4.1-Flash rack write-up, docs/sources.md#dsv41-flash-layout)."""
    enabled: bool | None = Field(default=None, description=(
        "false: configured but off (--eplb-config without --enable-eplb); unset or true: --enable-eplb."))
    windowSize: int | None = Field(default=None, description=(
        "eplb_config.window_size: steps of load history (bound per release: rule vllm-config-bounds; 0.11.0 has none)."))
    stepInterval: int | None = Field(default=None, description=(
        "eplb_config.step_interval: steps between rebalances (bound per release: rule vllm-config-bounds)."))
    numRedundantExperts: int | None = Field(default=None, ge=0, le=1024, description="eplb_config.num_redundant_experts.")
    logBalancedness: bool | None = Field(default=None, description="eplb_config.log_balancedness.")
    useAsync: bool | None = Field(default=None, description="eplb_config.use_async: rebalance off the critical path.")
    communicator: str | None = Field(default=None, description=(
        "eplb_config.communicator (choices per version: the engine's dump); async EPLB refuses torch_nccl/pynccl."))
    includeDraft: bool | None = Field(default=None, description=(
        "Balance the speculative draft's experts too (the DeepSeek-V4.1-Flash rack layout: EPLB covers the DSpark draft)."))
    extraConfig: dict[str, Any] = Field(default_factory=dict, description=(
        "Further --eplb-config keys no field above models (e.g. policy, log_balancedness_interval from 0.28.0, "
        "enable_migration_batching from 0.33.0: config/parallel.py EPLBConfig), passed through as given; the "
        "release's parser checks them (rule vllm-eplb-config-refused)."))


class Parallel(_Strict):
    tp: int | None = Field(default=None, ge=1, le=64, description="Tensor parallel size.")
    pp: int | None = Field(default=None, ge=1, le=64)
    dp: int | None = Field(default=None, ge=1, le=1024, description=(
        "Data parallel size: all DP ranks of one engine instance (across its pods)."))
    dpLocal: int | None = Field(default=None, ge=0, le=64, description=(
        "DP ranks per pod (vLLM --data-parallel-size-local); DP = pods per instance x dpLocal. 0: a node that runs "
        "the API server only, no engine (vllm config/parallel.py:158@0.34.0 Field(ge=0))."))
    dpBackend: Literal["mp", "ray"] | None = Field(default=None, description="vLLM --data-parallel-backend.")
    dcp: int | None = Field(default=None, ge=1, le=64, description="Decode context parallel size (shards KV across TP ranks).")
    ep: int | None = Field(default=None, ge=1, le=1024, description="SGLang --ep-size.")
    expertParallel: bool | None = Field(default=None, description="vLLM --enable-expert-parallel.")
    dcpCommBackend: Literal["ag_rs", "a2a", "fi_a2a"] | None = None
    eplb: Eplb | None = Field(default=None, description="Expert-parallel load balancing (needs expert parallelism).")


class Memory(_Strict):
    fraction: float | None = Field(default=None, ge=0, description=(
        "vLLM --gpu-memory-utilization / SGLang --mem-fraction-static: a share of GPU memory, >= 0. The engines' own "
        "bounds are per release: vLLM from 0.28.0 refuses outside (0, 1] at config time (rule vllm-config-bounds; "
        "vllm config/cache.py:215 @0.33.0 Field(gt=0, le=1)), 0.11.0 declares none (config/cache.py:43 @0.11.0); "
        "SGLang accepts above 1 and fails at KV-pool sizing (rule sglang-mem-fraction-above-one)."))
    kvCacheBytes: int | None = Field(default=None, ge=1, description="vLLM --kv-cache-memory-bytes (per GPU); ignores fraction.")
    kvCacheDtype: str | None = None
    mambaFullMemoryRatio: float | None = Field(default=None, gt=0, description=(
        "SGLang --mamba-full-memory-ratio, > 0: the Mamba budget is rest x r/(1+r) "
        "(sglang mem_cache/kv_cache_configurator.py:3229-3409 @0.5.23)."))
    mambaSsmDtype: str | None = None


class Scheduling(_Strict):
    maxModelLen: int | None = Field(default=None, description=(
        "vLLM --max-model-len / SGLang --context-length. The bounds are the engines', per release: vLLM from 0.28.0 "
        "refuses below 1 when its config is built (rule vllm-config-bounds; 0.11.0 declares none), SGLang accepts any "
        "integer there and its TP worker refuses below 2 at start-up (rule sglang-context-length-below-two)."))
    maxNumSeqs: int | None = Field(default=None, description=(
        "vLLM --max-num-seqs / SGLang --max-running-requests; below 1 is refused per release by rule "
        "vllm-config-bounds (vllm config/scheduler.py:62 @0.33.0 Field(ge=1); 0.11.0 has no bound, "
        "config/scheduler.py:38 @0.11.0 SkipValidation: it accepts 0 and negatives; SGLang 0.5.23 accepts any "
        "integer when it builds its config)."))
    maxNumBatchedTokens: int | None = Field(default=None, ge=-1, description="vLLM --max-num-batched-tokens / SGLang --chunked-prefill-size (-1: SGLang without chunking).")
    maxPrefillTokens: int | None = Field(default=None, ge=1, description="SGLang --max-prefill-tokens.")
    chunkedPrefill: bool | None = None
    longPrefillTokenThreshold: int | None = Field(default=None, ge=0)
    prefixCaching: bool | None = None


class Parsers(_Strict):
    toolCall: str | None = None
    reasoning: str | None = None
    autoToolChoice: bool | None = None


class Hardware(_Strict):
    gpuType: str = "b300"
    gpuCount: int = Field(default=8, ge=1, le=64)


class Serving(_Strict):
    host: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    networkPolicy: bool = Field(default=False, description=(
        "Kubernetes: also create a NetworkPolicy that admits ingress only on the engine port. Off by "
        "default: ingress policy is usually the platform's (namespace default-deny plus allow rules)."))


class VllmOptions(_Strict):
    moeBackend: str | None = None
    attentionBackend: str | None = None
    attentionConfig: dict[str, Any] | None = None
    additionalConfig: dict[str, Any] | None = Field(default=None, description=(
        "vLLM --additional-config (JSON), e.g. {decode_backend: latency_specialized} for the Kimi-K3 "
        "specialized decode."))
    flashinferAutotune: bool | None = None
    enforceEager: bool | None = None


class SglangOptions(_Strict):
    customAllReduce: bool | None = Field(default=None, description="false emits --disable-custom-all-reduce.")
    symmMem: bool | None = None
    linearReplayssmSpec: bool | None = None
    decodeAttentionBackend: str | None = None
    prefillAttentionBackend: str | None = None
    attnDpSize: int | None = Field(default=None, ge=1, le=1024, description=(
        "SGLang --attn-dp-size: data-parallel attention groups inside the TP group (DP attention; the FFN/MoE "
        "stays TP/EP). Must divide parallel.tp; not with parallel.dp > 1 (arg_groups/parallel_hook.py@0.5.23)."))
    moeA2aBackend: str | None = Field(default=None, description=(
        "SGLang --moe-a2a-backend (none, deepep, megamoe, mori, ...; choices per release: the parser dump)."))
    deepepMode: Literal["auto", "normal", "low_latency"] | None = Field(default=None, description=(
        "SGLang --deepep-mode (with moeA2aBackend deepep)."))
    enableDpLmHead: bool | None = Field(default=None, description=(
        "SGLang --enable-dp-lm-head: vocabulary-parallel LM head inside the attention TP group (DSpark with DP "
        "attention needs it)."))


class SecretEnv(_Strict):
    name: str = Field(pattern=ENV_NAME)
    secretName: str = Field(pattern=DNS_LABEL)
    # a Secret's data key (k8s.io/apimachinery pkg/util/validation/validation.go IsConfigMapKey: at most 253 of
    # -._a-zA-Z0-9, not "." or "..", not starting with "..")
    key: str = Field(pattern=r"^[-._a-zA-Z0-9]+$", max_length=253, description="Key in the Secret's data.")

    @field_validator("key")
    @classmethod
    def _key_not_dots(cls, v: str) -> str:
        if v in (".", "..") or v.startswith(".."):
            raise ValueError("a Secret key must not be '.' or '..' nor start with '..' (IsConfigMapKey)")
        return v


class VolumeSource(_Strict):
    kind: Literal["pvc", "hostPath", "emptyDir"] = "pvc"
    source: str | None = Field(default=None, min_length=1, max_length=4096, description="PVC claim name or host path.")
    sizeGiB: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _source_fits_kind(self) -> "VolumeSource":
        import re

        if self.source is None:
            return self
        if self.kind == "pvc" and not (len(self.source) <= 253 and re.fullmatch(DNS_SUBDOMAIN[1:-1], self.source)):
            raise ValueError(f"source {self.source!r} is not a valid claim name (lower-case letters, digits, '-', '.')")
        if self.kind == "hostPath" and not self.source.startswith("/"):
            raise ValueError(f"source {self.source!r} must be an absolute host path")
        if self.kind == "emptyDir":
            raise ValueError("an emptyDir has no source: remove it")
        return self


# Defaults are built with model_construct (no validation: pydantic does not validate defaults either), so a
# default never forces its class's own lazy schema build; factories are module-level functions.
def _default_model_volume() -> "VolumeSource":
    return VolumeSource.model_construct(kind="pvc", source="kimi-k3-models")


def _default_cache_volume() -> "VolumeSource":
    return VolumeSource.model_construct(kind="pvc", source="kimi-k3-compile-cache")


class Storage(_Strict):
    model: VolumeSource = Field(default_factory=_default_model_volume)
    cache: VolumeSource = Field(default_factory=_default_cache_volume)
    cachePath: str = Field(default="/cache", description="Mount point of the persistent JIT/compile cache.")
    shmSizeGiB: int = Field(default=64, ge=1)


class Warmup(_Strict):
    """Requests sent after Ready (``run``, the operator) before the deployment counts as warm: runtime JIT
    and first-request allocations happen on them, not on users' requests (docs/sources.md#jit-after-ready)."""
    requests: int = Field(default=4, ge=1, le=1000, description="Warm-up requests (streamed, like `probe`).")
    inputLen: int = Field(default=256, ge=1, le=2_000_000, description="Prompt tokens per warm-up request.")
    outputLen: int = Field(default=32, ge=1, le=1_000_000, description="Completion tokens per warm-up request.")
    concurrency: int | None = Field(default=None, ge=1, le=4096, description="In flight at once; default: all.")


class Startup(_Strict):
    storageBandwidthGiBps: float = Field(default=1.5, gt=0, description="Assumed weight read bandwidth per node.")
    budgetSeconds: int | None = Field(default=None, ge=60, le=7 * 86400,
                                      description="Override the derived cold-start budget (at most 7 days).")
    warmup: Warmup | None = Field(default=None, description="Send warm-up requests after Ready (off when unset).")


class Toleration(_Strict):
    """A Kubernetes toleration (core/v1 Toleration): an empty key with Exists tolerates every taint, an empty
    effect every effect."""
    key: Annotated[str, StringConstraints(pattern=rf"^$|{LABEL_KEY}", max_length=317)] | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: LabelValue | None = None
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    tolerationSeconds: int | None = None


class RackPlacement(_Strict):
    """Where a topology's groups go inside NVLink domains (docs/design/004-rack-scale.md, "Placement")."""
    policy: Literal["colocate", "exclusive", "none"] | None = Field(default=None, description=(
        "colocate: every pod of the deployment in one NVLink domain (pod affinity on the domain label); exclusive: "
        "each LWS group a domain of its own (LWS exclusive-topology: it also repels other roles' groups); none: "
        "nothing. Default: colocate where a ComputeDomain is rendered, else none."))
    racks: int = Field(default=1, ge=1, le=1024, description="NVLink domains (racks) the deployment may use.")
    topologyKey: LabelKey | None = Field(default=None, description=(
        "Node label naming the NVLink domain; default: the hardware catalog's (GB300: nvidia.com/gpu.clique)."))


class Placement(_Strict):
    nodeSelector: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=_empty_list)
    nvlink: Literal["computeDomain", "none"] | None = Field(default=None, description=(
        "Multi-node NVLink: computeDomain renders one NVIDIA DRA ComputeDomain for the deployment and claims its "
        "channel in every pod; none opts out (a warning: wide EP and NIXL then use the NIC). Default: "
        "computeDomain where the GPU type has an NVLink domain and the pods span nodes. Deployment-wide."))
    rack: RackPlacement | None = Field(default=None, description="Placement in NVLink domains (racks).")


class Role(_Strict):
    """One role of a topology: a set of identical engine instances (a LeaderWorkerSet on Kubernetes).

    The role's sections override the document's shared ones field by field (a field left unset inherits);
    engine, model, speculative config and KV dtype are shared by every role and cannot be overridden (the NIXL
    handshake hashes them, so prefill and decode must agree)."""
    name: str = Field(pattern=DNS_LABEL, max_length=20, description=(
        "Role name, unique in the document; object names are <metadata.name>-<role name>."))
    role: Literal["prefill", "decode", "serve"] = Field(description=(
        "prefill or decode (P/D disaggregation; needs spec.disaggregation), or serve (aggregated)."))
    instances: int = Field(default=1, ge=1, le=1024, description="Independent engine instances (LWS replicas).")
    podsPerInstance: int = Field(default=1, ge=1, le=256, description="Pods of one instance (LWS size): one DP/EP group.")
    gpusPerPod: int = Field(ge=1, le=64, description="GPUs per pod (one node or tray); = dpLocal x TP x PP.")
    parallel: Parallel = Field(default_factory=Parallel.model_construct)
    loadBalancing: Literal["internal", "hybrid", "external"] = Field(default="internal", description=(
        "internal: the leader's API server balances all DP ranks, workers run headless; hybrid: every pod "
        "serves its local ranks (--data-parallel-hybrid-lb); external: every DP rank is its own endpoint."))
    apiServerCount: int | None = Field(default=None, ge=1, le=64, description="vLLM --api-server-count on the leader.")
    memory: Memory | None = None
    scheduling: Scheduling | None = Field(default=None, description="maxNumSeqs is per DP rank (vLLM data_parallel_deployment.md).")
    vllm: VllmOptions | None = None
    sglang: SglangOptions | None = None
    env: dict[str, str] = Field(default_factory=dict)
    extraArgs: list[str] = Field(default_factory=_empty_list)
    placement: Placement | None = None

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_env_names(v)


class Disaggregation(_Strict):
    """Prefill/decode KV transfer, shared by the prefill and decode roles: vLLM ``--kv-transfer-config``
    (connector, loadFailurePolicy, sideChannelPort, enforceHandshakeCompat, extraConfig); SGLang
    ``--disaggregation-*`` (transferBackend, bootstrapPort, ibDevice; docs/design/007-sglang-topologies.md)."""
    connector: Literal["NixlConnector", "NixlPushConnector"] = Field(default="NixlConnector", description=(
        "kv_connector: NixlConnector (decode pulls) or NixlPushConnector (prefill pushes, as in the DeepSeek-V4.1-Flash rack layout)."))
    loadFailurePolicy: Literal["recompute", "fail"] | None = Field(default=None, description="kv_load_failure_policy.")
    sideChannelPort: int = Field(default=5600, ge=1024, le=65535, description=(
        "VLLM_NIXL_SIDE_CHANNEL_PORT: the base port; each DP rank listens on base + its global DP rank."))
    enforceHandshakeCompat: bool | None = Field(default=None, description=(
        "kv_connector_extra_config.enforce_handshake_compat; false disables the engine's own P/D check."))
    extraConfig: dict[str, Any] = Field(default_factory=dict, description="Further kv_connector_extra_config keys.")
    transferBackend: Literal["nixl", "mooncake"] | None = Field(default=None, description=(
        "SGLang --disaggregation-transfer-backend (unset: the release's default, mooncake; "
        "arg_groups/fields/disagg.py:65-71@0.5.23)."))
    bootstrapPort: int | None = Field(default=None, ge=1024, le=65535, description=(
        "SGLang --disaggregation-bootstrap-port: the prefill's bootstrap server (unset: the release's default, 8998)."))
    ibDevice: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:,-]+$", description=(
        "SGLang --disaggregation-ib-device: the RDMA devices for KV transfer (e.g. mlx5_0,mlx5_1)."))


class Rdma(_Strict):
    resource: LabelKey = Field(description=(
        "Extended resource of the RDMA device plugin (the cluster's name, e.g. rdma/rdma_shared_device_a)."))
    count: int = Field(default=1, ge=1, le=64, description="Of that resource per engine pod (requests = limits).")


class Ucx(_Strict):
    transports: str | None = Field(default=None, pattern=r"^[a-z0-9_,^:]+$", description="UCX_TLS (NIXL's UCX backend).")
    netDevices: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:,-]+$", description="UCX_NET_DEVICES.")


class Network(_Strict):
    """The network that carries KV (NIXL/UCX) and expert all-to-all between pods (docs/design/004-rack-scale.md)."""
    rdma: Rdma | None = Field(default=None, description="RDMA NICs per engine pod.")
    ucx: Ucx | None = Field(default=None, description="UCX transport selection for NIXL.")


class Routing(_Strict):
    """What fronts a topology (docs/design/004-rack-scale.md, "Routing")."""
    target: Literal["vllm-router", "inferencePool"] | None = Field(default=None, description=(
        "vllm-router: the vLLM project's router (default with P/D); inferencePool: a Gateway API Inference "
        "Extension InferencePool and its endpoint picker (no P/D in v1.6.0). Default without P/D: a Service."))
    prefillPolicy: Literal["cache_aware", "power_of_two", "round_robin", "random", "consistent_hash"] = Field(
        default="cache_aware", description="vllm-router --prefill-policy (per prefill instance).")
    decodePolicy: Literal["cache_aware", "power_of_two", "round_robin", "random", "consistent_hash"] | None = Field(
        default=None, description=(
            "vllm-router --decode-policy (per decode instance). Left out: power_of_two with 2 or more decode "
            "instances, else round_robin (the routers refuse power_of_two with one worker of a kind)."))

    def decode_policy_for(self, decode_instances: int) -> str:
        """The decode policy in effect: the one given, else power_of_two where there are two instances to choose
        from and round_robin for one (vllm-router and sglang-router refuse power_of_two with one decode worker)."""
        if self.decodePolicy is not None:
            return self.decodePolicy
        return "power_of_two" if decode_instances >= 2 else "round_robin"


def _check_env_names(v: dict[str, str]) -> dict[str, str]:
    import re

    for k in v:
        if not re.fullmatch(ENV_NAME[1:-1], k):
            raise ValueError(f"env name {k!r} is not a valid environment variable name")
    return v


class DeploymentSpec(_Strict):
    engine: EngineRef
    model: ModelSource = Field(default_factory=ModelSource.model_construct)
    speculative: Speculative = Field(default_factory=Speculative.model_construct)
    parallel: Parallel = Field(default_factory=Parallel.model_construct)
    memory: Memory = Field(default_factory=Memory.model_construct)
    scheduling: Scheduling = Field(default_factory=Scheduling.model_construct)
    parsers: Parsers = Field(default_factory=Parsers.model_construct)
    hardware: Hardware = Field(default_factory=Hardware.model_construct)
    serving: Serving = Field(default_factory=Serving.model_construct)
    vllm: VllmOptions = Field(default_factory=VllmOptions.model_construct)
    sglang: SglangOptions = Field(default_factory=SglangOptions.model_construct)
    env: dict[str, str] = Field(default_factory=dict)
    secretEnv: list[SecretEnv] = Field(default_factory=_empty_list)
    extraArgs: list[str] = Field(default_factory=_empty_list, description="Further engine flags, checked against the catalog.")
    storage: Storage = Field(default_factory=Storage.model_construct)
    startup: Startup = Field(default_factory=Startup.model_construct)
    placement: Placement = Field(default_factory=Placement.model_construct)
    roles: list[Role] = Field(default_factory=_empty_list, max_length=8, json_schema_extra={
        # a list map keyed by name: the API server refuses two roles of one name, and apply merges roles by name
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}, description=(
        "Topology: prefill/decode or serve roles, each its own set of instances. Empty: one serve role on "
        "hardware.gpuCount GPUs (the single-node document)."))
    disaggregation: Disaggregation | None = Field(default=None, description="P/D KV transfer (with prefill and decode roles).")
    network: Network | None = Field(default=None, description="RDMA and UCX for KV transfer and EP (topologies).")
    routing: Routing | None = Field(default=None, description="Router or InferencePool in front of a topology.")

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_env_names(v)

    @field_validator("roles")
    @classmethod
    def _unique_role_names(cls, v: list[Role]) -> list[Role]:
        names = [r.name for r in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"role names must be unique: {', '.join(dup)} appear(s) more than once")
        return v


class Metadata(_Strict):
    name: str = Field(pattern=DNS_LABEL, max_length=53)
    namespace: str | None = Field(default=None, pattern=DNS_LABEL, max_length=63)
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    annotations: dict[AnnotationKey, str] = Field(default_factory=dict)


class DeploymentDocument(_Strict):
    apiVersion: Literal[API_VERSION] = API_VERSION   # type: ignore[valid-type]
    kind: Literal[KIND] = KIND                       # type: ignore[valid-type]
    metadata: Metadata
    spec: DeploymentSpec

    @model_validator(mode="before")
    @classmethod
    def _drop_server_fields(cls, data: Any) -> Any:
        # A resource read back from the API server carries status and server-set metadata: ignore them
        # (and nothing else: a misspelt metadata field is still refused).
        if isinstance(data, dict) and ("status" in data or isinstance(data.get("metadata"), dict)):
            data = dict(data)
            data.pop("status", None)
            md = data.get("metadata")
            if isinstance(md, dict):
                data["metadata"] = {k: v for k, v in md.items() if k not in SERVER_METADATA}
        return data


# ObjectMeta fields the API server sets or other controllers own (metav1.ObjectMeta)
SERVER_METADATA = frozenset({"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                             "deletionGracePeriodSeconds", "managedFields", "ownerReferences", "finalizers",
                             "selfLink", "generateName"})


# --- start-up --------------------------------------------------------------------------------------------------
# Every model above is built lazily (defer_build): a process builds DeploymentDocument's schema on its first
# validation, and only the nested models it actually validates through. Nothing built is kept across processes:
# pydantic has no public way to store a compiled validator.
