"""The engine's own verdict on a deployment document (``validate --engine-verdict``): each line the document starts,
judged by its pinned release (verdict.py engine_verdict), and for a vLLM prefill/decode document the pair too
(engine_verdict_pair: both configs and the NIXL handshake comparison).

The lines are the product's own renders (lines.py: a single-engine document's arguments and environment, a topology
document's per-role leader lines). A topology document gpustack-k3 refuses has no role launch: each role's own engine
arguments are judged then, marked ``partial`` (the role's topology flags are missing), and such a line's acceptance
decides nothing (``not_decidable``: launch-refused).
"""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.errors import Refused
from gpustack_k3.oracle.lines import partial_role_lines, role_lines, single_line
from gpustack_k3.oracle.verdict import engine_verdict, engine_verdict_pair


def document_verdict(doc, arch=None) -> dict:
    """The engine's verdict on the document: ``verdict`` refused (the first refusing line, ``role`` naming it) /
    accepted (every line) / not_decidable, with ``lines`` (each role's verdict) and, for a vLLM P/D document,
    ``pair``."""
    engine = doc.spec.engine.name
    if not doc.spec.roles:
        line = single_line(doc, arch=arch)
        v = engine_verdict(engine, line["version"], line["argv"], line["env"], line["gpu_type"], line["gpus"])
        return {**v, "lines": [{"role": "serve", "argv": line["argv"], **_short(v)}]}
    try:
        lines, partial = role_lines(doc, arch=arch), False
    except Refused:
        lines, partial = partial_role_lines(doc, arch=arch), True
    judged = []
    for ln in lines:
        v = engine_verdict(engine, ln["version"], ln["argv"], ln["env"], ln["gpu_type"], ln["gpus"])
        judged.append({"role": ln["role"], "kind": ln["kind"], "argv": ln["argv"], **_short(v),
                       **({"partial": ln["partial"]} if partial else {}), "_full": v})
    out: dict = {}
    kinds = {ln["kind"]: ln for ln in lines}
    if engine == ENGINE_VLLM and not partial and {"prefill", "decode"} <= set(kinds):
        p, d = kinds["prefill"], kinds["decode"]
        pair = engine_verdict_pair(engine, p["version"], {"argv": p["argv"], "env": p["env"], "gpus": p["gpus"]},
                                   {"argv": d["argv"], "env": d["env"], "gpus": d["gpus"]}, hardware=p["gpu_type"],
                                   decode_version=d["version"] if d["version"] != p["version"] else None)
        out["pair"] = _short(pair)
    first = next((j for j in judged if j["verdict"] == "refused"), None)
    if first is not None:
        out.update({**first["_full"], "role": first["role"]})
    elif out.get("pair", {}).get("verdict") == "refused":
        out.update({**pair, "role": "pair"})
    elif partial:
        out.update({"verdict": "not_decidable", "reason": "launch-refused",
                    "release": judged[0]["release"] if judged else None,
                    "detail": "gpustack-k3's rules refuse the document, so no role launch exists; each role's own "
                              "engine arguments were judged and none was refused (the topology flags were not)"})
    else:
        undecided = next((j for j in judged if j["verdict"] != "accepted"), None)
        if undecided is not None:
            out.update({**undecided["_full"], "role": undecided["role"]})
        elif out.get("pair", {}).get("verdict", "accepted") != "accepted":
            out.update({**pair, "role": "pair"})
        else:
            out.update({"verdict": "accepted", "stage": "every role" + (" and the pair" if "pair" in out else ""),
                        "release": judged[0]["release"] if judged else None})
    out["lines"] = [{k: v for k, v in j.items() if k != "_full"} for j in judged]
    return out


def _short(v: dict) -> dict:
    keys = ("verdict", "release", "stage", "type", "message", "where", "reason", "detail", "side")
    return {k: v[k] for k in keys if k in v}
