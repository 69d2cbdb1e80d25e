"""tools/engine_oracle/synth.py --product-from (vfr6): the report's --config files (serve_configs) are written again
before the product judges, so the product reads the file the release read -- no 'no such config file' refusal of
a line the release accepted; a path the report does not hold stays missing (the line's own missing file); a report
that kept no files counts such a line as not re-checkable. The product here is the real check-args."""
from __future__ import annotations

import json

from tools.engine_oracle import synth

GONE = "/tmp/oracle-synth-vfr6-gone/serve-config"


def report(tmp_path, serve_configs: dict[str, str] | None):
    judged = [
        # the release read the file and accepted the line
        {"verdict": "accepted", "argv": ["/models/smollm2-hf", "--config", f"{GONE}/serve.yaml"], "env": {},
         "model": None, "model_config": None, "gpu_type": "b300", "gpus": 8, "where": None, "message": ""},
        # the file never existed: the release refused it
        {"verdict": "refused", "argv": ["/models/smollm2-hf", "--config", f"{GONE}/missing.yaml"], "env": {},
         "model": None, "model_config": None, "gpu_type": "b300", "gpus": 8, "where": "vllm/utils/argparse_utils.py:1",
         "message": "No such file or directory"},
    ]
    doc = {"release": "vllm-0.34.0", "judged": judged, "model_variants": {}}
    if serve_configs is not None:
        doc["serve_configs"] = serve_configs
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    return path


def test_product_from_writes_the_serve_configs_again(tmp_path):
    path = report(tmp_path, {f"{GONE}/serve.yaml": "max-model-len: 1024\nenforce-eager: true\n"})
    assert synth.main(["--product-from", str(path)]) == 0
    p = json.loads(path.read_text())["product"]
    assert p["false_refusals"] == [], p["false_refusals"]
    assert p["misses"] == [], p["misses"]
    assert (p["counts"]["decidable"], p["counts"]["agree"], p["counts"]["serve_config_gone"]) == (2, 2, 0)


def test_without_the_files_the_line_is_not_rechecked(tmp_path):
    path = report(tmp_path, None)
    assert synth.main(["--product-from", str(path)]) == 0
    c = json.loads(path.read_text())["product"]["counts"]
    assert (c["decidable"], c["serve_config_gone"], c["false_refusal"]) == (0, 2, 0)


def test_remap_names_the_copy(tmp_path):
    files = synth._restore_serve_configs({f"{GONE}/serve.yaml": "a: 1\n", "/tmp/other/serve-config/serve.yaml": "b: 2\n"},
                                         tmp_path)
    assert len(set(files.values())) == 2
    r = synth._remap_serve_configs({"argv": ["m", "--config", f"{GONE}/serve.yaml",
                                             "--x", f"{GONE}/missing.yaml"]}, files)
    new = files[f"{GONE}/serve.yaml"]
    assert r["argv"] == ["m", "--config", new, "--x", f"{GONE}/missing.yaml"]
    assert open(new).read() == "a: 1\n"
