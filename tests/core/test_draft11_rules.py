"""Helper draft11: the draft checkpoint's config.json, read once at the CLI edge (cli/model_source.py draft_arch_for,
Resolved.draft_arch), and vllm-spec-draft-without-n-predict, which it decides. The product runs check-args with
core/argv/roles.py line_role setting Resolved.draft_arch through cli/core_cmds.py _argv_io; the engine's
verdicts on the same lines: tests/engine_oracle/test_draft11_oracle.py."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from gpustack_k3.cli.model_source import draft_arch_for
from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.vllm_checks_draft11 import DRAFT_NO_N_PREDICT, VOCAB_DIFFERS
from gpustack_k3.core.rules.vllm_checks_m11v import DRAFT_UNDECIDED
from tests.core.test_m11v_rules import DRAFT_RELEASES, SMOL, SMOL_M, run
from tests.core.test_vllm_checks import product, shape_config
from tools.engine_oracle.product import check_args

DRAFT11_DIRECT = {DRAFT_NO_N_PREDICT, VOCAB_DIFFERS}   # wired in tests/core/test_registry.py and tests/core/test_rules.py


def draft_dir(name: str, **cfg_update) -> str:
    """A copy of the oracle's smollm2 (llama) checkpoint under the temp dir, its config.json updated."""
    src = Path(shape_config("smollm2-135m")).parent
    dst = Path(tempfile.gettempdir()) / "gpustack-k3-draft11" / name
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.name != "config.json":
            shutil.copyfile(f, dst / f.name)
    cfg = json.loads((src / "config.json").read_text())
    cfg.update(cfg_update)
    (dst / "config.json").write_text(json.dumps(cfg, indent=1))
    return str(dst)


def no_n_predict() -> str:
    return draft_dir("smollm2-plain")


def with_n_predict() -> str:
    return draft_dir("smollm2-n-predict", n_predict=2)


@pytest.fixture
def wired():
    """check-args reads the draft at the edge itself: core/argv/roles.py line_role sets Resolved.draft_arch through
    cli/core_cmds.py _argv_io's draft_arch (cli/common.py); nothing to patch, the fixture only names the need."""
    import gpustack_k3.cli.core_cmds as cmds

    assert cmds._argv_io(None)["draft_arch"] is not None


def lines(draft: str) -> list[list[str]]:
    return [SMOL + ["--speculative-config", json.dumps({"model": draft})]]


@pytest.mark.parametrize("release", DRAFT_RELEASES)
def test_a_read_draft_without_n_predict_is_refused(wired, release):
    for line in lines(no_n_predict()):
        got = product(release, line, {}, SMOL_M)
        assert got["verdict"] == "refuse" and DRAFT_NO_N_PREDICT in got["rules"], got
        assert DRAFT_UNDECIDED not in got["rules"], got


@pytest.mark.parametrize("release", DRAFT_RELEASES)
def test_a_read_draft_with_n_predict_is_silent(wired, release):
    got, findings = run(release, lines(with_n_predict())[0], {}, SMOL_M)
    assert not {DRAFT_NO_N_PREDICT, DRAFT_UNDECIDED} & {f["rule"] for f in findings}, (got, findings)


@pytest.mark.parametrize("release", DRAFT_RELEASES)
def test_a_count_given_leaves_the_read_draft_alone(wired, release):
    line = SMOL + ["--speculative-config", json.dumps({"model": no_n_predict(), "num_speculative_tokens": 2})]
    assert DRAFT_NO_N_PREDICT not in product(release, line, {}, SMOL_M)["rules"]


def test_an_unread_draft_keeps_the_warning(wired):
    got, findings = run("0.34.0", SMOL + ["--speculative-config", json.dumps({"model": "org/hub-draft"})], {}, SMOL_M)
    assert got["verdict"] == "pass" and DRAFT_UNDECIDED in {f["rule"] for f in findings}, (got, findings)


