"""The SGLang rules of gpustack_k3/core/rules/sglang_checks_smiss5.py and the smiss5 change to the checks table's
sglang-hisparse-architecture: the product's side (check-args as the differential runs it); the tests every such module shares (each rule has a
case, names its releases, refuses its line and passes the nearest) are tests/core/test_sglang_python_rules.py. The
release's own verdict on the same lines: tests/engine_oracle/test_sglang_python_rules_oracle.py."""
from __future__ import annotations


from gpustack_k3.core.rules import RULES

DSV41 = ["--model-path", "/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "--tp-size", "8"]
CHUNK = "sglang-dsv4-chunked-prefill-page-size"
K3CHUNK = "sglang-kimi-k3-chunked-prefill-page-size"
KIMI = ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "8"]
KVSHARD = "sglang-kv-cache-sharding-default-prefill-backend"
MEGA = "sglang-nvidia-megakernel-plugin"
PREFILL = ["--tp-size", "8", "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl"]

# (rule, release, refused line, accepted line): the release refuses the first at the rule's cited source and
# accepts the second (tests/engine_oracle/test_sglang_python_rules_oracle.py)
SMISS5_CASES = [
    # DeepSeek-V4's page size is 256 whatever --page-size says
    (CHUNK, "0.5.23", DSV41 + ["--chunked-prefill-size", "1000", "--page-size", "8"], DSV41 + ["--chunked-prefill-size", "4096"]),
    (CHUNK, "0.5.23", DSV41 + ["--chunked-prefill-size", "384"], DSV41 + ["--chunked-prefill-size", "512"]),
    # attention DP divides the chunk first: 1024 / 8 = 128 is not a multiple of 256, 4096 / 8 = 512 is
    (CHUNK, "0.5.23", DSV41 + ["--attn-dp-size", "8", "--enable-dp-lm-head", "--chunked-prefill-size", "1024"],
     DSV41 + ["--attn-dp-size", "8", "--enable-dp-lm-head", "--chunked-prefill-size", "4096"]),
    (CHUNK, "0.5.23", DSV41 + ["--dp-size", "8", "--enable-dp-attention", "--enable-dp-lm-head", "--chunked-prefill-size", "1024"],
     DSV41 + ["--chunked-prefill-size", "1024"]),
    # a decode server skips the check
    (CHUNK, "0.5.23", DSV41 + ["--chunked-prefill-size", "1000", "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl"],
     DSV41 + ["--chunked-prefill-size", "1000", "--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "nixl"]),
    (CHUNK, "0.5.22", DSV41 + ["--chunked-prefill-size", "1000"], DSV41 + ["--chunked-prefill-size", "4096"]),
    (CHUNK, "0.5.22", DSV41 + ["--attn-dp-size", "8", "--enable-dp-lm-head", "--chunked-prefill-size", "1024"],
     DSV41 + ["--attn-dp-size", "8", "--enable-dp-lm-head", "--chunked-prefill-size", "2048"]),
    # Kimi-K3 on SM100/SM103 runs the TRT-LLM / CuteDSL MLA kernels: page size 32 or 64, anything else becomes 64
    (K3CHUNK, "0.5.23", KIMI + ["--chunked-prefill-size", "96"], KIMI + ["--chunked-prefill-size", "96", "--page-size", "32"]),
    (K3CHUNK, "0.5.23", KIMI + ["--chunked-prefill-size", "96", "--page-size", "16"], KIMI + ["--chunked-prefill-size", "128", "--page-size", "16"]),
    (K3CHUNK, "0.5.23", KIMI + ["--chunked-prefill-size", "2080", "--attn-dp-size", "8"],
     KIMI + ["--chunked-prefill-size", "2048", "--attn-dp-size", "8"]),
    (K3CHUNK, "0.5.23", KIMI + ["--dcp-size", "8", "--chunked-prefill-size", "100", *PREFILL[2:]],
     KIMI + ["--dcp-size", "8", "--chunked-prefill-size", "4096", *PREFILL[2:]]),
    # 0.5.22: the same Kimi-K3 override and MLA page pass (helper smiss6)
    (K3CHUNK, "0.5.22", KIMI + ["--chunked-prefill-size", "96"], KIMI + ["--chunked-prefill-size", "96", "--page-size", "32"]),
    (K3CHUNK, "0.5.22", KIMI + ["--chunked-prefill-size", "96", "--page-size", "16"], KIMI + ["--chunked-prefill-size", "128", "--page-size", "16"]),
    (K3CHUNK, "0.5.22", KIMI + ["--chunked-prefill-size", "2080", "--attn-dp-size", "8"],
     KIMI + ["--chunked-prefill-size", "2048", "--attn-dp-size", "8"]),
    (K3CHUNK, "0.5.22", KIMI + ["--dcp-size", "8", "--chunked-prefill-size", "100", *PREFILL[2:]],
     KIMI + ["--dcp-size", "8", "--chunked-prefill-size", "4096", *PREFILL[2:]]),
    # the SM100 default prefill backend of an MHA model is trtllm_mha (Llama: get_default_attn_backend; GPT-OSS: its
    # override); a decode backend alone does not change the prefill one
    (KVSHARD, "0.5.23", ["--model-path", "/models/shape-gqa-dense", *PREFILL, "--enable-kv-cache-sharding"],
     ["--model-path", "/models/shape-gqa-dense", *PREFILL]),
    (KVSHARD, "0.5.23", ["--model-path", "/models/shape-gqa-yarn", *PREFILL, "--enable-kv-cache-sharding"],
     ["--model-path", "/models/shape-gqa-yarn", *PREFILL]),
    (KVSHARD, "0.5.23", ["--model-path", "/models/shape-gqa-dense", *PREFILL, "--enable-kv-cache-sharding",
                         "--decode-attention-backend", "flashinfer"],
     ["--model-path", "/models/shape-gqa-dense", *PREFILL, "--decode-attention-backend", "flashinfer"]),
]
SMISS5_DIRECT = {c[0] for c in SMISS5_CASES} | {MEGA}


def shape_config(argv: list[str]) -> str | None:
    """The config.json the oracle writes for a /models/shape-* line (gpustack_k3/oracle/models.py), which the
    differential hands the product with the line."""
    path = argv[argv.index("--model-path") + 1]
    if not path.startswith("/models/shape-"):
        return None
    from gpustack_k3.oracle.models import model_root, write_models

    write_models()
    return str(model_root() / path.rsplit("/", 1)[1] / "config.json")


def product(release: str, argv: list[str], model_config: str | None = None, gpu_type: str = "b300") -> dict:
    """check-args in-process, as the differential runs it (tools/engine_oracle/product.py)."""
    from tools.engine_oracle.product import check_args

    line = {"argv": argv, "env": {}, "model": None, "gpu_type": gpu_type, "gpus": 8}
    cfg = model_config or shape_config(argv)
    if cfg:
        line["model_config"] = cfg
    return check_args("sglang", release, line)


def findings(release: str, argv: list[str]) -> dict[str, dict]:
    import json

    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args as cmd

    res = CliRunner().invoke(cmd, ["--engine", "sglang", "--engine-version", release, "-o", "json", "--", *argv])
    assert res.exit_code in (0, 1), res.output
    return {f["rule"]: f for f in json.loads(res.output)["findings"]}


def test_chunk_rule_names_the_per_rank_chunk_and_the_page_size():
    msg = findings("0.5.23", DSV41 + ["--attn-dp-size", "8", "--enable-dp-lm-head", "--chunked-prefill-size", "1024"])[CHUNK]["message"]
    assert "1024 / 8 attention-DP ranks = 128" in msg and "page size 256" in msg


def test_chunk_rule_leaves_other_models_and_explicit_backends_to_the_release():
    # Kimi-K3's page size is not forced by a model override; an explicit attention backend may meet the MLA page
    # constraints pass after DeepSeek-V4's override: the rule does not guess either
    kimi = ["--model-path", "/models/Kimi-K3", "--trust-remote-code", "--tp-size", "8", "--chunked-prefill-size", "1000"]
    assert CHUNK not in product("0.5.23", kimi)["rules"]
    assert CHUNK not in product("0.5.23", DSV41 + ["--chunked-prefill-size", "1000", "--decode-attention-backend", "flashmla"])["rules"]
    # --enable-kv-cache-sharding rounds the chunk up to a page multiple (kv_shard_hook.py:280-292@0.5.23)
    from gpustack_k3.core.rules.sglang_checks_smiss5 import attn_dp_width

    class View:
        def __init__(self, **kw):
            self.kw = kw

        def value(self, d):
            return self.kw.get(d)

    assert attn_dp_width(View(attn_dp_size=4)) == 4
    assert attn_dp_width(View(attn_dp_size=1, dp_size=8, enable_dp_attention=True)) == 8
    assert attn_dp_width(View(attn_dp_size=1, dp_size=8, enable_dp_attention=False)) == 1


def test_megakernel_is_a_warning_on_0523_only():
    assert set(RULES[MEGA].sources) == {"sglang 0.5.23"}   # 0.5.22's parser has no --enable-nvidia-megakernel
    found = findings("0.5.23", ["--model-path", "/models/shape-mla-moe", "--tp-size", "8", "--enable-nvidia-megakernel"])
    assert found[MEGA]["severity"] == "warning" and "sgl-nvidia-mega" in found[MEGA]["message"]
    assert product("0.5.23", ["--model-path", "/models/shape-mla-moe", "--tp-size", "8", "--enable-nvidia-megakernel"])[
        "verdict"] == "pass"
    assert MEGA not in findings("0.5.23", ["--model-path", "/models/shape-mla-moe", "--tp-size", "8"])


def test_hisparse_on_dsv41_is_refused_for_the_engines_reason():
    """DeepSeek-V4.1's DeepseekV41ForCausalLM is read as DeepseekV4ForCausalLM (configs/deepseek_v41.py:38-39), a
    HiSparse architecture: the release refuses HiSparse for V4.1 in deepseek_v4_hook.py (entry
    sglang-dsv41-unsupported-features), not for the architecture."""
    from tools.engine_oracle.product import model_config

    line = DSV41 + ["--enable-hisparse", "--disable-radix-cache"]
    mine = product("0.5.23", line, model_config("deepseek-v4.1-flash"))
    assert mine["verdict"] == "refuse" and mine["rules"] == ["sglang-dsv41-unsupported-features"], mine
    for release in ("0.5.22", "0.5.23"):
        assert "sglang-hisparse-architecture" not in product(release, line)["rules"]


def test_kv_sharding_default_backend_reads_the_gpu_and_the_backend_flags():
    line = ["--model-path", "/models/shape-gqa-dense", *PREFILL, "--enable-kv-cache-sharding"]
    assert KVSHARD in product("0.5.23", line, gpu_type="gb300")["rules"]
    # Hopper picks fa3 for an MHA model: not this rule's case
    assert KVSHARD not in product("0.5.23", line, gpu_type="h200")["rules"]
    # a backend on the line is the line's (the release judges it)
    for flag in ("--attention-backend", "--prefill-attention-backend"):
        assert KVSHARD not in product("0.5.23", line + [flag, "fa3"])["rules"]
    # an MLA model (DeepSeek-V3 shape) and a model not read here are left to the release
    assert KVSHARD not in product("0.5.23", ["--model-path", "/models/shape-mla-moe", *PREFILL,
                                             "--enable-kv-cache-sharding"])["rules"]
    assert KVSHARD not in product("0.5.23", ["--model-path", "/models/shape-hybrid", *PREFILL,
                                             "--enable-kv-cache-sharding"])["rules"]


def test_kimi_k3_chunk_rule_reads_the_gpu_and_the_backend_flags():
    line = KIMI + ["--chunked-prefill-size", "96"]
    assert K3CHUNK in product("0.5.23", line, gpu_type="gb300")["rules"]
    assert K3CHUNK not in product("0.5.23", line, gpu_type="h200")["rules"]
    assert K3CHUNK not in product("0.5.23", line + ["--attention-backend", "flashinfer"])["rules"]
    assert K3CHUNK not in product("0.5.23", line + ["--disaggregation-mode", "decode", "--disaggregation-transfer-backend",
                                                    "nixl"])["rules"]
    assert K3CHUNK in product("0.5.22", line)["rules"]   # 0.5.22's Kimi-K3 override is the same (kimi_k3.py:137-150@0.5.22)
    # the KV-sharding default-backend rule stays off 0.5.22 (its default Rust tree core refuses those lines earlier)
    assert KVSHARD not in product("0.5.22", ["--model-path", "/models/shape-gqa-dense", *PREFILL,
                                             "--enable-kv-cache-sharding"])["rules"]
