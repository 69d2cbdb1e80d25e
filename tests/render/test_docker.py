"""Docker target: SDK run kwargs accepted by docker-py; the `docker run` line says the same thing."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpustack_k3.core.launch_types import Arg
from gpustack_k3.render.docker import docker_run_line, docker_run_params
from tests.render.conftest import EDGES, PRESETS, launch_of, preset_data
from tests.render.test_argv import _corpus, run_shell_line

CASES = {**{p: preset_data(p) for p in PRESETS}, **EDGES}


def parse_docker_run(argv: list[str]) -> dict:
    """The docker CLI flags this target emits, back into SDK kwargs form."""
    assert argv[:2] == ["docker", "run"], argv[:2]
    it = iter(argv[2:])
    out: dict = {"environment": {}, "labels": {}, "volumes": {}, "ulimits": [], "pass_env": []}
    for tok in it:
        if tok == "--detach":
            out["detach"] = True
        elif tok == "--name":
            out["name"] = next(it)
        elif tok == "--network":
            out["network_mode"] = next(it)
        elif tok == "--ipc":
            out["ipc_mode"] = next(it)
        elif tok == "--shm-size":
            out["shm_size"] = next(it)
        elif tok == "--ulimit":
            name, _, lim = next(it).partition("=")
            soft, _, hard = lim.partition(":")
            out["ulimits"].append({"name": name, "soft": int(soft), "hard": int(hard)})
        elif tok == "--gpus":
            out["device_requests"] = [{"driver": "", "count": int(next(it)), "capabilities": [["gpu"]]}]
        elif tok == "--volume":
            src, bind, mode = next(it).rsplit(":", 2)
            out["volumes"][src] = {"bind": bind, "mode": mode}
        elif tok == "--env":
            k, eq, v = next(it).partition("=")
            if eq:
                out["environment"][k] = v
            else:
                out["pass_env"].append(k)
        elif tok == "--label":
            k, _, v = next(it).partition("=")
            out["labels"][k] = v
        elif tok == "--entrypoint":
            out["entrypoint"] = [next(it)]
        else:
            out["image"] = tok
            out["command"] = list(it)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_params_project_the_launch_spec(case):
    launch = launch_of(CASES[case])
    p = docker_run_params(launch)
    assert p["image"] == launch.image
    assert p["entrypoint"] + p["command"] == launch.argv
    assert p["environment"] == launch.env
    assert p["network_mode"] == "host" and p["ipc_mode"] == "host"
    assert p["shm_size"] == f"{launch.shm_size_gib}g"
    if launch.gpu_resource:
        assert p["device_requests"] == [{"driver": "", "count": launch.gpu_count, "capabilities": [["gpu"]]}]
    else:                                                   # CPU test hardware: no GPU request
        assert "device_requests" not in p
    assert {"name": "memlock", "soft": -1, "hard": -1} in p["ulimits"]
    assert {"name": "stack", "soft": 67108864, "hard": 67108864} in p["ulimits"]
    assert p["labels"]["app.kubernetes.io/managed-by"] == "gpustack-k3"
    binds = {m["bind"]: m["mode"] for m in p["volumes"].values()}
    for v in launch.volumes:
        if v.purpose != "shm":
            assert binds[v.mount_path] == ("ro" if v.read_only else "rw")
    json.dumps(p)                                           # plain JSON, no SDK objects


def test_volume_sources_per_kind():
    hp = docker_run_params(launch_of(EDGES["hostpath-placement"]))["volumes"]
    assert hp == {"/data/models": {"bind": "/models", "mode": "ro"}, "/data/k3-cache": {"bind": "/cache", "mode": "rw"}}
    sts = launch_of(EDGES["statefulset-secret"])
    assert docker_run_params(sts)["volumes"]["k3-statefulset-compile-cache"] == {"bind": "/cache", "mode": "rw"}


def test_gpus_false_and_secrets():
    launch = launch_of(EDGES["statefulset-secret"])
    p = docker_run_params(launch, gpus=False)
    assert "device_requests" not in p
    assert "HF_TOKEN" not in p["environment"]
    p = docker_run_params(launch, secrets={"HF_TOKEN": "hf_x", "OTHER": "y"})
    assert p["environment"]["HF_TOKEN"] == "hf_x" and "OTHER" not in p["environment"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_docker_sdk_accepts_the_params(case):
    """docker-py turns the kwargs into a create body without a daemon (HostConfig validates them)."""
    from docker.models.containers import _create_container_args

    p = docker_run_params(launch_of(CASES[case]))
    p.pop("detach")                                        # run()-only; create() does not take it
    create = _create_container_args({**p, "version": "1.41"})
    hc = create["host_config"]
    launch = launch_of(CASES[case])
    assert hc["IpcMode"] == "host" and hc["NetworkMode"] == "host"
    assert hc["ShmSize"] == launch.shm_size_gib * 1024 ** 3
    if launch.gpu_resource:
        assert hc["DeviceRequests"][0]["Count"] == launch.gpu_count == 8
        assert hc["DeviceRequests"][0]["Capabilities"] == [["gpu"]]
    assert {u["Name"] for u in hc["Ulimits"]} == {"memlock", "stack"}
    assert create["entrypoint"] + create["command"] == launch_of(CASES[case]).argv


def test_docker_runner_takes_the_params():
    """The Docker runner (runtime/docker.py) builds its create kwargs from this target."""
    from gpustack_k3.runtime import docker as runtime
    launch = launch_of(preset_data("vllm-seed"))
    dl = runtime.DockerLaunch.from_launch_spec(launch)
    params, notes = runtime.prepare_params(dl, host_has_gpus=False)
    assert "device_requests" not in params and notes
    assert params["entrypoint"] + params["command"] == launch.argv
    assert params["network_mode"] == "host"


@pytest.mark.parametrize("case", ["vllm-seed", "sglang-seed", "statefulset-secret", "hostpath-placement"])
def test_run_line_is_equivalent_to_the_params(case, tmp_path):
    launch = launch_of(CASES[case])
    p = docker_run_params(launch)
    argv, _ = run_shell_line(docker_run_line(launch), tmp_path, "docker")
    got = parse_docker_run(["docker", *argv[1:]])
    assert got.pop("pass_env") == [s.name for s in launch.secret_env]
    assert got == p


def test_run_line_survives_injection_corpus(tmp_path):
    base = launch_of(preset_data("sglang-fixed"))
    corpus = _corpus(tmp_path)
    args = []
    for i, value in enumerate(corpus):
        args += [f"--flag-{i}", value]
    env = {**base.env, **{f"EVIL_{i}": v for i, v in enumerate(corpus)}}
    # engine_version reaches a container label (app.kubernetes.io/version)
    launch = replace(base, arguments=[*base.arguments, Arg("extraArgs", args)], env=env, engine_version=corpus[1],
                     image=f"img:$(touch {tmp_path}/PWNED)")
    argv, _ = run_shell_line(docker_run_line(launch), tmp_path, "docker")
    got = parse_docker_run(["docker", *argv[1:]])
    got.pop("pass_env")
    assert got == docker_run_params(launch)
    assert not (tmp_path / "PWNED").exists()