def test_an_unreadable_draft_config_is_a_warning_naming_it(wired, tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    line = SMOL + ["--speculative-config", json.dumps({"model": str(tmp_path)})]
    got, findings = run("0.34.0", line, {}, SMOL_M)
    assert got["verdict"] == "pass", got
    warned = [f for f in findings if f["rule"] == DRAFT_UNDECIDED]
    assert warned and str(tmp_path / "config.json") in warned[0]["message"], findings


def test_the_reader_finds_the_draft_where_each_engine_names_it(tmp_path, monkeypatch):
    import gpustack_k3.core.argv.roles as roles

    seen = []
    real = roles.resolve

    def resolve(doc, catalog=None, arch=None):
        r = real(doc, catalog, arch)
        seen.append(draft_arch_for(r))
        return r

    monkeypatch.setattr(roles, "resolve", resolve)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "n_predict": 3}))
    p = str(tmp_path)
    for engine, line in (("vllm", SMOL + ["--speculative-config", json.dumps({"model": p})]),
                         ("vllm", SMOL + ["--spec-model", p]),
                         ("sglang", ["--model-path", "/models/smollm2-hf", "--speculative-algorithm", "EAGLE",
                                     "--speculative-draft-model-path", p])):
        seen.clear()
        check_args(engine, "0.34.0" if engine == "vllm" else "0.5.23",
                   {"argv": line, "env": {}, "model": SMOL_M, "gpu_type": "b300", "gpus": 8})
        d = seen[-1]
        assert d is not None and d.raw["n_predict"] == 3 and d.hidden_size == 64, (engine, line, d)
    for line in (SMOL + ["--spec-model", "org/x"], SMOL + ["-tp", "2"], SMOL + ["--spec-model", p + "/none"],
                 ["/models/smollm2-hf", "--spec-model", "/models/smollm2-hf"]):
        seen.clear()
        check_args("vllm", "0.34.0", {"argv": line, "env": {}, "model": SMOL_M, "gpu_type": "b300", "gpus": 8})
        assert seen and seen[-1] is None, line   # not local, no draft, no config.json there, the target itself


def test_the_rule_is_on_the_releases_it_cites():
    assert {k.split()[1] for k in RULES[DRAFT_NO_N_PREDICT].sources} == set(DRAFT_RELEASES)


# ------------------------------------------------------------------ the DSpark-only options (vllm_checks_lead11.py)

DSPARK_RELEASES = ("0.28.0", "0.29.0")


def dspark_arch_draft() -> str:
    """A draft whose path names no method and whose config.json's architectures make it dspark."""
    return draft_dir("qwen3-ds-arch", architectures=["Qwen3DSparkModel"], model_type="qwen3")


def dspark_lines() -> list[tuple[list[str], str | None]]:
    """(line, the rule that refuses it or None: accepted) -- the engine's verdicts: test_draft11_oracle.py."""
    from gpustack_k3.core.rules.vllm_checks_lead11 import ADAPTIVE, TOPK

    out = []
    for opt, rid in (({"enable_adaptive_verification": True}, ADAPTIVE), ({"dspark_draft_topk": 2}, TOPK)):
        for draft, refused in ((no_n_predict(), rid), (dspark_arch_draft(), None)):
            sc = {"model": draft, "num_speculative_tokens": 2, **opt}
            out.append((SMOL + ["--speculative-config", json.dumps(sc)], refused))
    return out


@pytest.mark.parametrize("release", DSPARK_RELEASES)
def test_the_read_draft_decides_the_dspark_options(wired, release):
    from gpustack_k3.core.rules.vllm_checks_lead11 import UNDECIDED

    for line, refused in dspark_lines():
        got, findings = run(release, line, {}, SMOL_M)
        rules = {f["rule"] for f in findings}
        assert UNDECIDED not in rules, (line, findings)
        if refused is None:
            assert got["verdict"] == "pass", (line, got)
        else:
            assert got["verdict"] == "refuse" and refused in got["rules"], (line, got)


def test_an_unread_draft_keeps_the_dspark_warning():
    from gpustack_k3.core.rules.vllm_checks_lead11 import UNDECIDED

    # a hub name: no local config.json to read, and the name itself names no method
    line = SMOL + ["--speculative-config", json.dumps({"model": "org/plain-draft", "num_speculative_tokens": 2,
                                                       "enable_adaptive_verification": True})]
    got, findings = run("0.28.0", line, {}, SMOL_M)
    assert got["verdict"] == "pass" and UNDECIDED in {f["rule"] for f in findings}, (got, findings)


