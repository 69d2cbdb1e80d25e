"""Every command that reads a document follows its ``spec.model.config`` (a config.json or a directory holding one)
and ``spec.model.configJSON`` (issue 36 "Done when", docs/design/011-model-config.md); ``--model-config`` overrides
both with a note; a config named in the document that cannot be used is exit 2 naming ``spec.model.config`` and the
way out (issue 36 item 2). In-process through the CLI's entry point (gpustack_k3.cli.main.run)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpustack_k3.cli.main import run
from tests.core.test_model_config_plan import QWEN3_1_7B, QWEN3_30B_A3B

LOG = str(Path(__file__).resolve().parents[1] / "fixtures/logs/vllm-0.33-kimi-k3-tp8-ready.log")


def _write_config(tmp_path, cfg, name="Qwen3-1.7B"):
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


def _doc(tmp_path, model: dict, *, name="qwen3-1.7b", version="0.33.0", tp=1, gpus=1, fname="doc.yaml"):
    spec = {"engine": {"name": "vllm", "version": version},
            "model": {"name": name, "source": "Qwen/Qwen3-1.7B", "path": "/models/Qwen3-1.7B", **model},
            "hardware": {"gpuType": "b300", "gpuCount": gpus}, "parallel": {"tp": tp},
            "scheduling": {"maxNumSeqs": 32, "longPrefillTokenThreshold": 4096}}
    f = tmp_path / fname
    f.write_text(yaml.safe_dump({"apiVersion": "k3.gpustack.ai/v1alpha1", "kind": "K3Deployment",
                                 "metadata": {"name": "q"}, "spec": spec}))
    return str(f)


def _run(capsys, *args):
    rc = run(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return rc, out, err


def _plan(capsys, *args):
    rc, out, err = _run(capsys, "plan", *args, "-o", "json")
    return rc, json.loads(out), err


# ------------------------------------------------------------------ the document's config decides

@pytest.mark.parametrize("as_file", [False, True], ids=["directory", "file"])
def test_plan_follows_the_documents_config_for_an_uncatalogued_model(tmp_path, capsys, as_file):
    d = _write_config(tmp_path, QWEN3_1_7B)
    bare = _doc(tmp_path, {}, fname="bare.yaml")
    rc, out, _ = _run(capsys, "validate", bare, "-o", "json")
    assert rc == 1 and "unknown-catalog-entry" in out                 # without it: nothing to go by
    spec = _doc(tmp_path, {"config": str(d / "config.json") if as_file else str(d)})
    rc, p, _ = _plan(capsys, spec)
    assert rc == 0 and p["ok"] and p["basis"] == "config.json"
    assert p["max_model_len"] == 40960                                # the config's max_position_embeddings
    assert p["weights_gib"] < 4                                       # 1.7 B parameters in bf16 on one GPU
    assert str(d) in " ".join(p["notes"])


def test_a_config_under_a_catalog_name_decides_over_the_entry(tmp_path, capsys):
    """Kimi-K3's name and engine version, Qwen3-1.7B's config.json: the plan is Qwen's, not Kimi-K3's calibrated
    194.54 GiB per GPU and 1,000,000 positions."""
    d = _write_config(tmp_path, QWEN3_1_7B)
    spec = _doc(tmp_path, {"config": str(d)}, name="kimi-k3", version="kimi-k3", tp=8, gpus=8)
    rc, p, _ = _plan(capsys, spec)
    assert p["basis"] == "config.json" and p["max_model_len"] == 40960 and p["weights_gib"] < 1


@pytest.mark.parametrize("command", [("validate",), ("dry-run",), ("render", "--target", "kubernetes")])
def test_every_document_command_follows_the_config(tmp_path, capsys, command):
    spec_bare = _doc(tmp_path, {}, fname="bare.yaml")
    out_dir = ("--out", str(tmp_path / "out")) if command[0] == "render" else ()
    rc, _, _ = _run(capsys, *command, spec_bare, *out_dir)
    assert rc == 1                                                    # refused: the catalog does not know it
    spec = _doc(tmp_path, {"config": str(_write_config(tmp_path, QWEN3_1_7B))})
    rc, out, err = _run(capsys, *command, spec, *(("--out", str(tmp_path / "out2")) if out_dir else ()))
    assert rc == 0, out + err


def test_run_dry_run_follows_the_config(tmp_path, capsys):
    spec = _doc(tmp_path, {"config": str(_write_config(tmp_path, QWEN3_1_7B))})
    rc, out, err = _run(capsys, "run", "start", spec, "--dry-run", "-o", "json")
    assert rc == 0, out + err


def test_a_preset_with_an_inline_config_plans_from_it(capsys):
    rc, p, _ = _plan(capsys, "--preset", "qwen3-30b-a3b-b300")
    assert rc == 0 and p["basis"] == "config.json" and p["max_model_len"] == 40960
    assert "spec.model.configJSON" in " ".join(p["notes"])
    rc, out, _ = _run(capsys, "validate", "--preset", "qwen3-30b-a3b-b300", "-o", "json")
    assert rc == 0 and json.loads(out)["ok"]


def test_an_inline_config_in_a_document_decides(tmp_path, capsys):
    spec = _doc(tmp_path, {"configJSON": QWEN3_1_7B})
    rc, p, _ = _plan(capsys, spec)
    assert rc == 0 and p["max_model_len"] == 40960 and p["basis"] == "config.json"


# ------------------------------------------------------------------ --model-config overrides, with a note

def test_model_config_option_overrides_the_document_with_a_note(tmp_path, capsys):
    small = _write_config(tmp_path, QWEN3_1_7B)
    big = _write_config(tmp_path, QWEN3_30B_A3B, "Qwen3-30B-A3B")
    spec = _doc(tmp_path, {"config": str(small)})
    _, from_doc, err = _plan(capsys, spec)
    assert "note:" not in err
    rc, over, err = _plan(capsys, spec, "--model-config", str(big / "config.json"))
    assert "--model-config" in err and "overrides the document's spec.model.config" in err
    assert over["weights_gib"] > 10 * from_doc["weights_gib"]        # 30.5 B vs 1.7 B parameters


# ------------------------------------------------------------------ bad input: exit 2 naming spec.model.config

def _bad_paths(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "negative.json").write_text(json.dumps({**QWEN3_1_7B, "num_hidden_layers": -4}))
    (tmp_path / "nofigures.json").write_text(json.dumps({"model_type": "qwen3"}))
    return {"missing": str(tmp_path / "nope" / "config.json"), "directory-without-config": str(tmp_path / "empty"),
            "invalid-json": str(tmp_path / "broken.json"), "not-an-object": str(tmp_path / "list.json"),
            "negative-layers": str(tmp_path / "negative.json"), "no-figures": str(tmp_path / "nofigures.json")}


@pytest.mark.parametrize("case", ["missing", "directory-without-config", "invalid-json", "not-an-object",
                                  "negative-layers", "no-figures"])
def test_an_unusable_config_in_the_document_is_exit_2_naming_the_field(tmp_path, capsys, case):
    spec = _doc(tmp_path, {"config": _bad_paths(tmp_path)[case]})
    rc, out, err = _run(capsys, "plan", spec, "-o", "json")
    assert rc == 2
    e = json.loads(out)["error"]
    assert e["where"] == "spec.model.config" and "spec.model.config" in e["fix"] and e["kind"] == "input"


@pytest.mark.parametrize("command", [("validate",), ("dry-run",), ("render", "--target", "kubernetes"),
                                     ("run", "start", "--dry-run"),
                                     ("gpustack", "apply", "--server", "http://127.0.0.1:9", "--dry-run"),
                                     ("coldstart", LOG, "--spec")])
def test_every_command_refuses_an_unreadable_config_before_doing_anything(tmp_path, capsys, command):
    spec = _doc(tmp_path, {"config": str(tmp_path / "absent")})
    rc, out, err = _run(capsys, *command, spec, "-o", "json")
    assert rc == 2, out + err
    assert json.loads(out)["error"]["where"] == "spec.model.config"


def test_an_unusable_inline_config_is_exit_2_naming_the_field(tmp_path, capsys):
    spec = _doc(tmp_path, {"configJSON": {"num_hidden_layers": "many"}})
    rc, out, _ = _run(capsys, "validate", spec, "-o", "json")
    e = json.loads(out)["error"]
    assert rc == 2 and "spec.model.configJSON" in e["where"]
    assert "not a usable config.json" in e["message"] and "num_hidden_layers" in e["message"]


def test_the_documents_config_sets_the_limits(tmp_path, capsys):
    """Qwen3-1.7B's 40,960 positions: a longer maxModelLen is refused under the document's config (rule
    context-above-model), as under --model-config."""
    d = _write_config(tmp_path, QWEN3_1_7B)
    spec = _doc(tmp_path, {"config": str(d)})
    data = yaml.safe_load(Path(spec).read_text())
    data["spec"]["scheduling"]["maxModelLen"] = 100000
    Path(spec).write_text(yaml.safe_dump(data))
    rc, out, _ = _run(capsys, "validate", spec, "-o", "json")
    assert rc == 1
    assert ("context-above-model", "spec.scheduling.maxModelLen") in {
        (f["rule"], f["field"]) for f in json.loads(out)["findings"] if f["severity"] == "error"}
