"""SGLang verdicts equal to the release's own (issue 22): each case is a disagreement the engine oracle found between
`check-args` and SGLang 0.5.22/0.5.23's `prepare_server_args` + `resolve_once()` (or the start-up code after it, for
the runtime-only rules), with the release's source line in the rule's `sources`."""
from __future__ import annotations

import json
import zipfile
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from gpustack_k3.cli.main import cli

from .conftest import preset_doc
from .test_sglang_checks_smiss import SMISS_DIRECT
from .test_smiss5_rules import SMISS5_DIRECT

SEED = ("--model-path /models/Kimi-K3 --trust-remote-code --tp-size 8 --mem-fraction-static 0.88 "
        "--kv-cache-dtype fp8_e4m3 --context-length 262144").split()
DSPARK = "--speculative-algorithm DSPARK --speculative-draft-model-path /models/sglang-Kimi-K3-DSpark".split()


def check_args(*argv: str, version: str = "0.5.23"):
    res = CliRunner().invoke(cli, ["check-args", "--engine", "sglang", "--engine-version", version, "--model",
                                   "kimi-k3", "-o", "json", "--", *argv], catch_exceptions=False)
    assert res.exit_code in (0, 1), res.output
    return res.exit_code, {f["rule"]: f for f in json.loads(res.output)["findings"] if f["severity"] == "error"}


