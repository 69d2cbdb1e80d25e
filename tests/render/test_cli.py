"""`render` CLI: refusals write nothing, warnings go to stderr, unusable input exits 2, --out is atomic."""
from __future__ import annotations

import json
import os

import pytest
import yaml

from tests.render.conftest import SPECS, preset_data, run, write_spec



def refused_doc():
    d = preset_data("vllm-seed")
    d["spec"]["parallel"]["dcp"] = 8          # vLLM: DCP > 1 with DSpark is refused (domain §3.1)
    return d


@pytest.mark.parametrize("target", ["launch", "argv", "kubernetes", "docker", "all"])
def test_refused_spec_exits_1_and_writes_nothing(tmp_path, target):
    spec = write_spec(tmp_path, refused_doc())
    out = tmp_path / "out"
    res = run(str(spec), "--target", target, "--out", str(out))
    assert res.exit_code == 1, res.output
    assert "ERROR [vllm-dcp-with-dspark] spec.parallel.dcp" in res.stderr
    assert res.stdout == ""
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["spec.yaml"]     # no temp dirs left behind


def test_render_findings_refuse_too(tmp_path):
    d = preset_data("vllm-fixed")
    d["spec"]["storage"] = {"model": {"kind": "hostPath"}}
    res = run(str(write_spec(tmp_path, d)), "--target", "kubernetes", "--out", str(tmp_path / "o"))
    assert res.exit_code == 1
    assert "spec.storage.model.source" in res.stderr
    assert not (tmp_path / "o").exists()


def test_warnings_go_to_stderr_and_rendering_goes_on():
    res = run("--preset", "vllm-seed", "--target", "argv", "--output", "json")
    assert res.exit_code == 0
    assert "WARNING [vllm-kv-overcommit]" in res.stderr
    assert "WARNING" not in res.stdout
    json.loads(res.stdout)


def test_warning_for_ephemeral_cache():
    res = run(str(SPECS / "emptydir-cache.yaml"), "--target", "kubernetes")
    assert res.exit_code == 0
    assert "render-cache-ephemeral" in res.stderr
    assert yaml.safe_load_all(res.stdout)


@pytest.mark.parametrize("content,needle", [
    (None, "no such file"),
    ("a: [unclosed", "invalid YAML"),
    ("apiVersion: k3.gpustack.ai/v1alpha1\nkind: K3Deployment\nmetadata: {name: x}\nspec: {engine: {name: vllm}, bogus: 1}\n",
     "spec.bogus"),
    ("- just\n- a list\n", "expected a mapping"),
])
def test_unusable_input_exits_2(tmp_path, content, needle):
    p = tmp_path / "in.yaml"
    if content is not None:
        p.write_text(content)
    res = run(str(p), "--target", "argv", "--out", str(tmp_path / "o"))
    assert res.exit_code == 2, res.output
    assert needle in res.stderr
    assert "Traceback" not in res.output
    assert not (tmp_path / "o").exists()


def test_unknown_preset_and_bad_output_combination():
    res = run("--preset", "nope", "--target", "argv")
    assert res.exit_code == 2 and "unknown preset" in res.stderr
    res = run("--preset", "vllm-seed", "--target", "kubernetes", "--output", "shell")
    assert res.exit_code == 2 and "--output" in res.stderr


MARKER = ".gpustack-k3-render"


def _tree(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file() and p.name != MARKER)