# ------------------------------------------------------------------ draft vs target vocabulary size

def vocab_lines() -> list[tuple[str, list[str], bool]]:
    """(release, line, refused: True/False, None where the engine's verdict is not this rule's matter: a given mtp)
    -- the engine's verdicts: test_draft11_oracle.py."""
    vocab = json.loads(Path(shape_config("smollm2-135m")).read_text())["vocab_size"]
    more = draft_dir("smollm2-vocab-more", vocab_size=vocab + 64)
    out = []
    for rel in DRAFT_RELEASES:
        out.append((rel, SMOL + ["--speculative-config", json.dumps({"model": more, "num_speculative_tokens": 2,
                                                                      "method": "draft_model"})],
                    True))
        out.append((rel, SMOL + ["--speculative-config", json.dumps({"model": no_n_predict(), "method": "draft_model",
                                                                     "num_speculative_tokens": 2})], False))
        out.append((rel, SMOL + ["--speculative-config", json.dumps({"model": more, "num_speculative_tokens": 2,
                                                                     "method": "mtp"})], None))
        if rel != "0.34.0":
            out.append((rel, SMOL + ["--speculative-config", json.dumps(
                {"model": more, "method": "draft_model", "num_speculative_tokens": 2,
                 "use_heterogeneous_vocab": True})], False))
    return out


def test_a_draft_vocab_other_than_the_targets_is_refused(wired):
    for release, line, refused in vocab_lines():
        got, findings = run(release, line, {}, SMOL_M)
        if refused:
            assert got["verdict"] == "refuse" and VOCAB_DIFFERS in got["rules"], (release, line, got)
        elif refused is None:
            assert VOCAB_DIFFERS not in got["rules"], (release, line, got)
        else:
            assert got["verdict"] == "pass", (release, line, got)


# ------------------------------------------------------------------ SGLang: a Gemma4 assistant draft in another directory

GEMMA4 = "sglang-gemma4-assistant-draft-not-eagle3"
SGLANG_RELEASES = ("0.5.23", "0.5.22")


def gemma4_lines(root: Path) -> list[tuple[list[str], bool]]:
    """(line, refused): a Llama-3.1-8B target and, in another directory, its config relabelled as a Gemma4 assistant
    draft -- the engine's verdicts: test_draft11_oracle.py."""
    from tests.core.test_mfixS_rules import model_dir

    (root / "draft").mkdir(exist_ok=True)
    target = model_dir(root, "meta-llama--Meta-Llama-3.1-8B", {})
    draft = model_dir(root / "draft", "meta-llama--Meta-Llama-3.1-8B", {"architectures": ["Gemma4AssistantForCausalLM"]})
    return [(["--model-path", target, "--tp-size", "8", "--speculative-algorithm", alg,
              "--speculative-draft-model-path", draft], alg == "EAGLE3") for alg in ("EAGLE3", "EAGLE")]


@pytest.mark.parametrize("release", SGLANG_RELEASES)
def test_a_gemma4_assistant_draft_in_another_directory(wired, tmp_path, release):
    for line, refused in gemma4_lines(tmp_path):
        got = check_args("sglang", release, {"argv": line, "env": {}, "model": None, "gpu_type": "b300", "gpus": 8})
        if refused:
            assert got["verdict"] == "refuse" and GEMMA4 in got["rules"], (line, got)
        else:
            assert GEMMA4 not in got["rules"], (line, got)


def test_an_unread_gemma4_draft_gives_no_finding(tmp_path):
    line, _ = gemma4_lines(tmp_path)[0]
    i = line.index("--speculative-draft-model-path")
    line = [*line[:i + 1], "org/gemma4-assistant", *line[i + 2:]]   # a hub name: its config.json is not read here
    got = check_args("sglang", "0.5.23", {"argv": line, "env": {}, "model": None, "gpu_type": "b300", "gpus": 8})
    assert GEMMA4 not in got["rules"], got
