"""Helper reg11: the rules that read each vLLM release's model registry table
(gpustack_k3/catalog/data/engines/vllm-model-registry.json, tools/engine_parsers/model_registry.py), the product side.

- gpustack_k3/core/rules/vllm_checks_reg11.py: --runner the class cannot run, PP on a class without SupportsPP, a video
  pruning method the class does not list, renderer workers with the MM processor cache on a pooling model,
  --model-impl transformers on a catalog model no transformers holds (error without remote code, warning with it),
  an unregistered architecture with the Transformers fallback open (warning);
- gpustack_k3/core/rules/spec.py model-not-in-release: reads the table (no hand-kept trait list), refuses
  --model-impl vllm on any unregistered architecture.
Each line is a model directory: a copy of the oracle's shape-gqa-dense directory with its config.json replaced (a
field set, or one of aiconfigurator-core's public config.json files); tests/engine_oracle/test_reg11_rules_oracle.py
has each release judge the same lines."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules.vllm_checks_reg11 import (
    FALLBACK,
    PP,
    PRUNING,
    RENDERER,
    RUNNER,
    TF_ERROR,
    TF_WARN,
    registry_table,
    unregistered_catalog_models,
)

REG11_DIRECT = {RUNNER, PP, PRUNING, RENDERER, TF_ERROR, TF_WARN, FALLBACK}   # tests/core/test_registry.py, test_rules.py
NOT_IN = "model-not-in-release"

# vllm-0.32.0-cpu: its oracle runs the installed engine, which does not read these model directory copies (it looks
# the path up as a hub id): the rules do not list it
ALL = ("0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0")
MM = ("0.28.0", "0.29.0", "0.33.0", "0.34.0")     # releases with video pruning / renderer workers

BERT = {"architectures": ["BertModel"]}
EHS = {"architectures": ["ExtractHiddenStatesModel"]}
FOO = {"architectures": ["FooBarForCausalLM"]}
VL = "Qwen--Qwen3-VL-8B-Instruct"
VL25 = (VL, {"architectures": ["Qwen2_5_VLForConditionalGeneration"]})


def model_dir(tmp: Path, cfg) -> str:
    """A model directory: the oracle's shape-gqa-dense files with config.json ``cfg`` (fields set on the shape's
    config, or ``(public stem, fields)`` on one of aiconfigurator-core's public config.json files, or None: the
    shape itself)."""
    from gpustack_k3.oracle.models import model_root
    from tests.core.test_vllm_checks import shape_config

    shape_config("shape-gqa-dense")
    if cfg is None:
        return str(model_root() / "shape-gqa-dense")
    base, fields = (cfg if isinstance(cfg, tuple) else (None, cfg))
    d = tmp / f"reg11-{abs(hash(json.dumps([base, fields], sort_keys=True)))}"
    if not d.exists():
        shutil.copytree(model_root() / "shape-gqa-dense", d)
        if base is None:
            c = json.loads((d / "config.json").read_text())
        else:
            from tools.engine_oracle.synth import public_configs

            c = dict(public_configs()[base])
        c.update(fields)
        (d / "config.json").write_text(json.dumps(c))
    return str(d)


def line(tmp: Path, cfg, *args: str) -> tuple[list[str], str]:
    d = model_dir(tmp, cfg)
    return [d, *args], f"{d}/config.json"


def product(release: str, argv: list[str], config: str | None, model: str | None = None) -> dict:
    from tools.engine_oracle.product import check_args

    return check_args("vllm", release, {"argv": argv, "env": {}, "model": model, "model_config": config,
                                        "gpu_type": "b300", "gpus": 8})


def findings(release: str, argv: list[str], config: str | None, model: str | None = None) -> list[dict]:
    """check-args' findings of every severity."""
    from click.testing import CliRunner

    from gpustack_k3.cli.core_cmds import check_args as cmd
    from tools.engine_oracle.product import _common

    args = _common("vllm", release, model, "b300", config) + ["--gpus", "8"]
    res = CliRunner().invoke(cmd, args + ["--", *argv])
    return json.loads(res.stdout if hasattr(res, "stdout") else res.output)["findings"]


# (rule, release, config, refused args, flipped args): the release refuses the first, accepts the second
CASES = [
    *[(PP, rel, BERT, ("-tp", "4", "-pp", "2"), ("-tp", "8")) for rel in ALL],
    *[(RUNNER, rel, BERT, ("-tp", "8", "--runner", "generate"), ("-tp", "8", "--runner", "pooling"))
      for rel in ALL],
    *[(RUNNER, rel, EHS, ("-tp", "8", "--runner", "generate"), ("-tp", "8")) for rel in MM],
    *[(RUNNER, rel, None, ("-tp", "8", "--runner", "pooling", "--convert", "none"),
       ("-tp", "8", "--runner", "pooling")) for rel in ALL],
    *[(PRUNING, rel, VL25, ("-tp", "8", "--video-pruning-rate", "0.5", "--video-pruning-method", "vidcom2"),
       ("-tp", "8", "--video-pruning-rate", "0.5", "--video-pruning-method", "evs")) for rel in MM],
    *[(RENDERER, rel, (VL, {}), ("-tp", "8", "--runner", "pooling", "--convert", "embed", "--renderer-num-workers", "2"),
       ("-tp", "8", "--runner", "pooling", "--convert", "embed", "--renderer-num-workers", "2",
        "--mm-processor-cache-gb", "0")) for rel in MM],
    *[(NOT_IN, rel, FOO, ("-tp", "8", "--model-impl", "vllm"), None) for rel in ALL],
]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]

