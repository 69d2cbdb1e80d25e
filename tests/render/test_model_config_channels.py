"""Issue 33 item 11 / issue 36: a local model directory named like a catalog model (``.../Kimi-K3``) whose config.json
is another model: render, dry-run, run and ``gpustack apply`` follow the config.json as validate and plan do (its
limits, its plan, the disagreement named), and ``--model-config FILE`` is read where a model path is not local."""
from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from tests.render.conftest import preset_data

# Qwen/Qwen3-1.7B config.json (dense, max_position_embeddings 40960): not Kimi-K3 (catalog max context 1,000,000)
QWEN3_1_7B = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2048,
              "intermediate_size": 6144, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
              "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": True, "max_position_embeddings": 40960,
              "torch_dtype": "bfloat16"}


def model_dir(tmp_path):
    d = tmp_path / "models" / "Kimi-K3"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps(QWEN3_1_7B))
    return d


def spec(tmp_path, *, path=None, max_model_len=None, preset="vllm-fixed"):
    """The preset with spec.model.path = ``path`` (default: a local Kimi-K3 directory holding Qwen3's config.json);
    maxModelLen left out (None) or set."""
    data = preset_data(preset)
    data["spec"]["model"]["path"] = str(path or model_dir(tmp_path))
    for sch in [data["spec"].get("scheduling") or {}, *((r.get("scheduling") or {}) for r in data["spec"].get("roles", []))]:
        sch.pop("maxModelLen", None)
    if max_model_len is not None:
        data["spec"].setdefault("scheduling", {})["maxModelLen"] = max_model_len
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(p)


def invoke(cmd, *args):
    return CliRunner().invoke(cmd, list(args))


def render(*args):
    from gpustack_k3.cli.render_cmd import render as cmd

    return invoke(cmd, *args)


def dry_run(*args):
    from gpustack_k3.cli.core_cmds import dry_run as cmd

    return invoke(cmd, *args)


# ---------------------------------------------------------------- render

def test_render_refuses_a_length_above_the_config_of_the_local_directory(tmp_path):
    """262,144 is within Kimi-K3's 1,000,000 but above the directory's config.json (40,960): the engine refuses it,
    validate refuses it, and so does render (before: rendered, exit 0)."""
    r = render(spec(tmp_path, max_model_len=262144), "--target", "argv", "-o", "json")
    assert r.exit_code == 1, r.output
    assert "context-above-model" in r.output and "40,960" in r.output


def test_render_names_the_config_that_decides(tmp_path):
    r = render(spec(tmp_path), "--target", "argv", "-o", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["args"][0].endswith("/models/Kimi-K3")
    assert "model-config-disagrees-catalog" in r.stderr and "Qwen3ForCausalLM" in r.stderr
    assert "max_positions: 40960" in r.stderr


def test_render_reads_model_config_where_the_path_is_not_local(tmp_path):
    cfg = tmp_path / "other" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(QWEN3_1_7B))
    s = spec(tmp_path, path="/models/Kimi-K3", max_model_len=262144)
    assert render(s, "--target", "argv", "-o", "json").exit_code == 0          # the catalog's Kimi-K3: 262,144 fits
    r = render(s, "--target", "argv", "-o", "json", "--model-config", str(cfg))
    assert r.exit_code == 1, r.output
    assert "context-above-model" in r.output


