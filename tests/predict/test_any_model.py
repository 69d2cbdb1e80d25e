"""`predict` for a model the catalog lacks, from its config.json (issue 36 item 3), with the band beside every
point figure. Tier `predict`: the configs are read from the installed aiconfigurator-core (nothing copied here)."""
from __future__ import annotations

import json
import math
import shutil

import pytest

from gpustack_k3.cli.main import run
from tests.support import tiers

pytestmark = pytest.mark.predict

DOC = """apiVersion: k3.gpustack.ai/v1alpha1
kind: K3Deployment
metadata: {{name: anymodel}}
spec:
  engine: {{name: {engine}, version: {version}}}
  model: {{name: {name}{path}}}
  hardware: {{gpuType: b300}}
  parallel: {{tp: 8{dcp}}}
"""
# family by attention and FFN: dense GQA, MoE (GQA), MLA + MoE
MODELS = {"dense-gqa": ("Qwen/Qwen3-8B", "LLAMA"), "moe": ("mistralai/Mixtral-8x7B-v0.1", "MOE"),
          "mla": ("deepseek-ai/DeepSeek-V3", "DEEPSEEK")}


def _config(hf_id: str):
    tiers.aiconfigurator()
    from importlib import resources

    return resources.files("aiconfigurator_core").joinpath("model_configs", f"{hf_id.replace('/', '--')}_config.json")


def _doc(tmp_path, name="any-model", path=None, engine="vllm", version="0.33.0", dcp=1):
    f = tmp_path / "doc.yaml"
    f.write_text(DOC.format(engine=engine, version=version, name=name, path=f", path: {path}" if path else "",
                            dcp=f", dcp: {dcp}" if dcp > 1 else ""))
    return str(f)