# catalog-model lines (rule, release, argv, catalog model, product verdict): the held-out seed 57119 line's terms
KIMI = ["/models/Kimi-K3", "-tp", "8"]
DSV41 = ["/models/DeepSeek-V4.1-Flash", "-tp", "8"]
CATALOG = [
    (TF_ERROR, "0.28.0", KIMI + ["--model-impl", "transformers"], "kimi-k3", "refuse"),
    (TF_ERROR, "0.34.0", KIMI + ["--model-impl", "transformers"], "kimi-k3", "refuse"),
    (TF_ERROR, "0.34.0", DSV41 + ["--model-impl", "transformers"], "deepseek-v4.1-flash", "refuse"),
    (TF_WARN, "0.28.0", KIMI + ["--model-impl", "transformers", "--trust-remote-code"], "kimi-k3", "pass"),
    (TF_WARN, "0.34.0", KIMI + ["--model-impl", "transformers", "--trust-remote-code"], "kimi-k3", "pass"),
    (NOT_IN, "0.28.0", DSV41, "deepseek-v4.1-flash", "refuse"),
    (NOT_IN, "0.11.0", KIMI, "kimi-k3", "refuse"),
    (FALLBACK, "0.11.0", KIMI + ["--trust-remote-code"], "kimi-k3", "pass"),
]


@pytest.mark.parametrize("rid,release,cfg,bad,good", CASES, ids=IDS)
def test_the_rule_fires_on_its_line_and_not_on_the_flip(tmp_path, rid, release, cfg, bad, good):
    argv, config = line(tmp_path, cfg, *bad)
    got = product(release, argv, config)
    assert got["verdict"] == "refuse" and rid in got["rules"], got
    if good is not None:
        argv, config = line(tmp_path, cfg, *good)
        assert rid not in product(release, argv, config)["rules"]


@pytest.mark.parametrize("rid,release,argv,model,verdict", CATALOG)
def test_catalog_model_lines(rid, release, argv, model, verdict):
    got = product(release, argv, None, model)
    assert got["verdict"] == verdict, got
    assert rid in {f["rule"] for f in findings(release, argv, None, model)}


def test_an_unregistered_architecture_with_the_fallback_open_is_warned(tmp_path):
    argv, config = line(tmp_path, FOO, "-tp", "8")
    for rel in ("0.28.0", "0.34.0"):
        got = product(rel, argv, config)
        assert got["verdict"] == "pass", got
        assert FALLBACK in {f["rule"] for f in findings(rel, argv, config)}


def test_the_rules_stay_silent_where_another_class_may_answer(tmp_path):
    # --model-impl transformers (the Transformers backend's class), --hf-overrides (may rename the architecture)
    for args in (("--model-impl", "transformers"), ("--hf-overrides", '{"architectures": ["LlamaForCausalLM"]}')):
        argv, config = line(tmp_path, BERT, "-tp", "4", "-pp", "2", *args)
        assert PP not in product("0.34.0", argv, config)["rules"]


def test_the_table_replaces_the_hand_kept_lists():
    from gpustack_k3.catalog import load_catalog

    cat = load_catalog()
    assert unregistered_catalog_models("0.11.0", cat) == ["deepseek-v4.1-flash", "kimi-k3"]
    assert unregistered_catalog_models("0.28.0", cat) == ["deepseek-v4.1-flash"]
    assert unregistered_catalog_models("0.33.0", cat) == []
    for v in cat.engines["vllm"].versions.values():
        assert "unregistered_models" not in (v.traits or {}) and "unregistered_architectures" not in (v.traits or {})


def test_the_table_reads_the_known_classes():
    t = registry_table()
    assert set(ALL) | {"0.32.0-cpu"} <= set(t)
    for rel in ALL:
        m = t[rel]["models"]
        assert m["LlamaForCausalLM"]["generate"] and m["LlamaForCausalLM"]["pp"]
        assert m["BertModel"]["pooling"] and not m["BertModel"]["generate"] and not m["BertModel"]["pp"]
    # the bases in Python's order (C3): TransformersForCausalLM's Base (SupportsPP, forward(intermediate_tensors))
    # comes before the VllmModel protocol's forward stub, so the Transformers backend's classes support PP
    assert t["0.34.0"]["models"]["GPTBigCodeForCausalLM"]["class"].endswith(" TransformersForCausalLM")
    assert t["0.34.0"]["models"]["GPTBigCodeForCausalLM"]["pp"]
    for rel in MM:
        assert t[rel]["models"]["Qwen2_5_VLForConditionalGeneration"]["video_pruning"] == ["evs"]
        assert t[rel]["models"]["KimiK3ForConditionalGeneration"]["multimodal"]


def test_the_rules_are_registered():
    assert REG11_DIRECT <= set(RULES)
    for rid in REG11_DIRECT - {TF_WARN, FALLBACK}:
        assert {k.split()[1] for k in RULES[rid].sources} <= set(ALL), rid
