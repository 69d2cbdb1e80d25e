"""Engine command lines as deployment documents and topology roles (check-args, check-pd, import).

One reading: every command line goes through the release's parser (:func:`gpustack_k3.core.flags.parse_argv`, the
reader check-args uses); the role's launch facts (DP ranks and LB modes on vLLM; P/D mode, transfer backend,
bootstrap port and multi-node flags on SGLang: the catalog's ``topology`` section) are read from what that parser
resolved, in its canonical spelling. Pure: the CLI passes what touches files or formats errors as callables
(``read_file`` for ``--config FILE``, ``document_of`` for data -> DeploymentDocument, ``model_arch`` for the
model's config.json).
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG
from gpustack_k3.api.v1alpha1.constants import API_VERSION, KIND
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.argv.read import Refusal
from gpustack_k3.core.flags import parse_argv, read_extra
from gpustack_k3.core.model_config import ModelArch
from gpustack_k3.core.resolve import resolve
from gpustack_k3.core.topology import TopoRole, flag_values
from gpustack_k3.errors import InputError

HUB_ID = r"[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)?"
# Integer flags whose value may be a per-pod shell expression ($((LWS_WORKER_INDEX*4))) that argparse would refuse as
# an int: taken out before the parser reads the line (catalog topology keys; vLLM ranks, SGLang's node rank)
PER_POD_INT_FLAGS = ("start_rank_flag", "rank_flag", "node_rank_flag")
# kv_role -> the role kind a single vLLM command line plays (config/kv_transfer.py:14-16@0.33.0)
KIND_OF_KV_ROLE = {"kv_producer": "prefill", "kv_consumer": "decode"}


def _no_file(path: str) -> str:
    raise InputError(f"argv --config {path}", "this command was given no way to read files",
                     "inline the file's options on the command line")


def parse_env(items: Iterable[str], where: str = "--env") -> dict[str, str]:
    """``K=V`` items -> a mapping (unusable input names the item)."""
    out: dict[str, str] = {}
    for item in items:
        k, eq, v = item.partition("=")
        if not eq or not k:
            raise InputError(f"{where} {item!r}", "expected K=V", f"e.g. {where} VLLM_USE_V2_MODEL_RUNNER=1")
        out[k] = v
    return out


def hub_id_is_a_source(model: dict) -> None:
    """``vllm serve moonshotai/Kimi-K3``: the engine downloads a hub id; in a document it is ``model.source``, and the
    served path is where the weights lie inside the mounted volume (``/models/<name>``)."""
    path = model.get("path")
    if isinstance(path, str) and not path.startswith("/") and re.fullmatch(HUB_ID, path) \
            and path.rsplit("/", 1)[-1] not in (".", "..") and "source" not in model:
        model["source"] = path
        model["path"] = f"/models/{path.rsplit('/', 1)[-1]}"


def catalog_model_of(cat, model_path: str | None) -> str | None:
    """The catalog model a command line's model names: its key, hub id or default path, or a path ending in the
    hub id's or default path's last part (case-insensitive); None when no catalog model matches."""
    if not model_path:
        return None
    want = model_path.rstrip("/").lower()
    tail = want.rsplit("/", 1)[-1]
    for key, m in cat.models.items():
        names = {key.lower(), (m.source_id or "").lower(), (m.default_path or "").rstrip("/").lower()}
        tails = {n.rsplit("/", 1)[-1] for n in names if n}
        if want in names or tail in tails:
            return key
    return None


def model_label(model_path: str | None) -> str:
    """spec.model.name for a model the catalog does not know: the last part of its path (for messages only)."""
    return (model_path or "model").rstrip("/").rsplit("/", 1)[-1] or "model"


def flag_for(engine: str, field: str) -> str:
    """`` (--flag)`` of the flag-table field an ``argv: spec.<field>`` error names ("" for none)."""
    prefix = "argv: spec."
    path = field[len(prefix):] if field.startswith(prefix) else ""
    for f in load_catalog().engine(engine).flags:
        if path and (path == f.field or path.startswith(f.field + ".")):
            return f" ({f.flag})"
    return ""


def argv_to_data(engine: str, engine_version: str | None, model_name: str | None, gpu_type: str, gpus: int,
                 env: Iterable[str], name: str, argv: list[str], *,
                 read_file: Callable[[str], str] = _no_file) -> tuple[dict, list]:
    """(document data, what the engine version's parser refuses: core.argv Refusals) for an engine command line."""
    env_map = parse_env(env)
    cat = load_catalog()
    entry = cat.engine(engine)
    version = cat.version(engine, engine_version)
    if version is None:
        raise InputError("--engine-version", f"{engine} has no catalog version {engine_version!r}",
                         f"use one of: {', '.join(entry.versions)}")
    parsed = parse_argv(entry, list(argv), version=version, read_file=read_file)
    spec = parsed.spec
    hub_id_is_a_source(spec.get("model") or {})
    spec["engine"] = {"name": engine, **({"version": engine_version} if engine_version else {})}
    # the model: --model, else the catalog model the line's model names, else (a model the catalog does not know)
    # its path's last part; a line pasted without its model keeps the document's default model
    name_ = model_name or catalog_model_of(cat, parsed.model_path) or (
        model_label(parsed.model_path) if parsed.model_path else None)
    if name_ is not None:
        spec.setdefault("model", {})["name"] = name_
    spec["hardware"] = {"gpuType": gpu_type, "gpuCount": gpus}
    if env_map:
        spec["env"] = env_map
    if parsed.extra_args:
        spec["extraArgs"] = parsed.extra_args
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}, parsed.refusals


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def take_per_pod_ints(engine: str, engine_version: str | None, tokens: list[str]) -> tuple[list[str], set[str]]:
    """The tokens without an integer topology flag whose value is a per-pod shell expression, and which such flags
    (catalog topology keys) there were. The flags are found as the release's parser resolves them
    (:func:`gpustack_k3.core.flags.read_extra`: aliases and abbreviations included)."""
    cat = load_catalog()
    topo = cat.engine(engine).topology
    wanted = {topo[k]: k for k in PER_POD_INT_FLAGS if k in topo}
    if not wanted:
        return tokens, set()
    flags, _ = read_extra(tokens, cat.version(engine, engine_version))
    drop: set[int] = set()
    seen: set[str] = set()
    for f in flags:
        if f.name in wanted and f.value is not None and not _is_int(f.value):
            seen.add(wanted[f.name])
            drop.add(f.index)
            if "=" not in tokens[f.index]:
                drop.add(f.index + 1)
    return [t for i, t in enumerate(tokens) if i not in drop], seen


