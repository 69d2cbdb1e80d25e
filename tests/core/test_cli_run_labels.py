"""Issue 33 field coverage, Docker: the document's metadata.labels and annotations label the container that `run
--runtime docker` starts, as `render --target docker` renders it (gpustack_k3/render/docker.py document_labels)."""
from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from gpustack_k3.cli.main import cli


def _spec(tmp_path):
    r = CliRunner().invoke(cli, ["presets", "--show", "vllm-fixed"])
    d = yaml.safe_load(r.stdout)
    d["metadata"]["labels"] = {"team": "inference"}
    d["metadata"]["annotations"] = {"example.com/owner": "me"}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    return str(p)


def test_run_dry_run_and_the_started_container_carry_the_documents_labels(tmp_path, monkeypatch):
    spec = _spec(tmp_path)
    r = CliRunner().invoke(cli, ["run", "start", spec, "--dry-run", "-o", "json"])
    assert r.exit_code == 0, r.output
    labels = json.loads(r.stdout)["params"]["labels"]
    assert labels["team"] == "inference" and labels["example.com/owner"] == "me"

    import gpustack_k3.runtime.docker as rt

    started = []

    class Stop(Exception):
        pass

    def run(self, launch, **kw):
        started.append(dict(launch.params))
        raise Stop

    monkeypatch.setattr(rt.DockerRunner, "run", run)
    CliRunner().invoke(cli, ["run", "start", spec])
    assert started and started[0]["labels"] == labels