def test_out_writes_the_target_files(tmp_path):
    out = tmp_path / "k"
    res = run("--preset", "sglang-seed", "--target", "kubernetes", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert _tree(out) == ["kubernetes.yaml"] and (out / MARKER).is_file()
    kinds = [d["kind"] for d in yaml.safe_load_all((out / "kubernetes.yaml").read_text())]
    assert "Deployment" in kinds and "Service" in kinds and "ConfigMap" not in kinds


def test_out_all_has_one_folder_per_target(tmp_path):
    out = tmp_path / "all"
    res = run("--preset", "vllm-fixed", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert {"argv", "kubernetes", "docker"} <= {p.name for p in out.iterdir()}
    assert (out / "docker" / "docker-run.sh").read_text().count("docker run") == 1


def test_out_over_an_earlier_render_leaves_nothing_of_it(tmp_path):
    """issue 23: a render over an earlier one (another deployment, another target) is replaced as a whole."""
    out = tmp_path / "o"
    assert run("--preset", "kimi-k3-b300-1p1d", "--out", str(out)).exit_code == 0
    assert (out / "docker" / "refused.txt").is_file()
    res = run("--preset", "vllm-seed", "--target", "argv", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert _tree(out) == ["argv.json", "argv.sh"]
    assert json.loads((out / "argv.json").read_text())["command"] == ["vllm", "serve"]
    assert sorted(os.listdir(tmp_path)) == ["o"]                # no staging or backup folders left


def test_out_refuses_a_folder_no_render_wrote(tmp_path):
    """A non-empty folder without the render's marker holds someone else's files: refused, nothing touched."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    (out / "argv.json").write_text("stale")
    res = run("--preset", "vllm-seed", "--target", "argv", "--out", str(out), "-o", "json")
    assert res.exit_code == 2 and "no render wrote" in res.stderr
    assert json.loads(res.stdout)["error"]["where"] == f"--out {out}"
    assert (out / "mine.txt").read_text() == "keep" and (out / "argv.json").read_text() == "stale"
    assert sorted(os.listdir(tmp_path)) == ["o"]


def test_shell_files_are_executable_with_a_shebang(tmp_path):
    out = tmp_path / "o"
    assert run("--preset", "vllm-fixed", "--out", str(out)).exit_code == 0
    for sh in ("argv/argv.sh", "docker/docker-run.sh"):
        assert os.access(out / sh, os.X_OK) and (out / sh).read_text().startswith("#!/bin/sh\n"), sh
    assert not os.access(out / "argv" / "argv.json", os.X_OK)


def test_topology_yaml_has_no_anchors_or_aliases():
    import re

    res = run("--preset", "dsv41-flash-gb300-8p1d", "--target", "kubernetes")
    assert res.exit_code == 0, res.output
    assert not re.search(r"(^|[\s:\-\[,])[&*][A-Za-z0-9_]", res.stdout, re.M)
    assert yaml.safe_load_all(res.stdout)


@pytest.mark.parametrize("target", ["gpustack", "all", "launch", "argv", "docker", "kubernetes"])
@pytest.mark.parametrize("output", ["json", "yaml"])
def test_every_target_honours_the_machine_formats(target, output):
    """issue 23: `--target gpustack -o json` and `--target all -o json` printed text."""
    res = run("--preset", "vllm-fixed", "--target", target, "-o", output)
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout) if output == "json" else [d for d in yaml.safe_load_all(res.stdout) if d][0]
    assert isinstance(data, dict)
    if target in ("gpustack", "all"):
        assert data["files"] and all(isinstance(v, (dict, list, str)) for v in data["files"].values())


def test_refusal_under_json_is_a_findings_object(tmp_path):
    res = run(str(write_spec(tmp_path, refused_doc())), "-o", "json")
    assert res.exit_code == 1
    d = json.loads(res.stdout)
    assert d["ok"] is False and d["exit_code"] == 1 and any(f["severity"] == "error" for f in d["findings"])


def test_fail_on_warning_refuses_a_render_with_warnings(tmp_path):
    res = run("--preset", "vllm-seed", "--target", "argv", "--out", str(tmp_path / "o"), "--fail-on", "warning")
    assert res.exit_code == 1 and "--fail-on warning" in res.stderr
    assert not (tmp_path / "o").exists()
    assert run("--preset", "vllm-seed", "--target", "argv", "--fail-on", "error").exit_code == 0


def test_out_is_a_file_exits_2(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    res = run("--preset", "vllm-seed", "--target", "argv", "--out", str(f))
    assert res.exit_code == 2


def test_write_failure_leaves_no_partial_output(tmp_path, monkeypatch):
    """If writing fails half-way, the new folder does not appear at all."""
    from gpustack_k3.render import writer

    real_open = open
    calls = {"n": 0}

    def flaky_open(path, *a, **kw):
        if "w" in (a[0] if a else kw.get("mode", "r")):
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError(28, "No space left on device")
        return real_open(path, *a, **kw)

    monkeypatch.setattr(writer, "open", flaky_open, raising=False)
    res = run("--preset", "vllm-seed", "--target", "docker", "--out", str(tmp_path / "o"))
    assert res.exit_code == 2 and "No space left" in res.stderr
    assert sorted(os.listdir(tmp_path)) == []


def test_stdout_formats():
    k = run("--preset", "vllm-seed", "--target", "kubernetes", "--output", "json")
    assert json.loads(k.stdout)["kind"] == "List"
    d = run("--preset", "vllm-seed", "--target", "docker", "--output", "shell")
    assert d.stdout.splitlines()[0] == "#!/bin/sh" and d.stdout.splitlines()[2].startswith("docker run")
    a = run("--preset", "vllm-seed", "--target", "argv", "--output", "yaml")
    assert yaml.safe_load(a.stdout)["command"] == ["vllm", "serve"]
    every = run("--preset", "vllm-seed", "--target", "all")
    assert "==> argv/argv.json <==" in every.stdout and "==> kubernetes/kubernetes.yaml <==" in every.stdout


def test_gpustack_target_gets_the_document_and_worker(tmp_path):
    res = run("--preset", "sglang-seed", "--target", "gpustack", "--worker", "node-7", "--out", str(tmp_path / "g"))
    assert res.exit_code == 0, res.output
    assert _tree(tmp_path / "g") == ["backend.json", "import.yaml", "model.json"]
    model = json.loads((tmp_path / "g" / "model.json").read_text())
    assert "node-7" in json.dumps(model)
    assert model.get("model_scope_model_id") == "moonshotai/Kimi-K3" or \
        model.get("huggingface_repo_id") == "moonshotai/Kimi-K3"


def test_cli_starts_without_heavy_imports():
    import subprocess
    import sys

    code = ("import sys, gpustack_k3.cli.render_cmd, gpustack_k3.render; "
            "print(sorted(m for m in ('jinja2','kubernetes_validate','docker','yaml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_launch_target_prints_the_launch_spec_the_pod_is_tied_to(output):
    """`--target launch` is the launch spec every target projects; the pod template carries its sha256."""
    import hashlib

    from gpustack_k3.core.launch import build_launch
    from tests.render.conftest import doc_of

    res = run("--preset", "vllm-fixed", "--target", "launch", "-o", output)
    assert res.exit_code == 0, res.output
    shown = json.loads(res.stdout) if output == "json" else yaml.safe_load(res.stdout)
    launch, _, _ = build_launch(doc_of(preset_data("vllm-fixed")))
    assert shown == json.loads(json.dumps(launch.to_dict()))
    assert shown["command"] + [t for a in shown["arguments"] for t in a["tokens"]] == launch.argv
    k8s = run("--preset", "vllm-fixed", "--target", "kubernetes")
    (wl,) = [d for d in yaml.safe_load_all(k8s.stdout) if d and d["kind"] == "Deployment"]
    if output == "json":
        assert wl["spec"]["template"]["metadata"]["annotations"]["k3.gpustack.ai/launch-sha256"] == \
            hashlib.sha256(res.stdout.encode()).hexdigest()


def test_existing_folder_is_all_or_nothing(tmp_path):
    """A render that fails leaves the earlier render as it was."""
    out = tmp_path / "o"
    assert run("--preset", "vllm-seed", "--target", "argv", "--out", str(out)).exit_code == 0
    before = {p: (out / p).read_text() for p in _tree(out)}
    res = run(str(write_spec(tmp_path, refused_doc())), "--target", "argv", "--out", str(out))
    assert res.exit_code == 1
    assert {p: (out / p).read_text() for p in _tree(out)} == before
    assert sorted(os.listdir(tmp_path)) == ["o", "spec.yaml"]


def test_failure_while_swapping_in_puts_the_old_render_back(tmp_path, monkeypatch):
    from gpustack_k3.render import writer

    out = tmp_path / "o"
    assert run("--preset", "vllm-seed", "--target", "argv", "--out", str(out)).exit_code == 0
    before = {p: (out / p).read_text() for p in _tree(out)}
    real = os.rename
    calls = {"n": 0}

    def flaky(src, dst):
        calls["n"] += 1
        if calls["n"] == 2:     # the new tree's move in: after the old one was moved aside
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(writer.os, "rename", flaky)
    res = run("--preset", "vllm-fixed", "--target", "docker", "--out", str(out))
    assert res.exit_code == 2 and "Input/output error" in res.stderr
    assert {p: (out / p).read_text() for p in _tree(out)} == before
    assert sorted(os.listdir(tmp_path)) == ["o"]


@pytest.mark.parametrize("args,needle", [
    (["--namespace", "a/b"], "--namespace"),
    (["--namespace", "Bad NS"], "--namespace"),
    (["--target", "gpustack", "--worker", "bad name"], "--worker"),
    (["--target", "gpustack", "--cluster", "\udcff"], "--cluster"),
])
def test_unusable_option_values_exit_2(args, needle):
    res = run("--preset", "vllm-fixed", *args)
    assert res.exit_code == 2 and needle in res.stderr, res.output
