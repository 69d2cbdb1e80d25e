"""The engine's own verdict on one command line or a prefill/decode pair, beside gpustack-k3's findings (issue 31
item 8): ``engine_verdict``, ``engine_verdict_pair``, ``compare`` and ``text_lines`` (re-exported by the package,
gpustack_k3/oracle/__init__.py, which says what runs and where it lives). One worker per release is started on first
use in this process and kept (judge.py Oracle).
"""
from __future__ import annotations

import atexit
from typing import Iterable

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.catalog import load_catalog
from gpustack_k3.errors import OperationalError
from gpustack_k3.oracle.judge import Oracle, OracleUnavailable
from gpustack_k3.oracle.releases import RELEASES

_WORKERS: dict = {}


class EngineVerdictUnavailable(OperationalError):
    """The machinery or its prepared tools are not on this machine (an environment problem, exit 2 through the CLI's
    one error path): the message says how to get them."""

    where = "--engine-verdict"
    hint = "prepare the engine oracle as the message says, or drop --engine-verdict"


def release_key(engine: str, version: str) -> str | None:
    """The oracle release key of a catalog version (``vllm-0.33.0``), None when no release code exists for it."""
    key = f"{engine}-{version}"
    return key if key in RELEASES else None


def _no_release_code(engine: str, version: str) -> dict:
    v = load_catalog().engines[engine].versions.get(version)
    p = getattr(v, "parser", None)
    nearest = getattr(p, "nearest", None) if p is not None else None
    return {"verdict": "not_decidable", "reason": "no-release-code", "release": None,
            "detail": f"{engine} {version} is an image build with no public code: no release code checked this line"
                      + (f" (the catalog's rules for it are read in its nearest release: {nearest}; "
                         f"--engine-version of that release judges the line with its code)" if nearest else "")}


def _env(env) -> dict:
    if env is None:
        return {}
    if isinstance(env, dict):
        return {str(k): str(v) for k, v in env.items()}
    out = {}
    for item in env:
        k, _, v = str(item).partition("=")
        out[k] = v
    return out


def warm(key: str) -> Oracle:
    """The release's worker in this process, started now if it is not running yet or the one there has exited
    (killed, out of memory): the first call takes the worker's start-up, ~20-70 s; later calls return it. Raises
    EngineVerdictUnavailable, saying how to prepare the release."""
    running = _WORKERS.get(key)
    if running is not None and running.proc.poll() is not None:
        del _WORKERS[key]
    if key not in _WORKERS:
        try:
            _WORKERS[key] = Oracle(key)
        except OracleUnavailable as exc:
            raise EngineVerdictUnavailable(
                f"{exc} (prepare once: `gpustack-k3 oracle setup`; `gpustack-k3 oracle status` says what is ready; "
                "cache $GPUSTACK_K3_CACHE or ~/.cache/gpustack-k3)") from None
    return _WORKERS[key]


def close_all() -> None:
    """Close every worker this process started, all at once (each close waits for the worker's interpreter to tear
    the release's modules down, 2-7 s); a later ``warm`` starts a new one."""
    workers = [_WORKERS.pop(k) for k in list(_WORKERS)]
    for o in workers:
        o.close(wait=False)   # every worker told first: they exit side by side (no thread: this also runs at exit)
    for o in workers:
        o.close()


atexit.register(close_all)   # the workers of this process end with it, closed at once


def engine_verdict(engine: str, version: str, argv: Iterable[str], env=None, hardware: str = "b300",
                   gpus: int | None = None) -> dict:
    """The release's own verdict on one command line: ``accepted`` / ``refused`` (type, message, where: file:line of
    the release's code) / ``not_decidable`` (reason, detail). ``release`` names the code that judged it."""
    key = release_key(engine, version)
    if key is None:
        return _no_release_code(engine, version)
    hw = hardware if hardware and hardware != "cpu" else "b300"
    ans = warm(key).judge_line(list(argv), _env(env), hw, gpus)
    ans.pop("id", None)
    return {**ans, "release": key}


