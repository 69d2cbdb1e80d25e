"""The NIXL handshake of a prefill/decode pair, evaluated on the two configs the release built (worker.py).

What runs is the release's own code: ``compute_nixl_compatibility_hash(vllm_config, attn_backend_name,
transfer_mode)`` (``nixl/metadata.py``) on each side, compared as the connector worker compares them at the first
request (``nixl/base_worker.py`` "NIXL compatibility hash mismatch", skipped when the kv_transfer_config says
``enforce_handshake_compat: false``). The transfer mode is the worker class's own ``_TRANSFER_MODE``.

Not evaluated (reported ``not_decidable``, never passed silently): the connector worker's layout checks
(``_validate_remote_agent_handshake``) read the registered KV cache tensors (block layout, regions, Mamba
state groups), which exist only after the KV cache is allocated on GPUs. When the two sides differ in an input
those checks read (DCP size, TP size, block size, prefix caching), the pair is ``not_decidable``
("runtime-layout-check") with the differing inputs listed.
"""
from __future__ import annotations

import importlib
import inspect


def _transfer_mode(connector: str) -> str | None:
    """The release's worker class for a connector name -> its _TRANSFER_MODE."""
    for mod in ("push_worker", "pull_worker", "worker", "base_worker"):
        try:
            m = importlib.import_module(f"vllm.distributed.kv_transfer.kv_connector.v1.nixl.{mod}")
        except ImportError:
            continue
        for _name, cls in inspect.getmembers(m, inspect.isclass):
            if "_TRANSFER_MODE" in cls.__dict__ and cls.__module__ == m.__name__:
                if ("Push" in connector) == ("push" in cls.__dict__["_TRANSFER_MODE"]):
                    return cls.__dict__["_TRANSFER_MODE"]
    return None


def _backend_name(vc) -> str | None:
    """The attention backend the user pinned (None: auto-selected at worker start on the GPU)."""
    ac = getattr(vc, "attention_config", None)
    b = getattr(ac, "backend", None) if ac is not None else None
    if b is None:
        b = getattr(getattr(vc, "model_config", None), "attention_backend", None)
    return getattr(b, "name", None) or (str(b) if b else None)


def _draft_kv_cache(vc) -> bool:
    """Whether the side allocates KV for a draft (its own KV layers, registered with NIXL as regions beside the
    target's): the release's own predicate, ``SpeculativeConfig.uses_draft_kv_cache`` (speculative.py:2172-2177@0.33.0:
    EAGLE-family, a draft model, extract_hidden_states; not ngram or suffix)."""
    sc = vc.speculative_config
    if sc is None:
        return False
    own = getattr(sc, "uses_draft_kv_cache", None)
    return bool(own()) if callable(own) else bool(sc.use_eagle() or sc.method == "draft_model")


def _layout_inputs(vc) -> dict:
    """What the connector worker's layout checks depend on; they read the allocated KV tensors, so a difference here
    is ``runtime-layout-check``. A draft's KV on one side only changes the number of KV regions, and the handshake
    asserts as many remote regions as local ones (nixl/base_worker.py:2953@0.33.0)."""
    pc, cc = vc.parallel_config, vc.cache_config
    return {"decode_context_parallel_size": pc.decode_context_parallel_size,
            "tensor_parallel_size": pc.tensor_parallel_size, "block_size": cc.block_size,
            "enable_prefix_caching": cc.enable_prefix_caching, "draft_kv_cache": _draft_kv_cache(vc)}


def compare(judge, prefill, decode) -> dict:
    """The pair's verdict, with both sides' kv_role as each config resolved it (``kv_roles``): the roles are not in
    the NIXL hash (metadata.py@0.33.0) and the transfer direction follows each request's kv_transfer_params
    (do_remote_prefill / do_remote_decode: nixl/base_scheduler.py:205-210@0.33.0), so a role pair is accepted here
    unless the release's config code refused a side; the roles are reported so a product rule on them is compared
    with what the release did (accepted) rather than passed over."""
    ans = _compare(judge, prefill, decode)
    roles = {}
    for side, (vc, _env) in (("prefill", prefill), ("decode", decode)):
        ktc = vc.kv_transfer_config
        roles[side] = getattr(ktc, "kv_role", None) if ktc is not None else None
    return {**ans, "kv_roles": roles}