def test_render_model_config_that_is_not_json_is_unusable_input(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    r = render(spec(tmp_path), "--target", "argv", "--model-config", str(bad))
    assert r.exit_code == 2, r.output
    assert "--model-config" in r.output and "not a usable config.json" in r.output and "Traceback" not in r.output


def test_render_of_a_topology_follows_the_config(tmp_path):
    s = spec(tmp_path, preset="kimi-k3-b300-1p1d")
    data = yaml.safe_load(open(s))
    for role in data["spec"]["roles"]:
        role.setdefault("scheduling", {})["maxModelLen"] = 262144
    data["spec"].setdefault("scheduling", {})["maxModelLen"] = 262144
    open(s, "w").write(yaml.safe_dump(data, sort_keys=False))
    r = render(s, "--target", "argv", "-o", "json")
    assert r.exit_code == 1, r.output
    assert "context-above-model" in r.output


# ---------------------------------------------------------------- dry-run

def test_dry_run_plans_from_the_config_of_the_local_directory(tmp_path):
    r = dry_run(spec(tmp_path), "-o", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["plan"]["basis"] == "config.json"
    assert out["plan"]["max_model_len"] == 40960           # the config's max_position_embeddings, not 1,000,000
    assert out["plan"]["weights_gib"] < 1                  # Qwen3-1.7B, not Kimi-K3's 194.54 GiB per GPU
    rules = {f["rule"] for f in out["findings"]}
    assert "model-config-disagrees-catalog" in rules and "model-config-checks-skipped" not in rules


def test_dry_run_reads_model_config(tmp_path):
    cfg = tmp_path / "other" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(QWEN3_1_7B))
    s = spec(tmp_path, path="/models/Kimi-K3")
    assert json.loads(dry_run(s, "-o", "json").stdout)["plan"]["basis"] == "calibrated"
    r = dry_run(s, "-o", "json", "--model-config", str(cfg))
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["plan"]["max_model_len"] == 40960


def test_dry_run_refuses_a_length_above_the_config(tmp_path):
    r = dry_run(spec(tmp_path, max_model_len=262144), "-o", "json")
    assert r.exit_code == 1, r.output
    out = json.loads(r.stdout)
    assert out["ok"] is False and "context-above-model" in {f["rule"] for f in out["findings"]}


# ---------------------------------------------------------------- run, gpustack apply (the channels)

def test_run_dry_run_follows_the_config(tmp_path):
    from gpustack_k3.cli.run_cmd import run

    s = spec(tmp_path, max_model_len=262144)
    r = invoke(run, s, "--dry-run", "--runtime", "local", "-o", "json")
    assert r.exit_code == 1, r.output
    assert "context-above-model" in r.output
    ok = invoke(run, spec(tmp_path / "b"), "--dry-run", "--runtime", "local", "-o", "json")
    assert ok.exit_code == 0, ok.output


def test_gpustack_apply_follows_the_config_before_sending(tmp_path):
    from gpustack_k3.cli.gpustack_cmd import gpustack

    r = invoke(gpustack, "apply", spec(tmp_path, max_model_len=262144), "--server", "http://127.0.0.1:9",
               "--dry-run")
    assert r.exit_code == 1, r.output
    assert "context-above-model" in r.output and "nothing was sent" in r.output


def test_plan_of_a_topology_is_derived_from_the_config(tmp_path):
    """plan and dry-run of a document with roles: every role's plan from the directory's config.json (core/plan_topology.py
    plan_topology(doc, arch)), not Kimi-K3's calibrated figures."""
    from gpustack_k3.cli.core_cmds import plan_cmd as plan

    r = invoke(plan, spec(tmp_path, preset="kimi-k3-b300-1p1d"), "-o", "json")
    assert r.exit_code == 1, r.output                      # DCP 8 above Qwen3's 8 KV heads (model-dcp-gqa)
    out = json.loads(r.stdout)
    assert "model-dcp-gqa" in {f["rule"] for f in out["findings"]}
    for role in out["roles"]:
        assert role["max_model_len"] == 40960 and role["weights_per_gpu_gib"] < 1


def test_coldstart_plans_the_spec_from_the_config(tmp_path):
    """coldstart --spec: the planner's figures it compares a log with come from the same config.json (cli/common.py
    build_launch_or_exit); a length above the config is refused before the log is read."""
    from gpustack_k3.cli.coldstart_cmd import coldstart
    from tests.render.conftest import REPO

    log = str(REPO / "tests/fixtures/logs/vllm-0.32.0-cpu-compile-cache-hit.log")
    r = invoke(coldstart, log, "--spec", spec(tmp_path, max_model_len=262144), "-o", "json")
    assert r.exit_code == 1, r.output
    assert "context-above-model" in r.output