def engine_verdict_pair(engine: str, version: str, prefill: dict, decode: dict, hardware: str = "b300",
                        decode_version: str | None = None) -> dict:
    """A vLLM prefill/decode pair ({"argv", "env", "gpus"} each): both configs and the NIXL handshake comparison.
    Sides on different releases (``decode_version``, a rollout) or SGLang: each side by its own release's start-up
    validation (no pair-level comparison: one worker runs one release)."""
    if decode_version and decode_version != version:
        answers = {"prefill": engine_verdict(engine, version, prefill["argv"], prefill.get("env"), hardware,
                                             prefill.get("gpus")),
                   "decode": engine_verdict(engine, decode_version, decode["argv"], decode.get("env"), hardware,
                                            decode.get("gpus"))}
        return _sides(answers, f"{engine}-{version} / {engine}-{decode_version}")
    key = release_key(engine, version)
    if key is None:
        return _no_release_code(engine, version)
    sides = {s: {"argv": list(d["argv"]), "env": _env(d.get("env")), "gpus": d.get("gpus")}
             for s, d in (("prefill", prefill), ("decode", decode))}
    if engine != ENGINE_VLLM:   # SGLang: each side's own start-up validation (no pair-level comparison in the oracle)
        answers = {s: engine_verdict(engine, version, d["argv"], d["env"], hardware, d["gpus"]) for s, d in sides.items()}
        return _sides(answers, key)
    ans = warm(key).judge_pair(sides["prefill"], sides["decode"], hardware if hardware != "cpu" else "b300")
    ans.pop("id", None)
    return {**ans, "release": key}


def _sides(answers: dict, release: str) -> dict:
    for s in ("prefill", "decode"):
        if answers[s]["verdict"] == "refused":
            return {**answers[s], "side": s}
    undecided = [s for s in answers if answers[s]["verdict"] != "accepted"]
    if undecided:
        return {**answers[undecided[0]], "side": undecided[0]}
    return {"verdict": "accepted", "stage": "each side", "release": release,
            "note": "each side accepted by its own start-up validation; no pair-level check is evaluated"}


def compare(product_refuses: bool, verdict: dict) -> dict:
    """Our verdict beside the engine's: ``agreement`` agree | disagree (``kind``: false-refusal: we refuse what the
    engine accepts; miss: the engine refuses what we pass) | undecided (the engine's verdict is not_decidable), and
    the exit code the engine's verdict asks for (1 when it refuses)."""
    v = verdict.get("verdict")
    if v == "not_decidable":
        return {"agreement": "undecided", "engine_exit": 0}
    engine_refuses = v == "refused"
    out = {"agreement": "agree" if engine_refuses == product_refuses else "disagree",
           "engine_exit": 1 if engine_refuses else 0}
    if out["agreement"] == "disagree":
        out["kind"] = "miss" if engine_refuses else "false-refusal"
    return out


def text_lines(verdict: dict, comparison: dict) -> list[str]:
    """The engine's verdict and the comparison as text lines (check-args/check-pd/validate text output)."""
    who = verdict.get("release") or "no release code"
    v = verdict.get("verdict")
    if v == "refused":
        line = (f"engine verdict ({who}, its own validation code): REFUSED {verdict.get('type', '')}: "
                f"{_headline(verdict.get('message') or '')}" + (f" [{verdict['where']}]" if verdict.get("where") else ""))
    elif v == "accepted":
        line = f"engine verdict ({who}, its own validation code): accepted (stage {verdict.get('stage')})"
    else:
        line = f"engine verdict ({who}): not decidable ({verdict.get('reason')}): {verdict.get('detail', '')}"
    if verdict.get("role"):
        line += f" (role {verdict['role']})"
    out = [line]
    for ln in verdict.get("lines") or []:   # a document's lines (gpustack_k3/oracle/document.py)
        out.append(f"  {ln['role']}: {_one(ln)}" + (" [partial: no topology flags]" if ln.get("partial") else ""))
    if verdict.get("pair"):
        out.append(f"  prefill/decode pair: {_one(verdict['pair'])}")
    if verdict.get("stand_in"):
        out.append("  rests on stand-in files: " + "; ".join(f"{s['model']}: {', '.join(s['files'])}"
                                                              for s in verdict["stand_in"]))
    if comparison.get("agreement") == "disagree":
        out.append(f"  DISAGREEMENT ({comparison['kind']}): "
                   + ("the engine refuses what gpustack-k3 passes" if comparison["kind"] == "miss"
                      else "gpustack-k3 refuses what the engine accepts"))
    return out


def _one(v: dict) -> str:
    """One verdict in a few words (a document's per-role lines)."""
    if v.get("verdict") == "refused":
        return f"REFUSED {v.get('type', '')}: {_headline(v.get('message') or '')}" + (f" [{v['where']}]" if v.get("where") else "")
    if v.get("verdict") == "accepted":
        return "accepted"
    return f"not decidable ({v.get('reason')})"


def _headline(message: str) -> str:
    """The line of the engine's message that says why (pydantic's "N validation error(s) for X" header skipped)."""
    lines = [x.strip() for x in message.strip().splitlines() if x.strip()]
    for x in lines:
        if x.startswith("Value error,"):
            return x.removeprefix("Value error,").split(" [type=")[0].strip()
    return next((x for x in lines if "validation error" not in x), lines[0] if lines else "")
