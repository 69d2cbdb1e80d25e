"""Where a command's model architecture comes from (core.model_config.ModelArch): the CLI edge that reads files.

One order everywhere a model can be named (docs/design/011-model-config.md):
1. ``--model-config FILE`` (the command line), noted on stderr when it overrides the document's own;
2. the document's ``spec.model.configJSON`` (inline; the form a K3Deployment resource and a preset carry);
3. the document's ``spec.model.config`` (a path on this machine: a config.json or a directory holding one);
4. ``config.json`` in ``spec.model.path`` when that is a local directory (as before);
5. none: the catalog entry of ``spec.model.name``.
A path named at 1 or 3 that cannot be read or is not a usable config.json is unusable input (exit 2) naming where it
was given and the way out.
"""
from __future__ import annotations

import os
from typing import Any

import click

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.errors import InputError

FIELD = "spec.model.config"
# a config.json can be far larger than a deployment document (cli/common.py MAX_INPUT_BYTES, 1 MiB): ModelOpt
# checkpoints list every excluded module, e.g. nvidia/MiniMax-M3-NVFP4's config.json is 3,087,083 bytes
# (aiconfigurator-core 0.12.0 model_configs/); still bounded, as every input is
MAX_CONFIG_BYTES = 64 * 1024 * 1024


