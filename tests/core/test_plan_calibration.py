"""Calibrated inputs are told apart from predictions: the catalog names the log each model entry's figures
were taken or fitted from (models.yaml ``calibration``), the plan says so in a note, and the README's accuracy
figures are only the predictions (bench/planner_accuracy.py)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpustack_k3.catalog.loader import DATA, CatalogError, load_catalog
from gpustack_k3.core.plan import plan
from gpustack_k3.core.resolve import resolve

from .conftest import preset_doc

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("preset,log_preset", [("vllm-seed", "vllm-seed"), ("vllm-fixed", "vllm-seed"),
                                                ("sglang-seed", "sglang-seed"), ("sglang-fixed", "sglang-seed")])
def test_kimi_k3_plans_name_their_calibrated_inputs(preset, log_preset):
    notes = [n for n in plan(resolve(preset_doc(preset))).notes if n.startswith("calibrated inputs:")]
    assert len(notes) == 1
    cal = resolve(preset_doc(preset)).figures.calibration
    assert f"at the settings of preset {log_preset} is calibration, not accuracy" in notes[0]
    assert all(name in notes[0] for name in cal.inputs) and "tests/fixtures/logs/" in notes[0]


def test_the_cpu_preset_is_a_prediction_and_says_nothing_of_calibration():
    notes = plan(resolve(preset_doc("vllm-cpu-smollm2"))).notes
    assert not [n for n in notes if "calibrat" in n]


def test_the_calibrated_inputs_are_those_fitted_to_the_seeds_logs():
    figures = load_catalog().models["kimi-k3"].engines
    assert {"non_kv_fixed_gib", "activation_peak_gib", "kv_bytes_per_token"} <= set(figures["vllm"].calibration.inputs)
    assert {"full_kv_bytes_per_token", "mamba_spec_ratio"} <= set(figures["sglang"].calibration.inputs)


@pytest.mark.parametrize("mutate,needle", [
    (lambda c: c.update(preset="nope"), "calibration names unknown preset nope"),
    (lambda c: c["inputs"].append("mamba_spec_ratio"), "['mamba_spec_ratio'] are not figures of this entry"),
    (lambda c: c["inputs"].append("calibration"), "['calibration'] are not figures of this entry"),
])
def test_a_broken_calibration_entry_is_refused(tmp_path, mutate, needle):
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    path = data / "models.yaml"
    doc = yaml.safe_load(path.read_text())
    mutate(doc["models"]["kimi-k3"]["engines"]["vllm"]["calibration"])
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(CatalogError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        load_catalog(data)


def test_the_accuracy_bench_reports_only_predictions_as_accuracy():
    res = subprocess.run([sys.executable, str(REPO / "bench" / "planner_accuracy.py")], capture_output=True,
                         text=True, timeout=120, check=True)
    out = json.loads(res.stdout)
    kinds = {(c["preset"], f["figure"]): f["kind"] for c in out["cases"] for f in c["figures"]}
    assert {k for k, v in kinds.items() if v == "prediction"} == {
        ("sglang-seed", "full-attention pool tokens"), ("sglang-seed", "draft pool tokens (DCP virtual)"),
        ("vllm-cpu-smollm2", "KV cache tokens"), ("vllm-cpu-smollm2", "concurrency at max_model_len")}
    assert all(v == "calibration" for (preset, _), v in kinds.items() if preset == "vllm-seed")
    # the README's figures are the bench's
    readme = (REPO / "README.md").read_text()
    rows = {(c["preset"], f["figure"]): f for c in out["cases"] for f in c["figures"]}
    cpu, pool = rows[("vllm-cpu-smollm2", "KV cache tokens")], rows[("sglang-seed", "full-attention pool tokens")]
    assert f"{cpu['plan']:,} KV tokens vs {cpu['log']:,} in a real vllm-cpu 0.32.0 log" in readme
    assert f"pool {pool['plan']:,} tokens vs the engine's {pool['log']:,} (+{pool['relative_difference']:.1%}" \
        .replace("%", " %") in readme
    assert out["max_prediction_error"] < 0.02


def test_kimi_k3_config_derived_plan_is_computed_apart_from_the_calibrated_one():
    """The calibrated plan stays labelled calibration; the plan derived from Kimi-K3's config.json (the catalog's
    config.json-shaped block) shares none of the calibrated inputs and is compared, not substituted: its weights are
    the target's alone (the log's 194.54 GiB also holds the DSpark draft and the vision tower), its KV bytes per token
    the 24 MLA layers' latent (the log's 17,481 also carries the KDA state in the hybrid pages)."""
    from gpustack_k3.core.plan import _plan_config

    r = resolve(preset_doc("vllm-seed"))
    cal = plan(r)
    assert cal.basis == "calibrated" and cal.weights_gib == 194.54 and cal.kv_bytes_per_token == 17481
    derived = _plan_config(r, r.model_arch)
    assert derived.basis == "config.json"
    assert derived.kv_bytes_per_token == (512 + 64) * 24                   # fp8 MLA latent, 24 full-attention layers
    assert 170 < derived.weights_gib < cal.weights_gib                     # the target alone
    assert derived.unaccounted                                             # the DSpark draft is not in the config
    assert not [n for n in derived.notes if n.startswith("calibrated inputs:")]
