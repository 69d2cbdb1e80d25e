"""vLLM config-time refusals found by the aimed lines of helper aimV3 (tools/engine_oracle/aimed/aimV3.yaml) that the
engine-check table (gpustack_k3/catalog/data/checks/vllm.yaml) cannot express: --device-ids indices counted against
the CUDA_VISIBLE_DEVICES the line's environment sets (a count of a comma-separated variable), and LoRA with speculative
decoding where --max-num-batched-tokens is below --max-num-seqs x (num_speculative_tokens + 1) (a product of two
options), and --quantization-config targets / hadamard_size values QuantizationConfigArgs refuses (a regular
expression compiled, the release's online shorthand names).

EngineArgs._resolve_device_ids (create_engine_config, 0.28.0 and later) reads --device-ids as integers or UUIDs; with
integer ids and CUDA_VISIBLE_DEVICES set it treats each id as an index into the visible devices and refuses one that
is not below their number. create_engine_config (0.28.0 and later) refuses LoRA with a speculative config whose
verification batch, every sequence's draft tokens plus one, does not fit the token budget. tests/core/test_aimV3_rules.py holds the lines; tests/engine_oracle/test_aimV3_rules_oracle.py
has each release judge them.
"""
from __future__ import annotations

import json
import re

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule

FLAG = "--device-ids"
CVD = "CUDA_VISIBLE_DEVICES"

# _resolve_device_ids: duplicates, then all-UUID (returned unchecked), then mixed, then each integer id against the
# visible devices when CUDA_VISIBLE_DEVICES is non-empty; create_engine_config calls it for ParallelConfig
_SOURCES = {
    "0.28.0": "vllm engine/arg_utils.py:1871,1880-1909,2281@0.28.0",
    "0.29.0": "vllm engine/arg_utils.py:1954,1963-1992,2379@0.29.0",
    "0.33.0": "vllm engine/arg_utils.py:2141,2150-2179,2627@0.33.0",
    "0.34.0": "vllm engine/arg_utils.py:2174,2183-2212,2661@0.34.0",
}


def device_ids(value: object) -> list[int | str] | None:
    """--device-ids as the release's parser type reads it (digits -> int, anything else kept as a string)."""
    if isinstance(value, str):
        return [int(p) if p.isdigit() else p for p in (x.strip() for x in value.split(","))]
    if isinstance(value, (list, tuple)):
        return [v if isinstance(v, int) and not isinstance(v, bool) else str(v) for v in value]
    return None


def out_of_range(ids: list[int | str] | None, cvd: str | None) -> int | None:
    """The first integer id that is no index into ``cvd``'s devices, where the release checks it (no duplicates,
    integer ids only, a non-empty variable); None otherwise."""
    if not ids or not cvd or len(set(ids)) != len(ids) or any(isinstance(i, str) for i in ids):
        return None
    visible = len(cvd.split(","))
    return next((i for i in ids if not 0 <= i < visible), None)


@rule("vllm-device-ids-outside-visible-devices", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--device-ids index beyond the devices CUDA_VISIBLE_DEVICES makes visible",
      why="With CUDA_VISIBLE_DEVICES set, vLLM reads integer --device-ids as indices into the visible devices "
          "(composing the two) and refuses an index that is not below their number.",
      fix="Give --device-ids indices below the number of CUDA_VISIBLE_DEVICES entries, or drop CUDA_VISIBLE_DEVICES "
          "from the environment (the ids are then physical device ids).",
      source=_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _SOURCES.items()},
      no_cel="counts the entries of an environment variable against the values of an option of spec.extraArgs as "
             "the release's parser reads it; left to validate")
def check_vllm_device_ids_outside_visible_devices(r, c):
    v = line_view(r)
    if v is None:
        return
    cvd = v.env.get(CVD)
    bad = out_of_range(device_ids(v.value("device_ids")), cvd)
    if bad is None:
        return
    found = extra_arg(r, FLAG)
    yield (f"spec.extraArgs[{found[0]}]" if found else None), (
        f"--device-ids index {bad} is out of range for {CVD}={cvd} ({len(cvd.split(','))} devices visible); give "
        f"indices below that, or drop {CVD} to give physical ids")


# applies to the releases its sources name (registry.ReleaseRule)
RULES["vllm-device-ids-outside-visible-devices"] = ReleaseRule.of(RULES["vllm-device-ids-outside-visible-devices"])


# (the LoRA config is built only with --enable-lora; the budget and the sequence count as the line gives them: their
# defaults depend on the GPU and the usage context, so the rule judges only lines that give both)
_LORA_SPEC_SOURCES = {
    "0.28.0": "vllm engine/arg_utils.py:2358-2367@0.28.0",
    "0.29.0": "vllm engine/arg_utils.py:2474-2483@0.29.0",
    "0.33.0": "vllm engine/arg_utils.py:2712-2721@0.33.0",
    "0.34.0": "vllm engine/arg_utils.py:2749-2758@0.34.0",
}


def _count(x: object) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, str) and x.strip().isdigit():
        return int(x.strip())
    return None


def spec_tokens(v) -> int | None:
    """num_speculative_tokens as the line gives it (--spec-tokens, 0.34.0, or --speculative-config's field)."""
    k = _count(v.value("spec_tokens"))   # None where the release has no --spec-tokens
    if k is not None:
        return k
    sc = v.value("speculative_config")
    if isinstance(sc, str):
        try:
            sc = json.loads(sc)
        except ValueError:
            return None
    if not isinstance(sc, dict):
        return None
    return _count(sc.get("num_speculative_tokens", sc.get("num-speculative-tokens")))


