"""SGLang config-time refusals that the engine-check table (gpustack_k3/catalog/data/checks/sglang.yaml, read by
gpustack_k3/core/rules/checks.py) cannot express: a string prefix, a product of two options. Each rule reads the
values the release's own parser gives the command line (checks.line_view: spec fields and extraArgs rendered and
read with the release's parser dump, defaults where the line does not give an option), lists the releases whose code
refuses, with each release's own source, and is verified against the release by tests/engine_oracle/
test_checks_sglang_smiss.py (unit lines: tests/core/test_sglang_checks_smiss.py)."""
from __future__ import annotations


from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.core.rules.checks import NO_CEL, line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

# _handle_dspark: cfg.device must start with one of these (the device as given; an unset --device is resolved from
# the machine before, serving_hook.py:648-653@0.5.23: cuda on the NVIDIA GPUs the catalog knows)
DSPARK_DEVICES = {"0.5.23": ("cuda", "npu", "xpu"), "0.5.22": ("cuda", "npu")}
_DSPARK_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/speculative_hook.py:666-672@0.5.23, sglang/srt/speculative/spec_info.py:259-260@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/speculative_hook.py:605-611@0.5.22",
}


@rule("sglang-dspark-device", checked_by="oracle", family="args", severity="error", engines=[ENGINE_SGLANG],
      field="spec.extraArgs",
      title="DSPARK speculative decoding needs a CUDA (or NPU/XPU) --device",
      why="SGLang's DSPARK setup reads --device as given and refuses any device name that does not start with cuda "
          "(or npu, and from 0.5.23 xpu): --device auto or a bare index is not resolved to cuda, only an unset "
          "--device is.",
      fix="Drop --device (SGLang detects cuda) or give --device cuda; or use another --speculative-algorithm.",
      source=_DSPARK_SOURCES["0.5.23"], sources={f"sglang {k}": v for k, v in _DSPARK_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_dspark_device(r, c):
    v = line_view(r)
    if v is None:
        return
    algo, device = v.value("speculative_algorithm"), v.value("device")
    if not isinstance(algo, str) or algo.upper() != "DSPARK" or not isinstance(device, str):
        return
    allowed = DSPARK_DEVICES[r.version.key]
    if not device.startswith(allowed):
        names = " or ".join(a.upper() for a in allowed)
        yield "spec.extraArgs", f"DSpark speculative decoding only supports {names} device (--device {device!r})."


# check_lora_server_args: with overlap loading, max_loaded_loras <= 2 * max_loras_per_batch (an unset
# max_loaded_loras: table entry sglang-lora-overlap-loading-needs-max-loaded-loras)
_LORA_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/lora_hook.py:50,61-70@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/lora_hook.py:36,42-51@0.5.22",
}


@rule("sglang-lora-overlap-loading-max-loaded-loras", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="--enable-lora-overlap-loading: --max-loaded-loras at most twice --max-loras-per-batch",
      why="Overlap loading pins every loaded LoRA adapter in host memory; SGLang bounds the loaded adapters at twice "
          "the adapters of one batch.",
      fix="Lower --max-loaded-loras to at most twice --max-loras-per-batch (default 8), or drop "
          "--enable-lora-overlap-loading.",
      source=_LORA_SOURCES["0.5.23"], sources={f"sglang {k}": v for k, v in _LORA_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_lora_overlap_loading_max_loaded_loras(r, c):
    v = line_view(r)
    if v is None or not v.value("enable_lora") or v.value("enable_lora_overlap_loading") is not True:
        return
    loaded, per_batch = v.value("max_loaded_loras"), v.value("max_loras_per_batch")
    if isinstance(loaded, int) and isinstance(per_batch, int) and loaded > 2 * per_batch:
        yield "spec.extraArgs", ("Enabling LoRA overlap loading requires pinning LoRA adapter weights in CPU memory, "
                                 f"so --max-loaded-loras must be less than or equal to double --max-loras-per-batch: "
                                 f"{2 * per_batch} (got {loaded}).")


# check_server_args: (tp_size * pp_size) % nnodes == 0 unless an elastic-EP scale joiner (pp_size 1: table entry
# sglang-tp-divisible-by-nnodes)
_NODES_SOURCES = {
    "0.5.23": "sglang/srt/arg_groups/validation_hook.py:178-181@0.5.23",
    "0.5.22": "sglang/srt/arg_groups/validation_hook.py:177-180@0.5.22",
}


@rule("sglang-tp-pp-divisible-by-nnodes", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_SGLANG], field="spec.extraArgs",
      title="--tp-size x --pp-size must be divisible by --nnodes",
      why="With pipeline parallelism SGLang spreads the TP x PP ranks evenly over --nnodes nodes.",
      fix="Give --tp-size and --pp-size whose product is a multiple of --nnodes.",
      source=_NODES_SOURCES["0.5.23"], sources={f"sglang {k}": v for k, v in _NODES_SOURCES.items()},
      no_cel=NO_CEL)
def check_sglang_tp_pp_divisible_by_nnodes(r, c):
    v = line_view(r)
    if v is None or v.value("ep_join_mode") == "scale":
        return
    tp, pp, nodes = v.value("tp_size"), v.value("pp_size"), v.value("nnodes")
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (tp, pp, nodes)) or pp == 1 or nodes <= 0:
        return
    if (tp * pp) % nodes:
        yield "spec.extraArgs", (f"tp_size must be divisible by number of nodes (--tp-size {tp} x --pp-size {pp} "
                                 f"over --nnodes {nodes}).")


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("sglang-dspark-device", "sglang-lora-overlap-loading-max-loaded-loras", "sglang-tp-pp-divisible-by-nnodes"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
