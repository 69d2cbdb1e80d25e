"""Tokens committed per verify step from an acceptance length or a per-draft-token acceptance rate.

Assumption (named in the output): draft tokens are accepted independently with the same probability ``a`` until
the first rejection, plus the bonus token: tokens/step = (1 - a^(k+1)) / (1 - a) for k drafts (k+1 at a = 1).
"""
from __future__ import annotations

from gpustack_k3.predict.types import PredictError

ASSUMPTION = ("acceptance: i.i.d. per-draft-token acceptance a until the first rejection, plus the bonus token: "
              "tokens/step = (1 - a^(k+1)) / (1 - a)")


def length_from_rate(rate: float, drafts: int) -> float:
    if drafts == 0:
        return 1.0
    if rate >= 1.0:
        return float(drafts + 1)
    return (1.0 - rate ** (drafts + 1)) / (1.0 - rate)


def rate_from_length(length: float, drafts: int) -> float:
    """The per-token rate that gives ``length`` tokens/step at ``drafts`` drafts (bisection; monotone in a)."""
    if drafts == 0 or length <= 1.0:
        return 0.0
    if length >= drafts + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if length_from_rate(mid, drafts) < length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def tokens_per_step(drafts: int, *, length: float | None = None, rate: float | None = None,
                    at_drafts: int | None = None) -> float:
    """Tokens per step at ``drafts``. ``length`` is an acceptance length measured at ``at_drafts`` drafts (default:
    the same); it is carried to other draft counts through its per-token rate."""
    if drafts == 0:
        return 1.0
    if length is None and rate is None:
        raise PredictError("--acceptance-length", f"{drafts} speculative tokens need an acceptance figure",
                           "give --acceptance-length L (tokens per verify step, from the engine log) or "
                           "--acceptance-rate A (per draft token, 0-1)")
    if rate is not None:
        if not 0.0 <= rate <= 1.0:
            raise PredictError("--acceptance-rate", f"{rate} is not a probability", "give a value in [0, 1]")
        return length_from_rate(rate, drafts)
    k0 = drafts if at_drafts is None else at_drafts
    if not 1.0 <= length <= k0 + 1:   # type: ignore[operator]
        raise PredictError("--acceptance-length", f"{length} is outside [1, drafts+1 = {k0 + 1}]",
                           "the acceptance length counts the bonus token: 1 means no draft accepted")
    if k0 == drafts:
        return float(length)   # type: ignore[arg-type]
    return length_from_rate(rate_from_length(float(length), k0), drafts)   # type: ignore[arg-type]