def _compare(judge, prefill, decode) -> dict:
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl import metadata

    (pvc, _penv), (dvc, _denv) = prefill, decode
    ktc = {s: vc.kv_transfer_config for s, vc in (("prefill", pvc), ("decode", dvc))}
    if any(k is None for k in ktc.values()):
        side = next(s for s, k in ktc.items() if k is None)
        return {"verdict": "accepted", "stage": "no-kv-transfer", "side": side,
                "note": f"{side} has no kv_transfer_config: no handshake happens"}
    connectors = {s: k.kv_connector for s, k in ktc.items()}
    if not all(c and "Nixl" in c for c in connectors.values()):
        return {"verdict": "not_decidable", "reason": "launch-only",
                "detail": f"connectors {connectors}: only the NIXL handshake is evaluated"}
    modes = {s: _transfer_mode(c) for s, c in connectors.items()}
    backends = {"prefill": _backend_name(pvc), "decode": _backend_name(dvc)}
    if backends["prefill"] != backends["decode"] and None in backends.values():
        return {"verdict": "not_decidable", "reason": "attention-backend-selection",
                "detail": f"attention backends {backends}: the auto-selected one is chosen on the GPU at start"}
    name = backends["prefill"] or "auto"
    hashes = {s: metadata.compute_nixl_compatibility_hash(vc, backends[s] or name, transfer_mode=modes[s])
              for s, vc in (("prefill", pvc), ("decode", dvc))}
    enforce = {s: k.get_from_extra_config("enforce_handshake_compat", True) if hasattr(k, "get_from_extra_config")
               else (k.kv_connector_extra_config or {}).get("enforce_handshake_compat", True)
               for s, k in ktc.items()}
    # Who hands the other its hash: the side that starts a handshake compares the remote's hash with its own, if its
    # own enforce_handshake_compat is on (base_worker.py:1191-1207@0.33.0). Decode always starts one: it reads P's
    # blocks (pull_worker.py:140-156), sends P its push registration (push_worker.py:336-360) and heartbeats
    # (base_worker.py:3517-3531). Prefill starts one when it pushes (push_worker.py:452-490: the P->D handshake).
    checkers = [s for s in ("decode", "prefill") if enforce[s] and (s == "decode" or modes["prefill"] == "push")]
    if hashes["prefill"] != hashes["decode"] and checkers:
        local = checkers[0]
        remote = "prefill" if local == "decode" else "decode"
        return {"verdict": "refused", "stage": "nixl-handshake", "type": "RuntimeError",
                "message": (f"NIXL compatibility hash mismatch. Local: {hashes[local]}, Remote: {hashes[remote]}. "
                            "Prefill and decode instances have incompatible configurations."),
                "where": f"vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py (_nixl_handshake, "
                         f"the {local} side's)",
                "factors_differ": _factor_diff(pvc, dvc)}
    lp, ld = _layout_inputs(pvc), _layout_inputs(dvc)
    differ = {k: (lp[k], ld[k]) for k in lp if lp[k] != ld[k]}
    if differ:
        return {"verdict": "not_decidable", "reason": "runtime-layout-check",
                "detail": (("hashes match" if hashes["prefill"] == hashes["decode"] else
                            "hashes differ, not compared (enforce_handshake_compat false)")
                           + f"; the worker's layout checks read KV tensors; inputs differ: {differ}")}
    return {"verdict": "accepted", "stage": "nixl-handshake", "hash": hashes["decode"][:16]}


def _factor_diff(pvc, dvc) -> list[str]:
    out = []
    for name, get in (("dtype", lambda v: str(v.model_config.dtype)),
                      ("cache_dtype", lambda v: str(v.cache_config.cache_dtype)),
                      ("model", lambda v: v.model_config.model),
                      ("speculative", lambda v: getattr(v.speculative_config, "method", None)),
                      ("hma", lambda v: v.scheduler_config.disable_hybrid_kv_cache_manager)):
        try:
            a, b = get(pvc), get(dvc)
        except Exception:  # noqa: BLE001
            continue
        if a != b:
            out.append(f"{name}: {a} != {b}")
    return out