def _predict(capsys, *args):
    rc = run(["predict", *args, "-o", "json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, json.loads(out), err


def _predict_line(capsys, *args):
    """predict with -o json before the command line after --."""
    cut = args.index("--")
    rc = run(["predict", *args[:cut], "-o", "json", *args[cut:]])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, json.loads(out), err


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


@pytest.mark.parametrize("kind", list(MODELS))
def test_each_family_is_predicted_from_its_config(capsys, tmp_path, kind):
    hf_id, family = MODELS[kind]
    cfg = _config(hf_id)
    from aiconfigurator_core.sdk.models import get_model_family

    local = tmp_path / "model"
    local.mkdir()
    shutil.copyfile(cfg, local / "config.json")
    assert get_model_family(str(local)) == family       # the estimator's own map decides the family
    steps = {}
    for ctx in (2048, 16384):   # within every config's max_position_embeddings (Mixtral: 32,768 with the output)
        rc, d, err = _predict(capsys, _doc(tmp_path), "--model-config", str(cfg), "--input-len", str(ctx),
                              "--output-len", "64", "--concurrency", "4")
        assert rc == 0, err
        r = d["roles"][0]
        assert r["model"] == {"name": "any-model", "family": family, "config": str(cfg)}
        dec = r["decode"]
        assert _finite(dec["step_ms"]) and dec["step_ms"] > 0 and dec["tpot_ms"] == dec["itl_ms"]   # no drafts
        assert sum(dec["breakdown_ms"].values()) == pytest.approx(dec["step_ms"], abs=0.01)
        band = r["band"]
        for key in ("decode_step_sources", "prefill_sources"):
            assert sum(band[key].values()) == pytest.approx(1.0, abs=1e-3) and all(_finite(v) for v in
                                                                                     band[key].values())
        assert band["decode_step_measured_share"] == band["decode_step_sources"].get("silicon", 0.0)
        assert band["decode_step_measured_share"] == pytest.approx(1 - dec["not_measured_share"], abs=2e-3)
        assert band["acceptance"]["spread"] is None and "no speculative" in band["acceptance"]["why"]
        assert "moe-kernel" not in r["assumptions"]           # Kimi-K3's kernel correction is Kimi-K3's alone
        steps[ctx] = dec["breakdown_ms"]["attention_kv"]
    assert steps[16384] > steps[2048]                         # the KV read grows with the context
    rc, _, _ = _predict(capsys, _doc(tmp_path), "--model-config", str(cfg), "--input-len", "2048", "--output-len",
                        "64")
    assert rc == 0
    capsys.readouterr()
    run(["predict", _doc(tmp_path), "--model-config", str(cfg), "--input-len", "2048", "--output-len", "64"])
    text = capsys.readouterr().out
    assert f"family {family}" in text and "from measured rows]" in text


def test_the_figures_are_the_models_own(capsys, tmp_path):
    """A 8B dense model and a 671B MLA MoE model give different steps; neither borrows Kimi-K3's."""
    got = {}
    for kind in ("dense-gqa", "mla"):
        rc, d, _ = _predict(capsys, _doc(tmp_path), "--model-config", str(_config(MODELS[kind][0])), "--input-len",
                            "4096", "--output-len", "64", "--concurrency", "4")
        assert rc == 0
        got[kind] = d["roles"][0]["decode"]["step_ms"]
    rc, d, _ = _predict(capsys, "--preset", "vllm-dcp-no-spec", "--input-len", "4096", "--output-len", "64",
                        "--concurrency", "4")
    kimi = d["roles"][0]["decode"]["step_ms"]
    assert got["dense-gqa"] < got["mla"] and len({got["dense-gqa"], got["mla"], kimi}) == 3


def test_a_local_model_directory(capsys, tmp_path):
    """spec.model.path holding config.json: the same prediction as --model-config on that file."""
    model = tmp_path / "qwen3-8b"
    model.mkdir()
    shutil.copyfile(_config("Qwen/Qwen3-8B"), model / "config.json")
    args = ("--input-len", "4096", "--output-len", "64", "--concurrency", "2")
    rc, d, err = _predict(capsys, _doc(tmp_path, name="Qwen/Qwen3-8B", path=str(model)), *args)
    assert rc == 0, err
    rc, d2, _ = _predict(capsys, _doc(tmp_path), "--model-config", str(model / "config.json"), *args)
    assert rc == 0 and d["roles"][0]["decode"] == d2["roles"][0]["decode"]
    assert d["roles"][0]["model"]["config"] == str(model / "config.json")


def test_a_family_the_estimator_does_not_model(capsys, tmp_path):
    cfg = json.loads(_config("Qwen/Qwen3-8B").read_text())
    cfg.update(architectures=["FalconForCausalLM"], model_type="falcon")
    f = tmp_path / "falcon.json"
    f.write_text(json.dumps(cfg))
    rc, d, err = _predict(capsys, _doc(tmp_path), "--model-config", str(f), "--input-len", "100", "--output-len", "10")
    assert rc == 2 and d["error"]["where"] == "spec.model" and "not modelled" in d["error"]["message"]
    assert "FalconForCausalLM" in d["error"]["message"] and "falcon" in d["error"]["message"] and "not modelled" in err
    assert "Qwen3ForCausalLM" in d["error"]["fix"]           # the architectures it does model


def test_dcp_without_mla_is_not_modelled(capsys, tmp_path):
    rc, d, _ = _predict(capsys, _doc(tmp_path, engine="sglang", version="0.5.23", dcp=8), "--model-config",
                        str(_config("Qwen/Qwen3-8B")), "--input-len", "1000", "--output-len", "10")
    assert rc == 2 and d["error"]["where"] == "spec.parallel.dcp" and "latent attention" in d["error"]["message"], d


def test_the_acceptance_range_is_the_band_of_tpot(capsys):
    base = ("--preset", "vllm-seed", "--input-len", "65536", "--output-len", "3000", "--concurrency", "10")
    rc, d, _ = _predict(capsys, *base, "--acceptance-length", "2.27-2.51")
    assert rc == 0
    r = d["roles"][0]
    spread = r["band"]["acceptance"]["spread"]
    assert d["workload"]["acceptance_range"] == [2.27, 2.51] and r["decode"]["tokens_per_step"] == 2.39
    lo, hi = spread["tpot_ms"]
    assert lo < r["decode"]["tpot_ms"] < hi and lo == pytest.approx(r["decode"]["step_ms"] / 2.51, rel=1e-3)
    assert spread["decode_tok_s"][0] < r["decode"]["decode_tok_s"] < spread["decode_tok_s"][1]
    rc, d, _ = _predict(capsys, *base, "--acceptance-length", "2.39")
    assert rc == 0 and d["roles"][0]["band"]["acceptance"]["spread"] is None
    rc, d, _ = _predict(capsys, *base, "--acceptance-length", "2.5-2.3")
    assert rc == 2 and d["error"]["where"] == "--acceptance-length"


def test_a_command_line_whose_model_is_any_config(capsys, tmp_path):
    """predict --engine E -- ARGV: the command line's model directory holds config.json (DeepSeek-V3: MLA + MoE)."""
    model = tmp_path / "dsv3"
    model.mkdir()
    shutil.copyfile(_config("deepseek-ai/DeepSeek-V3"), model / "config.json")
    rc, d, err = _predict_line(capsys, "--engine", "vllm", "--engine-version", "0.33.0", "--input-len", "4096",
                               "--output-len", "64", "--concurrency", "4", "--", "vllm", "serve", str(model), "-tp", "8")
    assert rc == 0, err
    r = d["roles"][0]
    assert r["engine"]["tp"] == 8 and r["model"]["family"] == "DEEPSEEK"
    assert r["model"]["config"] == str(model / "config.json")
    # DeepSeek's routed MoE runs beside its shared expert (an Overlap op): it is the MoE's time, not "other"
    assert r["bottleneck"]["decode_step"] == "moe_weights"
    # a model neither the catalog nor a config.json describes: the rules refuse it, naming the way out
    rc, d, _ = _predict_line(capsys, "--engine", "vllm", "--input-len", "100", "--output-len", "10", "--", "vllm",
                             "serve", str(tmp_path / "nothing-here"), "-tp", "8")
    assert rc == 1 and d["findings"][0]["rule"] == "unknown-catalog-entry" and "config.json" in d["findings"][0]["fix"]


def test_command_line_options_without_a_command_line_are_refused(capsys):
    for args, where in ((("--gpu-type", "gb300"), "--gpu-type"), (("--engine-version", "0.33.0"), "--engine-version"),
                        (("--bogus",), "predict")):
        rc = run(["predict", "--preset", "vllm-seed", "--input-len", "100", "--output-len", "10", *args, "-o", "json"])
        d = json.loads(capsys.readouterr().out)
        assert rc == 2 and d["error"]["where"] == where, (args, d)


def test_advise_varies_a_document_of_any_model(capsys, tmp_path):
    """advise SPEC --model-config: the candidates are that document's (no DCP for a model without MLA), priced
    from its config; a family not modelled is exit 2 naming it; SPEC with the measured basis is refused."""
    doc = _doc(tmp_path)
    cfg = str(_config("mistralai/Mixtral-8x7B-v0.1"))
    base = ("advise", doc, "--model-config", cfg, "--context", "8192", "--concurrency", "8", "--output-len", "500")
    rc = run([*base, "--top", "50", "-o", "json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["ok"] and d["preset"] == "SPEC" and d["engine"] == "vllm"
    assert {c["knobs"]["dcp"] for c in d["top"]} == {1} and {c["knobs"]["drafts"] for c in d["top"]} == {0}
    rc, p, _ = _predict(capsys, doc, "--model-config", cfg, "--input-len", "8192", "--output-len", "500",
                        "--concurrency", "8")
    assert rc == 0 and d["winner"]["figures"]["step_ms"] == pytest.approx(p["roles"][0]["decode"]["step_ms"], rel=0.05)
    bad = json.loads(_config("Qwen/Qwen3-8B").read_text())
    bad["architectures"] = ["FalconForCausalLM"]
    f = tmp_path / "falcon.json"
    f.write_text(json.dumps(bad))
    rc = run(["advise", doc, "--model-config", str(f), "--context", "1000", "--concurrency", "1", "-o", "json"])
    e = json.loads(capsys.readouterr().out)["error"]
    assert rc == 2 and "not modelled" in e["message"] and "FalconForCausalLM" in e["message"]
    rc = run([*base, "--basis", "measured", "-o", "json"])
    assert rc == 2 and json.loads(capsys.readouterr().out)["error"]["where"] == "SPEC"


def test_the_documents_own_config_decides_the_prediction(capsys, tmp_path):
    """spec.model.config (a path) and spec.model.configJSON (inline, as a resource and a preset carry it): the same
    prediction as --model-config on that file; the inline config's op graph is built from a copy the estimator
    writes (predict/aic.py), and the model section names where the config came from."""
    cfg = _config("Qwen/Qwen3-8B")
    args = ("--input-len", "4096", "--output-len", "64", "--concurrency", "2")
    rc, ref, err = _predict(capsys, _doc(tmp_path), "--model-config", str(cfg), *args)
    assert rc == 0, err
    by_path = tmp_path / "by-path.yaml"
    by_path.write_text(_doc_text(name="any-model", config=f"config: {cfg}"))
    rc, d, err = _predict(capsys, str(by_path), *args)
    assert rc == 0, err
    assert d["roles"][0]["decode"] == ref["roles"][0]["decode"] and d["roles"][0]["model"]["config"] == str(cfg)
    inline = tmp_path / "inline.yaml"
    inline.write_text(_doc_text(name="any-model", config=f"configJSON: {cfg.read_text()!s}".replace("\n", " ")))
    rc, d, err = _predict(capsys, str(inline), *args)
    assert rc == 0, err
    assert d["roles"][0]["decode"] == ref["roles"][0]["decode"]
    assert d["roles"][0]["model"]["config"] == "spec.model.configJSON"


def test_a_preset_with_an_inline_config_is_predicted(capsys):
    rc, d, err = _predict(capsys, "--preset", "qwen3-30b-a3b-b300", "--input-len", "4096", "--output-len", "64",
                          "--concurrency", "8")
    assert rc == 0, err
    assert d["roles"][0]["model"] == {"name": "qwen3-30b-a3b", "family": "MOE", "config": "spec.model.configJSON"}
    assert _finite(d["roles"][0]["decode"]["step_ms"])


def _doc_text(name: str, config: str) -> str:
    return (f"apiVersion: k3.gpustack.ai/v1alpha1\nkind: K3Deployment\nmetadata: {{name: anymodel}}\nspec:\n"
            f"  engine: {{name: vllm, version: 0.33.0}}\n  model: {{name: {name}, {config}}}\n"
            f"  hardware: {{gpuType: b300}}\n  parallel: {{tp: 8}}\n")


def test_advise_follows_the_documents_own_config(capsys, tmp_path):
    """advise SPEC whose spec.model.config names the config: the same candidates and ranking as advise SPEC
    --model-config on that file (without either, a model the catalog lacks has nothing to vary)."""
    cfg = str(_config("mistralai/Mixtral-8x7B-v0.1"))
    by_path = tmp_path / "by-path.yaml"
    by_path.write_text(_doc_text(name="any-model", config=f"config: {cfg}"))
    base = ("--context", "8192", "--concurrency", "8", "--output-len", "500", "-o", "json")
    rc = run(["advise", str(by_path), *base])
    d = json.loads(capsys.readouterr().out)
    rc2 = run(["advise", _doc(tmp_path), "--model-config", cfg, *base])
    ref = json.loads(capsys.readouterr().out)
    assert rc == rc2 == 0 and d["ok"] and d["preset"] == "SPEC"
    assert d["top"] == ref["top"]
