"""``gpustack-k3 fit`` (gpustack_k3/cli/fit_cmd.py, gpustack_k3/core/fit.py), invoked through click's CliRunner."""
from __future__ import annotations

import json

from click.testing import CliRunner

from gpustack_k3.cli.fit_cmd import fit
from tests.core.test_model_config_plan import QWEN3_30B_A3B

# a DeciLM (Nemotron-NAS) config: per-layer block_configs the plan does not model
NAS_LIKE = {"architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas", "hidden_size": 8192,
            "num_hidden_layers": 80, "num_attention_heads": 64, "vocab_size": 128256,
            "max_position_embeddings": 131072, "block_configs": [{"attention": {"n_heads_in_group": 8},
                                                                  "ffn": {"ffn_mult": 2.625}}] * 80}


def _write(tmp_path, cfg, name="m"):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def invoke(*args):
    return CliRunner().invoke(fit, list(args), catch_exceptions=False)


def test_fit_lists_layouts_with_kv_capacity_and_concurrency(tmp_path):
    path = _write(tmp_path, QWEN3_30B_A3B)
    r = invoke(path, "--gpu-type", "b300", "-o", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["max_model_len"] == 40960 and d["gpus"] == 8
    by = {row["layout"]: row for row in d["layouts"]}
    assert {"TP8", "TP1 DP8 EP", "TP4 DP2"} <= set(by)
    # 4 KV heads: DCP only up to TP / KV heads (vllm config/model.py:1577-1597@0.33.0)
    assert "TP8 DCP2" in by and "TP8 DCP4" not in by and "TP4 DCP2" not in by
    # the experts spread over TP x DP: TP1 DP8 holds the dense parts whole, so it carries more per GPU than TP8
    assert by["TP1 DP8 EP"]["weights_gib_per_gpu"] > by["TP8"]["weights_gib_per_gpu"]
    assert by["TP1 DP8 EP"]["ep"] == 8
    for row in d["layouts"]:
        assert row["fits"] and row["kv_tokens_per_rank"] >= 40960 and row["full_length_concurrency"] > 0
    assert d["pd_splits"] and d["pd_splits"][0]["split"] == "1P7D"
    text = invoke(path, "--gpu-type", "B300", "--gpus", "4")
    assert text.exit_code == 0 and "TP2 DP2" in text.output and "TP1 DP8" not in text.output
    assert "upper bounds" in text.output


def test_fit_names_what_it_cannot_derive_and_lists_nothing(tmp_path):
    r = invoke(_write(tmp_path, NAS_LIKE), "--gpu-type", "gb300", "-o", "json")
    assert r.exit_code == 1
    d = json.loads(r.output)
    assert d["layouts"] == [] and any("block_configs" in u for u in d["unknown"])


def test_fit_refuses_unusable_input_naming_the_argument(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = CliRunner().invoke(fit, [str(bad), "-o", "json"])
    assert r.exit_code == 2 and "MODEL_CONFIG" in r.output
    r = CliRunner().invoke(fit, [_write(tmp_path, QWEN3_30B_A3B), "--gpu-type", "h0", "-o", "json"])
    assert r.exit_code == 2 and "--gpu-type" in r.output


def test_a_model_too_big_for_the_gpus_fits_nowhere_and_says_which_term(tmp_path):
    big = {**QWEN3_30B_A3B, "num_experts": 4096}
    r = invoke(_write(tmp_path, big), "--gpus", "2", "--all", "-o", "json")
    assert r.exit_code == 1
    d = json.loads(r.output)
    assert d["layouts"] and not any(row["fits"] for row in d["layouts"])
    assert all("routed_experts" in row["why_not"] for row in d["layouts"])


def test_a_config_larger_than_a_deployment_document_is_read(tmp_path):
    """ModelOpt configs list every excluded module (nvidia/MiniMax-M3-NVFP4's config.json is 3,087,083 bytes in
    aiconfigurator-core 0.12.0): a config.json is bounded at 64 MiB (cli/model_source.py), not at a document's 1 MiB."""
    big = {**QWEN3_30B_A3B, "quantization_config": {"quant_method": "fp8", "ignore": [f"model.layers.{i}.mlp.gate"
                                                                                      for i in range(60_000)]}}
    path = _write(tmp_path, big)
    assert len((tmp_path / "m" / "config.json").read_bytes()) > 1024 * 1024
    r = invoke(path, "--gpu-type", "b300", "-o", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["layouts"]