class _Facts:
    """What a command line's flags outside the flag table say, by catalog topology key."""

    def __init__(self, facts: dict[str, str | None], topo: dict[str, Any]) -> None:
        self.facts, self.topo = facts, topo

    def get(self, key: str) -> str | None:
        return self.facts.get(self.topo[key]) if key in self.topo else None

    def on(self, key: str) -> bool:   # a switch: given bare (or =true); its --no- form is off
        if key not in self.topo or self.topo[key] not in self.facts:
            return False
        v = self.facts[self.topo[key]]
        return v is None or str(v).lower() in ("1", "true", "yes")

    def int(self, key: str) -> int | None:
        v = self.get(key)
        return int(v) if v is not None and _is_int(v) else None


def _sglang_gpus_per_pod(par: dict, sgl: dict, f: _Facts) -> int:
    """GPUs of one pod of an SGLang line: TP x PP (x DP replicas unless DP attention) over --nnodes
    (managers/data_parallel_controller.py:694-703@0.5.23)."""
    attn = (sgl.get("attnDpSize") or 1) > 1 or f.on("deprecated_dp_attention_flag")
    total = par.get("tp", 1) * par.get("pp", 1) * (1 if attn else par.get("dp", 1))
    nnodes = max(f.int("nnodes_flag") or 1, 1)
    return max(1, -(-total // nnodes))


def line_role(label: str | None, kind: str | None, engine: str, engine_version: str | None, model_name: str | None,
              gpu_type: str, tokens: list[str], env: Iterable[str], pods: int | None, gpus_per_pod: int | None,
              gpus: int | None, *, name: str = "argv", document_of: Callable[[dict, str], Any],
              model_arch: Callable[[str | None], Any] = lambda path: None,
              draft_arch: Callable[[Any], Any] = lambda resolved: None,
              read_file: Callable[[str], str] = _no_file):
    """One engine command line -> (its document, its TopoRole, what its engine's parser refuses). ``label``: the
    option it came from (``--prefill``; None for check-args), ``kind``: the role it plays (prefill/decode for
    check-pd; None: from its kv_role (vLLM) or --disaggregation-mode (SGLang), else serve). ``gpus``:
    hardware.gpuCount (None: the ranks of one pod). ``draft_arch``: the edge's reader of the line's draft checkpoint
    (Resolved.draft_arch; cli/common.py draft_arch). Unusable input raises InputError naming ``label``."""
    def named(exc: InputError) -> InputError:
        exc.where = (f"{label} " if label else "") + exc.where + flag_for(engine, exc.where)
        return exc

    rest, per_pod = take_per_pod_ints(engine, engine_version, tokens)
    try:
        data, refusals = argv_to_data(engine, engine_version, model_name, gpu_type, gpus or 8, env, name, rest,
                                      read_file=read_file)
    except InputError as exc:
        raise named(exc) from None
    cat = load_catalog()
    topo = cat.engine(engine).topology
    version = cat.version(engine, engine_version)
    facts = flag_values(list(data["spec"].get("extraArgs", [])), version)
    f = _Facts(facts, topo)
    sglang = engine == ENGINE_SGLANG
    external = f.on("external_lb_flag") or f.get("rank_flag") is not None or "rank_flag" in per_pod
    par = data["spec"].get("parallel", {})
    if gpus is None:
        if sglang:
            per = _sglang_gpus_per_pod(par, data["spec"].get(ENGINE_SGLANG, {}), f)
        else:
            local = 1 if external else (par["dpLocal"] if par.get("dpLocal") is not None else par.get("dp") or 1)
            per = local * par.get("tp", 1) * par.get("pp", 1)
        # dpLocal 0 (an API-server-only node) runs no GPU rank: the pod still counts one GPU (hardware.gpuCount >= 1)
        data["spec"]["hardware"]["gpuCount"] = min(64, gpus_per_pod or max(per, 1))
    try:
        doc = document_of(data, label or "argv")
    except InputError as exc:
        raise named(exc) from None
    if pods is None:   # check-args: one pod of a group whose size the line implies (DP / dpLocal, else --nnodes)
        dp, local = doc.spec.parallel.dp or 1, doc.spec.parallel.dpLocal
        pods = dp // local if local and dp % local == 0 and dp >= local else max(f.int("nnodes_flag") or 1, 1)
    # the model's architecture: --model-config, else config.json in a local model directory; a model the catalog
    # does not know is described by it (or by nothing: flags checked, no memory plan)
    model_path = doc.spec.model.path
    try:
        arch = model_arch(model_path)
    except InputError as exc:
        exc.where = f"{label} {exc.where}" if label else exc.where
        raise
    if arch is None and model_name is None and model_path and catalog_model_of(cat, model_path) is None:
        arch = ModelArch("no config.json (give --model-config FILE)")
    kv = None
    raw_kv = f.get("kv_transfer_flag")
    if raw_kv is not None:
        try:
            kv = json.loads(raw_kv)
        except (ValueError, RecursionError):
            kv = None   # the parser refused it already (argv-refused)
        kv = kv if isinstance(kv, dict) else None
    sgl: dict[str, Any] = {}
    if sglang:
        mode = f.get("disaggregation_mode_flag")
        mode = mode if mode in ("prefill", "decode") else None
        sgl = {"pd_mode": mode, "ib_device": f.get("ib_device_flag")}
        if mode is not None:   # the release's defaults where the line leaves them (sglang.yaml topology)
            sgl["transfer_backend"] = f.get("transfer_backend_flag") or topo["transfer_backend"]
            sgl["bootstrap_port"] = f.int("bootstrap_port_flag") or topo["bootstrap_port"]
    if kind is None:
        kind = sgl.get("pd_mode") or KIND_OF_KV_ROLE.get(str((kv or {}).get("kv_role")), "serve")
    host = doc.spec.env.get(topo.get("side_channel_host_env", ""), "")   # SGLang has no NIXL side channel
    prefix = label.lstrip("-") if label else "spec"
    resolved = resolve(doc, arch=arch)
    resolved.draft_arch = draft_arch(resolved)
    role = TopoRole(
        name=prefix if label else kind, kind=kind, prefix=prefix, instances=1, pods=pods, gpus_per_pod=gpus_per_pod,
        resolved=resolved, dp_local=doc.spec.parallel.dpLocal, hybrid_lb=f.on("hybrid_lb_flag"),
        external_lb=external, headless=f.on("headless_flag"), api_server_count=f.int("api_server_count_flag"),
        nnodes=f.int("nnodes_flag"), start_rank=f.int("start_rank_flag"), kv_transfer=kv, env=dict(doc.spec.env),
        side_channel_host_from_pod="POD_IP" in host or "status.podIP" in host,
        extra_flags=facts, rank_given=f.get("rank_flag") is not None or "rank_flag" in per_pod, **sgl)
    if label:   # refusals name tokens of the command line: say which side they are from
        refusals = [Refusal(f"{label} {ref.where}", ref.flag, ref.message, ref.token) for ref in refusals]
    return doc, role, refusals


def side_role(side: str, engine: str, engine_version: str | None, model_name: str | None, gpu_type: str, text: str,
              env: Iterable[str], pods: int, gpus_per_pod: int | None, **io):
    """One check-pd command line (shell-quoted, as a user pastes it) -> (its document, its TopoRole, its parser's
    refusals); ``io``: :func:`line_role`'s callables."""
    opt = f"--{side}"
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise InputError(opt, f"not a shell-quoted command line: {exc}",
                         f"quote the whole command line: {opt} 'vllm serve ...'") from None
    if not tokens:
        raise InputError(opt, "empty command line", f"give {opt} 'vllm serve MODEL ...'")
    return line_role(opt, side, engine, engine_version, model_name, gpu_type, tokens, env, pods, gpus_per_pod, None,
                     name=side, **io)