def explain(rule_id: str) -> dict:
    res = CliRunner().invoke(cli, ["explain", rule_id, "-o", "json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


# rule -> (fires: (preset, spec patch), quiet: (preset, spec patch)); the format of tests/core/test_rules.py CASES
SGLANG_CASES = {
    "sglang-parallel-fits-node": (("sglang-no-dcp", {"parallel": {"dp": 2}}),
                                  ("sglang-no-dcp", {"parallel": {"dp": 2}, "extraArgs": ["--enable-dp-attention"]})),
    "sglang-dcp-divides-tp": (("sglang-seed", {"parallel": {"dcp": 3}}), ("sglang-seed", {"parallel": {"dcp": 4}})),
    "sglang-kimi-k3-mla-kv-cache-dtype": (("sglang-no-dcp", {"memory": {"kvCacheDtype": "fp8_e5m2"}}),
                                          ("sglang-no-dcp", {"memory": {"kvCacheDtype": "bf16"}})),
    "sglang-dspark-num-draft-tokens": (
        ("sglang-seed", {"speculative": {"numTokens": 7}, "extraArgs": ["--speculative-num-draft-tokens", "4"]}),
        ("sglang-seed", {"speculative": {"numTokens": 7}, "extraArgs": ["--speculative-num-draft-tokens", "8"]})),
    "sglang-eagle-draft-tokens-need-steps": (
        ("sglang-no-dcp", {"speculative": {"method": "none", "draftModel": None, "numTokens": None},
                           "extraArgs": ["--speculative-algorithm", "EAGLE", "--speculative-num-draft-tokens", "4"]}),
        ("sglang-no-dcp", {"speculative": {"method": "none", "draftModel": None, "numTokens": None},
                           "extraArgs": ["--speculative-algorithm", "EAGLE", "--speculative-num-draft-tokens", "4",
                                         "--speculative-num-steps", "3"]})),
    "sglang-eagle-steps-need-topk": (
        ("sglang-no-dcp", {"speculative": {"method": "none", "draftModel": None, "numTokens": None},
                           "extraArgs": ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3"]}),
        ("sglang-no-dcp", {"speculative": {"method": "none", "draftModel": None, "numTokens": None},
                           "extraArgs": ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
                                         "--speculative-eagle-topk", "1"]})),
    "sglang-ngram-dp-attention": (
        ("sglang-no-dcp", {"speculative": {"method": "ngram", "draftModel": None, "numTokens": None},
                           "parallel": {"dp": 2}, "extraArgs": ["--enable-dp-attention"]}),
        ("sglang-no-dcp", {"speculative": {"method": "ngram", "draftModel": None, "numTokens": None},
                           "parallel": {"dp": 2}})),
}


# spec rules whose cases are the direct tests below (no preset document reaches them: the schema bounds
# spec.memory.fraction to 1; the algorithm list is a catalog trait the test sets)
SGLANG_DIRECT = {"sglang-speculative-algorithm-known", "sglang-mem-fraction-above-one", "sglang-dsv4-speculative-algorithm",
                 "sglang-dsv4-kv-cache-dtype"} | SMISS_DIRECT | SMISS5_DIRECT   # core/rules/sglang_checks_smiss{,5}.py: own test modules


DSV4 = "--model-path /models/DeepSeek-V4.1-Flash --trust-remote-code --tp-size 8".split()


def check_dsv4(*argv: str, version: str = "0.5.23") -> set[str]:
    res = CliRunner().invoke(cli, ["check-args", "--engine", "sglang", "--engine-version", version, "--model",
                                   "deepseek-v4.1-flash", "-o", "json", "--", *DSV4, *argv], catch_exceptions=False)
    assert res.exit_code in (0, 1), res.output
    return {f["rule"] for f in json.loads(res.output)["findings"] if f["severity"] == "error"}


def test_deepseek_v4_speculative_algorithms_and_kv_dtypes():
    """deepseek_v4_hook.py:148-158 and overrides.py:891-913@0.5.23 (102-112, 868-889@0.5.22): the release refuses
    NEXTN/EAGLE3/NGRAM, EAGLE without top-k 1, and KV dtypes other than fp8_e4m3/bfloat16 on DeepseekV4ForCausalLM
    (the seed-0 differential's lines); DSPARK, EAGLE with top-k 1 and fp8_e4m3 pass."""
    draft = ["--speculative-draft-model-path", "/models/DeepSeek-V4.1-Flash-DSpark"]
    for version in ("0.5.22", "0.5.23"):
        for algo in ("NEXTN", "EAGLE3", "NGRAM"):
            assert "sglang-dsv4-speculative-algorithm" in check_dsv4("--speculative-algorithm", algo, *draft,
                                                                     version=version)
        assert "sglang-dsv4-speculative-algorithm" in check_dsv4("--speculative-algorithm", "EAGLE", *draft,
                                                                 version=version)
        assert "sglang-dsv4-speculative-algorithm" not in check_dsv4(
            "--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "1", *draft, version=version)
        assert "sglang-dsv4-speculative-algorithm" not in check_dsv4("--speculative-algorithm", "DSPARK", *draft,
                                                                     version=version)
        for dtype in ("bf16", "fp8_e5m2"):
            assert "sglang-dsv4-kv-cache-dtype" in check_dsv4("--kv-cache-dtype", dtype, version=version)
        for dtype in ("fp8_e4m3", "bfloat16", "auto"):
            assert "sglang-dsv4-kv-cache-dtype" not in check_dsv4("--kv-cache-dtype", dtype, version=version)
    # the architecture from the model's config.json: V4.1's name is SGLang's V4 class (configs/deepseek_v41.py:38-39)
    from tools.engine_oracle.product import model_config

    cfg = model_config("deepseek-v4.1-flash")
    res = CliRunner().invoke(cli, ["check-args", "--engine", "sglang", "--model", "deepseek-v4.1-flash", "--model-config",
                                   cfg, "-o", "json", "--", *DSV4, "--kv-cache-dtype", "bf16"], catch_exceptions=False)
    assert "sglang-dsv4-kv-cache-dtype" in {f["rule"] for f in json.loads(res.output)["findings"]}
    # another model with the same flags: not this rule's business
    _, found = check_args("--kv-cache-dtype", "bf16")
    assert "sglang-dsv4-kv-cache-dtype" not in found


def rules_of(preset: str, patch: dict) -> list[str]:
    from gpustack_k3.core.rules import validate

    return [f.rule for f in validate(preset_doc(preset, patch))]


@pytest.mark.parametrize("rule_id", sorted(SGLANG_CASES))
def test_rule_fires_and_stays_quiet(rule_id):
    (fire_preset, fire_patch), (quiet_preset, quiet_patch) = SGLANG_CASES[rule_id]
    assert rule_id in rules_of(fire_preset, fire_patch)
    assert rule_id not in rules_of(quiet_preset, quiet_patch)


def test_parallel_fits_node_is_vllms_and_sglangs_counterpart_is_runtime_only():
    """SGLang's resolve_once checks no device count: `--tp-size 8 --dp-size 2` on 8 GPUs is accepted at config
    time and fails when a DP replica's scheduler selects GPU 8 (managers/data_parallel_controller.py:445-449,747-752
    @0.5.23); with --enable-dp-attention the DP ranks share the TP GPUs (fields/parallel.py:192-193@0.5.23)."""
    code, errs = check_args(*SEED, "--dp-size", "2")
    assert code == 1 and "parallel-fits-node" not in errs
    assert "16 ranks on one pod" in errs["sglang-parallel-fits-node"]["message"]
    assert "sglang-parallel-fits-node" not in check_args(*SEED, "--dp-size", "2", "--enable-dp-attention")[1]
    assert explain("sglang-parallel-fits-node")["runtime_only"]
    assert "sglang" not in explain("parallel-fits-node").get("engines", ["vllm"])


def test_dcp_not_dividing_tp_is_runtime_only_on_sglang():
    """resolve_once accepts --tp-size 8 --dcp-size 3 on CUDA; initialize_model_parallel raises at start-up
    (distributed/parallel_state.py:2665-2669@0.5.23, 2660-2664@0.5.22)."""
    for version in ("0.5.22", "0.5.23"):
        _, errs = check_args(*SEED, "--dcp-size", "3", version=version)
        assert "tp=8 is not divisible by dcp=3" in errs["sglang-dcp-divides-tp"]["message"]
        assert "sglang-dcp-divides-tp" not in check_args(*SEED, "--dcp-size", "4", version=version)[1]
    assert explain("sglang-dcp-divides-tp")["runtime_only"]


def test_kimi_k3_dcp_decode_backend_falls_back_to_attention_backend():
    """attention_backends_of: the decode backend is --decode-attention-backend, else --attention-backend
    (arg_groups/model_override_base.py:138-152@0.5.23); Kimi-K3 DCP asserts it is cutedsl_mla or aiter (0.5.22 also
    tokenspeed_mla): model_overrides/kimi_k3.py:84-112@0.5.23."""
    _, errs = check_args(*SEED, "--dcp-size", "8", "--attention-backend", "flashinfer")
    assert "got 'flashinfer'" in errs["sglang-kimi-k3-dcp-decode-backend"]["message"]
    # without DCP the Kimi-K3 DCP assertion does not apply
    assert "sglang-kimi-k3-dcp-decode-backend" not in check_args(*SEED, "--attention-backend", "flashinfer")[1]
    # the field wins over --attention-backend, as in attention_backends_of
    assert "sglang-kimi-k3-dcp-decode-backend" not in check_args(
        *SEED, "--dcp-size", "8", "--attention-backend", "flashinfer", "--decode-attention-backend", "cutedsl_mla")[1]


def test_dspark_with_dp_attention_needs_dp_lm_head():
    """speculative_hook.py:674-676@0.5.23 (613-615@0.5.22): attn_dp_size > 1 without --enable-dp-lm-head raises."""
    for version in ("0.5.22", "0.5.23"):
        line = (*SEED, *DSPARK, "--dp-size", "2", "--enable-dp-attention")
        # one rule judges it, on a single line as on a role (core/rules/topology_sglang.py)
        assert "sglang-dspark-attn-dp" in check_args(*line, version=version)[1]
        assert "sglang-dspark-attn-dp" not in check_args(*line, "--enable-dp-lm-head", version=version)[1]
        # --dp-size without DP attention: attn_dp_size stays 1
        assert "sglang-dspark-attn-dp" not in check_args(*SEED, *DSPARK, "--dp-size", "2",
                                                                      version=version)[1]


def test_dspark_with_dp_attention_reads_ascend_tp_as_the_tp_moe():
    """moe_hook.py:461-468@0.5.23 (397-405@0.5.22) resolves --moe-a2a-backend ascend_tp to none before DSpark's check
    (speculative_hook.py:677-682@0.5.23): the release accepts the line (held-out differential seed 9091)."""
    line = (*SEED, *DSPARK, "--attn-dp-size", "2", "--enable-dp-lm-head")
    for version in ("0.5.22", "0.5.23"):
        assert "sglang-dspark-attn-dp" not in check_args(*line, "--moe-a2a-backend", "ascend_tp", version=version)[1]
        assert "sglang-dspark-attn-dp" in check_args(*line, "--moe-a2a-backend", "deepep", version=version)[1]


def test_replayssm_spec_is_refused_on_a_prefill_server_only():
    """attention_hook.py:493-498@0.5.23 (492-497@0.5.22)."""
    base = (*SEED, *DSPARK, "--enable-linear-replayssm-spec")
    assert "sglang-replayssm-spec-on-pd-prefill" in check_args(*base, "--disaggregation-mode", "prefill")[1]
    assert "sglang-replayssm-spec-on-pd-prefill" not in check_args(*base, "--disaggregation-mode", "decode")[1]


@pytest.mark.parametrize("extra, kv, refused", [
    ([], "fp8_e5m2", True),                                   # no DCP, no backend: trtllm_mla (kimi_k3.py:122-134)
    ([], "bf16", False),
    ([], "auto", False),
    (["--attention-backend", "triton"], "fp8_e5m2", False),   # a backend given: no trtllm_mla default
    (["--attention-backend", "trtllm_mla"], "fp8_e5m2", True),
    (["--dcp-size", "8"], "fp8_e5m2", True),                  # DCP: cutedsl_mla decode (kimi_k3.py:84-93)
    (["--dcp-size", "8"], "bfloat16", False),                 # CuteDSL accepts bfloat16 (overrides.py:1247-1252)
])
def test_kimi_k3_mla_kv_cache_dtype(extra, kv, refused):
    """overrides.py _mla_kv_cache_dtype_checks / _cutedsl_prefill_backend_fill (1204-1258@0.5.23)."""
    argv = [t for t in SEED if t not in ("--kv-cache-dtype", "fp8_e4m3")] + ["--kv-cache-dtype", kv, *extra]
    assert ("sglang-kimi-k3-mla-kv-cache-dtype" in check_args(*argv)[1]) is refused


def test_eagle_family_draft_tokens_need_steps():
    """speculative_hook.py:1159-1163@0.5.23 (1068-1072@0.5.22): no --speculative-num-steps (not adaptive) asserts
    that neither the top-k nor the draft-token count was given."""
    # --speculative-eagle-topk: the argv reader keeps it in extraArgs (the draft-token count it reads into
    # spec.speculative.numTokens, which a DSPARK block-size flag on the same line also sets: see SGLANG_CASES)
    eagle = ("--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "4")
    assert "sglang-eagle-draft-tokens-need-steps" in check_args(*SEED, *eagle)[1]
    assert "sglang-eagle-draft-tokens-need-steps" not in check_args(*SEED, *eagle, "--speculative-num-steps", "3")[1]
    assert "sglang-eagle-draft-tokens-need-steps" not in check_args(*SEED, *eagle, "--speculative-adaptive")[1]
    # DSPARK is not of the EAGLE family (spec_info.py:255-266@0.5.23)
    assert "sglang-eagle-draft-tokens-need-steps" not in check_args(*SEED, *DSPARK, "--speculative-eagle-topk", "1")[1]


def test_speculative_algorithm_known_reads_the_versions_list():
    """SpeculativeAlgorithm.from_string (speculative/spec_info.py:49-65@0.5.23): the enum names in any case and
    NEXTN; the list is the catalog version's `speculative_algorithms` trait. Without the trait: no verdict."""
    from gpustack_k3.core.resolve import resolve
    from gpustack_k3.core.rules.sglang import check_sglang_speculative_algorithm_known as check

    doc = preset_doc("sglang-no-dcp", {"speculative": {"method": "none", "draftModel": None, "numTokens": None},
                                       "extraArgs": ["--speculative-algorithm", "bogus"]})
    r = resolve(doc)
    traits = dict(r.version.traits)
    try:
        r.version.traits.pop("speculative_algorithms", None)
        assert list(check(r, None)) == []
        r.version.traits["speculative_algorithms"] = ["DSPARK", "EAGLE", "NEXTN"]
        ((_, msg),) = list(check(r, None))
        assert "--speculative-algorithm bogus" in msg
        r.doc.spec.extraArgs[1] = "eagle"
        assert list(check(r, None)) == []
    finally:
        r.version.traits.clear()
        r.version.traits.update(traits)


def test_mem_fraction_above_one_is_runtime_only_on_sglang():
    """kv_pool_runtime.py:75-77@0.5.23: headroom pre_model_load_memory x (1 - mem_fraction_static) turns negative;
    resolve_once accepts it. (The schema bounds the field to 1 until the bound moves to the vLLM rule.)"""
    from gpustack_k3.core.rules.sglang import check_sglang_mem_fraction_above_one as check

    def r(f):
        return SimpleNamespace(spec=SimpleNamespace(memory=SimpleNamespace(fraction=f)))

    assert [m for _, m in check(r(1.5), None)] == ["--mem-fraction-static 1.5 > 1"]
    assert list(check(r(1.0), None)) == [] and list(check(r(None), None)) == []
    assert explain("sglang-mem-fraction-above-one")["runtime_only"]


# ------------------------------------------------------------------ the oracle's signature double (doubles.py)

def _wheel(tmp_path, files: dict[str, str], name="flashinfer_python-9.9.9-py3-none-any.whl"):
    p = tmp_path / name
    with zipfile.ZipFile(p, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return p


def test_wheel_signature_follows_re_exports_and_star_imports(tmp_path):
    """SGLang probes `inspect.signature(flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla)` for enable_dcp
    (model_overrides/kimi_k3.py:21-38@0.5.23): the double reads the signature from the pinned wheel's source, through
    `from .mla import f as f` and `from ._core import *`, without importing it."""
    from gpustack_k3.oracle.engine_side.doubles import wheel_signature

    w = _wheel(tmp_path, {
        "flashinfer/__init__.py": "import torch\n",
        "flashinfer/decode.py": "from .mla import (\n    kernel as kernel,\n)\n",
        "flashinfer/mla/__init__.py": "from ._other import *\nfrom ._core import *\n",
        "flashinfer/mla/_other.py": "def unrelated(): pass\n",
        "flashinfer/mla/_core.py": "@deco(trace=1)\ndef kernel(q, kv, /, w: int, *a, enable_dcp: bool = False, "
                                   "scale=1.0 * 2, **kw) -> None:\n    raise RuntimeError\n",
    })
    sig = wheel_signature(w, "flashinfer.decode", "kernel")
    assert list(sig.parameters) == ["q", "kv", "w", "a", "enable_dcp", "scale", "kw"]
    assert sig.parameters["enable_dcp"].default is False
    assert sig.parameters["enable_dcp"].kind is sig.parameters["enable_dcp"].KEYWORD_ONLY
    assert sig.parameters["q"].kind is sig.parameters["q"].POSITIONAL_ONLY
    assert sig.parameters["scale"].default == "1.0 * 2"   # not a literal: the source text
    with pytest.raises(LookupError, match="not defined"):
        wheel_signature(w, "flashinfer.decode", "missing")


def test_probed_signatures_set_the_real_signature_or_leave_the_stub(tmp_path, monkeypatch):
    """Only a stubbed package whose pinned wheel (the release's Requires-Dist version) is in the wheel cache gets
    the signature double; otherwise the stub stays and the oracle reports the line not decidable."""
    import inspect
    import sys
    import types

    from gpustack_k3.oracle.engine_side import doubles

    _wheel(tmp_path, {"flashinfer/decode.py": "def trtllm_batch_decode_with_kv_cache_mla(q, enable_dcp=False): pass\n"},
           name="flashinfer_python-0.7.2-py3-none-any.whl")
    for name in ("flashinfer", "flashinfer.decode"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    assert doubles.probed_signatures({"flashinfer"}, {"flashinfer_python": "0.7.1"}, tmp_path) == {}
    assert doubles.probed_signatures(set(), {"flashinfer_python": "0.7.2"}, tmp_path) == {}
    done = doubles.probed_signatures({"flashinfer"}, {"flashinfer_python": "0.7.2"}, tmp_path)
    assert done == {"flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla": "flashinfer_python-0.7.2-py3-none-any.whl"}
    f = sys.modules["flashinfer.decode"].trtllm_batch_decode_with_kv_cache_mla
    assert "enable_dcp" in inspect.signature(f).parameters
    with pytest.raises(RuntimeError, match="GPU kernel"):
        f(1)


def test_eagle_steps_without_topk_crash_the_resolution():
    """speculative_hook.py:1271-1276@0.5.23 (1181-1186@0.5.22): `speculative_eagle_topk > 1` with topk None raises
    TypeError when --speculative-num-steps was given without --speculative-eagle-topk."""
    for version in ("0.5.22", "0.5.23"):
        line = (*SEED, "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3")
        assert "sglang-eagle-steps-need-topk" in check_args(*line, version=version)[1]
        assert "sglang-eagle-steps-need-topk" not in check_args(*line, "--speculative-eagle-topk", "1",
                                                                version=version)[1]
    # DSPARK is not of the EAGLE family
    assert "sglang-eagle-steps-need-topk" not in check_args(*SEED, *DSPARK, "--speculative-num-steps", "3")[1]


def test_ngram_refuses_dp_attention():
    """speculative_hook.py:1367-1371@0.5.23 (1277-1281@0.5.22): attn_dp_enabled_of = attn_dp_size > 1."""
    ngram = (*SEED, "--speculative-algorithm", "NGRAM", "--dp-size", "2")
    assert "sglang-ngram-dp-attention" in check_args(*ngram, "--enable-dp-attention")[1]
    assert "sglang-ngram-dp-attention" not in check_args(*ngram)[1]