def _read(path: str, what: str) -> str:
    """A config file's text, bounded in size; errors become InputError naming the path."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise InputError(path, f"no such {what}") from None
    except OSError as exc:
        raise InputError(path, f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise InputError(path, f"{what} larger than {MAX_CONFIG_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"{what} is not UTF-8 text (byte {exc.start})") from None


def _hf_quant_path(cfg_path: str) -> str | None:
    """hf_quant_config.json beside a config.json (ModelOpt checkpoints), or <name>_hf_quant_config.json beside
    <name>_config.json (how aiconfigurator-core's model_configs/ name them); None when there is none."""
    beside = os.path.join(os.path.dirname(cfg_path) or ".", "hf_quant_config.json")
    if os.path.isfile(beside):
        return beside
    if os.path.basename(cfg_path).endswith("_config.json"):
        named = cfg_path[: -len("config.json")] + "hf_quant_config.json"
        if os.path.isfile(named):
            return named
    return None


def read_config(path: str, where: str, hint: str):
    """ModelArch of ``path``: a config.json, or a directory holding one (hf_quant_config.json beside it read when
    present). Unusable input raises InputError naming ``where`` with ``hint`` as the way out."""
    import json

    from gpustack_k3.core.model_config import arch_from_config, require_counts

    cfg_path = os.path.join(path, "config.json") if os.path.isdir(path) else path
    if os.path.isdir(path) and not os.path.isfile(cfg_path):
        raise InputError(where, f"{path} is a directory without config.json", hint)
    hq_path = _hf_quant_path(cfg_path)
    try:
        cfg = json.loads(_read(cfg_path, "model config"))
        hq = json.loads(_read(hq_path, "hf_quant_config.json")) if hq_path is not None else None
        arch = arch_from_config(cfg, cfg_path, hq)
        if where == FIELD:       # a document's own config.json: planned from its figures (core/model_config.py)
            require_counts(arch)
    except InputError as exc:
        raise InputError(where, f"{exc.where}: {exc.message}" if exc.where else exc.message, hint) from None
    except (ValueError, RecursionError) as exc:   # JSONDecodeError and ModelConfigError are ValueErrors
        raise InputError(where, f"{cfg_path} is not a usable config.json: {getattr(exc, 'message', exc)}",
                         hint) from None
    if not arch.known:
        raise InputError(where, f"{cfg_path} is not a usable config.json: none of num_hidden_layers / hidden_size "
                                "is given", hint)
    return arch


def arch_for(model_config: str | None, model: Any):
    """The architecture of a command's model in the order above. ``model``: the document's ``spec.model``
    (api.v1alpha1.spec.ModelSource), or a model path (a command line's positional model), or None."""
    from gpustack_k3.core.model_config import document_arch

    path = model if isinstance(model, str) or model is None else getattr(model, "path", None)
    doc_model = None if isinstance(model, str) or model is None else model
    if model_config is not None:
        if doc_model is not None and (doc_model.config is not None or doc_model.configJSON is not None):
            given = "spec.model.config" if doc_model.config is not None else "spec.model.configJSON"
            click.echo(f"note: --model-config {model_config} overrides the document's {given}", err=True)
        return read_config(model_config, "--model-config", "give the model's config.json (a JSON file) or its "
                                                            "directory")
    if doc_model is not None:
        if doc_model.configJSON is not None:
            return document_arch(doc_model)
        if doc_model.config is not None:
            return read_config(doc_model.config, FIELD,
                               "give a readable config.json (or a directory holding one) as spec.model.config, "
                               "--model-config FILE, or remove spec.model.config to use the catalog entry")
    if not path or not os.path.isfile(os.path.join(path, "config.json")):
        return None
    return read_config(path, f"model path {path}", "give the model's Hugging Face config.json")


# ------------------------------------------------------------------ the draft model's config.json

# ------------------------------------------------------------------ the draft model's config.json


def draft_named(r) -> tuple[str, str] | None:
    """(the draft as the line names it, the option that names it) of a resolved line (core.resolve.Resolved), read
    as the release's parser reads it (core/rules/checks.py line_view): vLLM --speculative-config's "model" with
    --spec-model folded in where the release has it (core/rules/vllm_checks_mfixV.py spec_config), SGLang
    --speculative-draft-model-path; None without one."""
    from gpustack_k3.core.rules.checks import line_view

    v = line_view(r)
    if v is None:
        return None
    try:
        if r.engine.engine == ENGINE_SGLANG:
            p = v.value("speculative_draft_model_path") if v.given("speculative_draft_model_path") else None
            return (p, "--speculative-draft-model-path") if isinstance(p, str) and p else None
        from gpustack_k3.core.rules.vllm_checks_mfixV import spec_config

        sc = spec_config(v) or {}
    except (KeyError, AttributeError):
        return None
    p = sc.get("model")
    if not isinstance(p, str) or not p:
        return None
    given_model = v.given("speculative_config") and isinstance(v.value("speculative_config"), dict) \
        and v.value("speculative_config").get("model") is not None
    return p, "--speculative-config model" if given_model else "--spec-model"


def draft_arch_for(r, model_path: str | None = None):
    """The draft checkpoint's architecture (core.model_config.ModelArch, its ``raw`` the config.json as written) of
    a resolved line, read once through the one reader; for Resolved.draft_arch. None when the line names no draft,
    the draft is not a local directory holding config.json, or the draft is the target (``model_path``, default the
    document's spec.model.path). A config.json there that cannot be read or parsed gives a ModelArch with ``raw``
    None whose ``source`` names the path and why: the rules warn with it (never exit 2: the engine, not this tool,
    decides on a bad draft path)."""
    import json

    from gpustack_k3.core.model_config import ModelArch, arch_from_config

    named = draft_named(r)
    if named is None:
        return None
    path, how = named
    target = model_path if model_path is not None else r.spec.model.path
    if target and os.path.normpath(path) == os.path.normpath(target):
        return None
    cfg_path = os.path.join(path, "config.json")
    if not os.path.isdir(path) or not os.path.exists(cfg_path):
        return None
    try:
        cfg = json.loads(_read(cfg_path, "draft model config"))
        if not isinstance(cfg, dict):
            raise ValueError("not a JSON object")
        return arch_from_config(cfg, f"{how} {cfg_path}")
    except InputError as exc:
        return ModelArch(f"{how} {cfg_path}: unreadable: {exc.message}")
    except (ValueError, RecursionError) as exc:   # JSONDecodeError and ModelConfigError are ValueErrors
        return ModelArch(f"{how} {cfg_path}: not a usable config.json: {getattr(exc, 'message', exc)}")
