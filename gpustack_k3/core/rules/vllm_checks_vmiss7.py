"""vLLM config-time refusals that need the checkpoint's files: --config-format mistral reads the model directory's
params.json (the Mistral-format config) and every release refuses a checkpoint without it. The product reads a
model directory only where it reads its config.json (cli/model_source.py: the model path is a local directory): there
it looks for params.json beside it; where it cannot (a model mounted in the pod, a Hugging Face repo id, a
--model-config FILE standing for the checkpoint) params.json is an unknown term and the rule warns. Each rule lists
the releases whose code refuses, with each release's own source; tests/core/test_vllm_python_rules.py holds their
lines and tests/engine_oracle/test_vllm_python_rules_oracle.py has the releases judge them."""
from __future__ import annotations

import os

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule


def _where(r, flag: str) -> str | None:
    found = extra_arg(r, flag)
    return f"spec.extraArgs[{found[0]}]" if found else None


# ModelConfig.__post_init__ -> get_config(config_format="mistral") -> MistralConfigParser.parse ->
# _download_mistral_config_file: get_hf_file_to_dict returns the model directory's params.json, else tries the Hub.
# 0.11.0 hands the local path to hf_hub_download, whose repo-id validation refuses an absolute path (HFValidationError,
# config.py:687); later releases get None back and refuse "Failed to load mistral 'params.json' config". A relative
# path is a possible Hub repo id (the Hub's params.json could answer): left to the warning.
_PARAMS_JSON_SOURCES = {
    "0.11.0": "vllm transformers_utils/config.py:173,646-689,1034-1043@0.11.0",
    "0.28.0": "vllm transformers_utils/config.py:358,1221-1229@0.28.0",
    "0.29.0": "vllm transformers_utils/config.py:355,1244-1252@0.29.0",
    "0.33.0": "vllm transformers_utils/config.py:482,1556-1564@0.33.0",
    "0.34.0": "vllm transformers_utils/config.py:515,1604-1612@0.34.0, transformers_utils/repo_utils.py:497-522@0.34.0",
}


def mistral_model_dir(r) -> str | None:
    """The model's local directory when the product read its config.json there (cli/model_source.py arch_for, the
    model path's config.json): the one place the product sees the checkpoint's files. None otherwise."""
    path = getattr(r.spec.model, "path", None)
    source = getattr(getattr(r, "arch", None), "source", None)
    if not path or not source or not os.path.isdir(path):
        return None
    return path if os.path.normpath(source) == os.path.normpath(os.path.join(path, "config.json")) else None


def _mistral_format(r) -> bool:
    v = line_view(r)
    return v is not None and v.value("config_format") == "mistral"


@rule("vllm-config-format-mistral-needs-params-json", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--config-format mistral on a local model directory without params.json",
      why="--config-format mistral makes ModelConfig read the checkpoint's Mistral-format params.json instead of its "
          "config.json; a local directory without params.json is refused (0.11.0: its path is handed to the Hub "
          "download, which refuses it as a repo id; later releases: 'Failed to load mistral params.json config').",
      fix="Drop --config-format mistral (auto reads config.json), or point the model path at a Mistral-format "
          "checkpoint that has params.json.",
      source=_PARAMS_JSON_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _PARAMS_JSON_SOURCES.items()},
      no_cel="the files of the model directory on the node; left to validate")
def check_vllm_config_format_mistral_params_json(r, c):
    if not _mistral_format(r):
        return
    d = mistral_model_dir(r)
    if d is None or not os.path.isabs(d) or os.path.isfile(os.path.join(d, "params.json")):
        return
    problem = (f"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '{d}'"
               if r.version is not None and r.version.key == "0.11.0" else
               f"Failed to load mistral 'params.json' config for model {d}")
    yield _where(r, "--config-format"), f"{problem} (--config-format mistral; {d} has config.json but no params.json)"


@rule("vllm-config-format-mistral-params-json-unknown", checked_by="product", family="args", severity="warning",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="--config-format mistral where the checkpoint's params.json cannot be seen",
      why="--config-format mistral makes ModelConfig read the checkpoint's params.json; every release refuses a "
          "checkpoint without it. The model path is not a local directory gpustack-k3 reads (a model mounted in the "
          "pod, a Hub repo id, or a --model-config FILE given for it), so whether params.json exists is unknown.",
      fix="Make sure the checkpoint has params.json (a Mistral-format checkpoint), or drop --config-format mistral; "
          "give the local model directory as the model path to have it checked.",
      source=_PARAMS_JSON_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _PARAMS_JSON_SOURCES.items()})
def check_vllm_config_format_mistral_params_json_unknown(r, c):
    if not _mistral_format(r):
        return
    d = mistral_model_dir(r)
    if d is not None and os.path.isabs(d):
        return     # decided by vllm-config-format-mistral-needs-params-json
    yield _where(r, "--config-format"), (
        f"--config-format mistral needs the checkpoint's params.json; unknown term: params.json of model "
        f"'{r.spec.model.path}' (not a local directory gpustack-k3 reads); the release refuses a checkpoint without it")


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("vllm-config-format-mistral-needs-params-json", "vllm-config-format-mistral-params-json-unknown"):
    RULES[_id] = ReleaseRule.of(RULES[_id])