@rule("vllm-lora-spec-batched-tokens", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="LoRA with speculative decoding: --max-num-batched-tokens below --max-num-seqs x (draft tokens + 1)",
      why="With LoRA and a speculative config vLLM needs room in one step for every sequence's draft tokens plus "
          "the verified one; create_engine_config refuses a token budget below max_num_seqs x "
          "(num_speculative_tokens + 1).",
      fix="Raise --max-num-batched-tokens to at least --max-num-seqs x (num_speculative_tokens + 1), lower "
          "--max-num-seqs, or lower num_speculative_tokens.",
      source=_LORA_SPEC_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _LORA_SPEC_SOURCES.items()},
      no_cel="a product of two options of spec.extraArgs and a JSON option's field as the release's parser reads "
             "them; left to validate")
def check_vllm_lora_spec_batched_tokens(r, c):
    v = line_view(r)
    if v is None or v.value("enable_lora") is not True:
        return
    if not (v.given("max_num_seqs") and v.given("max_num_batched_tokens")):
        return
    seqs, budget, k = _count(v.value("max_num_seqs")), _count(v.value("max_num_batched_tokens")), spec_tokens(v)
    if seqs is None or budget is None or k is None or budget >= seqs * (k + 1):
        return
    found = extra_arg(r, "--enable-lora")   # the budget is a catalog field (scheduling): the finding sits on LoRA
    yield (f"spec.extraArgs[{found[0]}]" if found else None), (
        f"Consider increasing max_num_batched_tokens or decreasing num_speculative_tokens "
        f"(--max-num-batched-tokens {budget} < --max-num-seqs {seqs} x ({k} speculative tokens + 1) with LoRA)")


RULES["vllm-lora-spec-batched-tokens"] = ReleaseRule.of(RULES["vllm-lora-spec-batched-tokens"])


# QuantizationConfigArgs (--quantization-config, built by the parser's type): the targets validator (a before
# validator, run per pattern in order: the target, then a "re:" pattern's regex) and, 0.34.0, QuantSpec's hadamard_size
# validator on the linear/moe specs. The online shorthand names are the releases' _ONLINE_SHORTHANDS keys.
_QUANT_SOURCES = {
    "0.33.0": "vllm config/quantization.py:152-177,195-228@0.33.0",
    "0.34.0": "vllm config/quantization.py:139-144,219-254,272-318@0.34.0",
}
_SHORTHANDS = {
    "0.33.0": frozenset({"fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "mxfp8", "mxfp4",
                         "int8_per_channel_weight_only", "nvfp4_per_token"}),
    "0.34.0": frozenset({"fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "mxfp8", "mxfp4", "mxfp4_hadamard32",
                         "int8_per_channel_weight_only", "nvfp4_per_token", "lut_b_moe"}),
}


def _hadamard(spec: object) -> str | None:
    size = spec.get("hadamard_size") if isinstance(spec, dict) else None
    if isinstance(size, int) and not isinstance(size, bool) and (size <= 0 or size & (size - 1)):
        return f"hadamard_size must be a power of two, got {size}"
    return None


def quantization_config_problem(qc: object, release: str) -> str | None:
    """The first refusal QuantizationConfigArgs gives ``qc`` (the --quantization-config JSON) in ``release`` among the
    validators this rule follows; None where they pass (or the release is not one it knows)."""
    names = _SHORTHANDS.get(release)
    if names is None or not isinstance(qc, dict):
        return None
    if release == "0.34.0":
        for field in ("linear", "moe"):
            found = _hadamard(qc.get(field))
            if found:
                return found
    targets = qc.get("targets")
    if not isinstance(targets, dict):
        return None   # None: no targets; a list: the parser's schema refuses it (argv-refused)
    for pattern, target in targets.items():
        if isinstance(target, str) or release == "0.33.0":
            if not isinstance(target, str) or target not in names:
                return (f"targets[{pattern}] = {target} is not a valid online shorthand name; expected one of "
                        f"{sorted(names)}")
        elif isinstance(target, dict):
            found = _hadamard(target)
            if found:
                return found
        else:
            return (f"targets[{pattern}] must be an online shorthand name or a quantization spec, got "
                    f"{type(target).__name__}")
        if pattern.startswith("re:"):
            try:
                re.compile(pattern[3:])
            except re.error:   # the error's own wording varies with the Python version: not repeated
                return f"targets key {pattern} is not a valid regex"
    return None


@rule("vllm-quantization-config-targets-invalid", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--quantization-config targets (or hadamard_size) the release's QuantizationConfigArgs refuses",
      why="--quantization-config is built into QuantizationConfigArgs when the command line is parsed: each targets "
          "value must be an online shorthand name (0.34.0: or a quantization spec), each 're:' key a valid regular "
          "expression, and (0.34.0) a hadamard_size a power of two.",
      fix="Use one of the release's online shorthand names (the message lists them) for each targets value, a valid "
          "regular expression after 're:', and a power-of-two hadamard_size.",
      source=_QUANT_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _QUANT_SOURCES.items()},
      no_cel="Python regular-expression compilation and the release's online shorthand names applied to a JSON "
             "option of spec.extraArgs; left to validate")
def check_vllm_quantization_config_targets_invalid(r, c):
    v = line_view(r)
    if v is None or not v.given("quantization_config"):
        return
    qc = v.value("quantization_config")
    if isinstance(qc, str):
        try:
            qc = json.loads(qc)
        except ValueError:
            return
    problem = quantization_config_problem(qc, str(getattr(v.version, "key", "") or "").split("@")[0])
    if problem is None:
        return
    found = extra_arg(r, "--quantization-config")
    yield (f"spec.extraArgs[{found[0]}]" if found else None), f"{problem} (--quantization-config)"


RULES["vllm-quantization-config-targets-invalid"] = ReleaseRule.of(RULES["vllm-quantization-config-targets-invalid"])
